/* y = A x for a coarse multigrid operator stored as a symmetric node stencil.
 *
 * A coarse operator of the nested grids (sphyr_hpc.solvers.grid_galerkin) couples each node with
 * the 3x3 nodes around it, 2 DOFs a node.  It is symmetric, so a node keeps only its diagonal 2x2
 * block and the blocks towards its "upper" neighbours, those after it in row-major order: east
 * (0, +1) and the next row's north-west (+1, -1), north (+1, 0) and north-east (+1, +1).  A node's
 * NS = 19 values:
 *
 *   [0..2]  D: A[2n][2n], A[2n][2n+1], A[2n+1][2n+1]
 *   [3..6]  E, [7..10] NW, [11..14] N, [15..18] NE: U[d][e] = A[2n + d][2m + e] row-major,
 *           m the neighbour in that direction.
 *
 * so y(n) = D x(n) + sum_dir U_dir(n) x(n + dir) + sum_dir U_dir(n - dir)^T x(n - dir).
 *
 * Values of a node (x's 2, a stencil's NS) come from the owned box, (ny, nx) nodes row-major, or
 * from the ring of nodes around it, as in q4_apply.c: the top and bottom rows (nx + 2 nodes from
 * column -1) and the left and right columns (ny + 2 nodes from row -1), corners included.  A ring
 * node outside the grid holds zeros (x's values and its stencil), so no term needs a test.  y,
 * b, d and x are over the owned nodes, (ny, nx, 2) contiguous.  The products read the stencils
 * repacked for vectors of nodes (stencil_pack), once an assembly.
 */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define NS 19

typedef struct {
    const double *owned, *top, *bottom, *left, *right;
    int64_t ny, nx, width;
} field;

/* Node (r, c)'s values, r in [-1, ny], c in [-1, nx] (not both outside for the owned rows). */
static const double *node(const field *f, int64_t r, int64_t c)
{
    if (r < 0)
        return f->top + f->width * (c + 1);
    if (r >= f->ny)
        return f->bottom + f->width * (c + 1);
    if (c < 0)
        return f->left + f->width * (r + 1);
    if (c >= f->nx)
        return f->right + f->width * (r + 1);
    return f->owned + f->width * (r * f->nx + c);
}

/* Row r's first node (column 0) and its values at columns -1 and nx: for a ring row, its own
 * array; for an owned row, the row and the ring columns. */
static const double *row_start(const field *f, int64_t r)
{
    if (r < 0)
        return f->top + f->width;
    if (r >= f->ny)
        return f->bottom + f->width;
    return f->owned + f->width * r * f->nx;
}

static field make(const double *owned, const double *ring, int64_t ny, int64_t nx, int64_t width)
{
    field f = {owned, ring, ring + width * (nx + 2), ring + 2 * width * (nx + 2),
               ring + width * (2 * (nx + 2) + (ny + 2)), ny, nx, width};
    return f;
}

/* The products read the stencils packed for vectors of LANES nodes: node rows -1 .. ny - 1 (the ring's row
 * above the box first), each a row of blocks; block b holds the columns 8 (b - 1) - 1 .. 8 (b - 1) + 6
 * (LANES of them, the ring's columns -1 and nx included, zeros past them), value k of its nodes at
 * [k][lane].  Blocks 0 and nblocks + 1 of a row are zeros, so a block's neighbours along x (b - 1,
 * b + 1) always exist.  A block's NS x LANES values sit at fixed offsets from it: one address a
 * block (a plane per value, as first tried, spilled 31 addresses and ran at 5 ns a node from cache). */
#define LANES 8
/* Packed rows this far ahead of the one in work are asked for: the hardware prefetcher alone leaves the
 * product waiting.  A block's lines are asked for as the block of the row in work is computed, into L2
 * (hint 2): a row's requests in one burst (as first written, non-temporal) stalled an Intel core until
 * the line fill buffers drained and left the lines in L1, where two rows of blocks do not fit; 513x513
 * nodes took 13 ms a Chebyshev step so, 3.4 ms spread. */
#define AHEAD 2
#define HINT 2
typedef double v8 __attribute__((vector_size(8 * LANES)));
typedef int64_t v8i __attribute__((vector_size(8 * LANES)));

static int64_t blocks_of(int64_t nx)
{
    return (nx + 2 + LANES - 1) / LANES;
}

/* Doubles the packed stencils take (stencil_pack), and a product's row buffers (the work of both kernels). */
int64_t stencil_packed_size(int64_t ny, int64_t nx)
{
    return (ny + 1) * (blocks_of(nx) + 2) * NS * LANES;
}

int64_t stencil_work_size(int64_t nx)
{
    return 8 * (blocks_of(nx) + 2) * LANES;
}

static void put(double *restrict block, int64_t lane, const double *restrict sn)
{
    for (int k = 0; k < NS; ++k)
        block[LANES * k + lane] = sn[k];
}

/* The stencils of the owned nodes and the ring (s, s_ring) packed for the products: every value written,
 * the zeros past the nodes included. */
SPHYR_KERNEL
void stencil_pack(int64_t ny, int64_t nx, const double *s, const double *s_ring, double *restrict packed)
{
    const field f = make(s, s_ring, ny, nx, NS);
    const int64_t nb = blocks_of(nx), row = (nb + 2) * NS * LANES, block = NS * LANES;
    for (int64_t r = -1; r < ny; ++r) {
        double *restrict at = packed + row * (r + 1);
        const double *sr = row_start(&f, r);
        memset(at, 0, sizeof(double) * (size_t)block);
        memset(at + block * nb, 0, sizeof(double) * 2 * (size_t)block);  /* the last nodes' block and the one after */
        put(at + block, 0, node(&f, r, -1));
        for (int64_t c = 0; c < nx; ++c)
            put(at + block * ((c + 1) / LANES + 1), (c + 1) % LANES, sr + NS * c);
        put(at + block * ((nx + 1) / LANES + 1), (nx + 1) % LANES, node(&f, r, nx));
    }
}

static inline v8 load8(const double *p)
{
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store8(double *p, v8 v)
{
    memcpy(p, &v, sizeof v);
}

/* x's node row r (in [-1, ny]) split into its two components u, v, column c at [c + 1] (the ring's columns
 * -1 and nx included), the row buffers' width (nblocks + 2) LANES with zeros past nx. */
static void split_row(const field *fx, int64_t r, double *restrict u, double *restrict v)
{
    const int64_t nx = fx->nx;
    const double *row = row_start(fx, r), *before = node(fx, r, -1), *after = node(fx, r, nx);
    u[0] = before[0], v[0] = before[1];
    for (int64_t c = 0; c < nx; ++c) {
        u[c + 1] = row[2 * c];
        v[c + 1] = row[2 * c + 1];
    }
    u[nx + 1] = after[0], v[nx + 1] = after[1];
}

/* A Chebyshev step's update of node row j, fused into its product (stencil_chebyshev_step): d = c_d d +
 * c_r D^-1 (b - A x), x += d, on the row's values (x, d, b, dinv at its column 0; nx columns; the old d
 * read from d_old). */
typedef struct {
    double *x, *d;
    const double *d_old, *b, *dinv;
    double c_d, c_r;
    int64_t nx;
} step_io;

/* The update of columns c0 .. c0 + 7 (those in [0, nx)) from their product's u and v (yu, yv). */
static inline void step_block(const step_io *io, int64_t c0, v8 yu, v8 yv)
{
    const v8i low = {0, 8, 1, 9, 2, 10, 3, 11}, high = {4, 12, 5, 13, 6, 14, 7, 15};
    const v8 f0 = __builtin_shuffle(yu, yv, low), f1 = __builtin_shuffle(yu, yv, high);
    const int64_t at = 2 * c0;
    if (c0 >= 0 && c0 + LANES <= io->nx) {
        const v8 cd = {io->c_d, io->c_d, io->c_d, io->c_d, io->c_d, io->c_d, io->c_d, io->c_d},
                 cr = {io->c_r, io->c_r, io->c_r, io->c_r, io->c_r, io->c_r, io->c_r, io->c_r};
        const v8 a = cd * load8(io->d_old + at) + cr * load8(io->dinv + at) * (load8(io->b + at) - f0);
        const v8 z = cd * load8(io->d_old + at + 8) + cr * load8(io->dinv + at + 8) * (load8(io->b + at + 8) - f1);
        store8(io->d + at, a);
        store8(io->d + at + 8, z);
        store8(io->x + at, load8(io->x + at) + a);
        store8(io->x + at + 8, load8(io->x + at + 8) + z);
        return;
    }
    double f[16];
    memcpy(f, &f0, sizeof f0);
    memcpy(f + 8, &f1, sizeof f1);
    for (int64_t q = 0; q < 16; ++q) {
        const int64_t c = c0 + q / 2;
        if (c < 0 || c >= io->nx)
            continue;
        const double step = io->c_d * io->d_old[at + q] + io->c_r * io->dinv[at + q] * (io->b[at + q] - f[q]);
        io->d[at + q] = step;
        io->x[at + q] += step;
    }
}

/* Node row j's product into yu, yv (column c at [c + 1]): s1, s0 the packed rows j and j - 1 (at their block
 * 0), u0 .. v2 x's rows j - 1, j, j + 1 (split_row); ahead, where given, the packed row AHEAD rows on (its
 * lines asked for block by block). */
static inline __attribute__((always_inline)) void product_row(
    int64_t nb, const double *restrict s1, const double *restrict s0, const double *restrict u0,
    const double *restrict v0, const double *restrict u1, const double *restrict v1, const double *restrict u2,
    const double *restrict v2, double *restrict yu, double *restrict yv, const double *ahead, const step_io *step)
{
    const v8i before = {7, 8, 9, 10, 11, 12, 13, 14}, after = {1, 2, 3, 4, 5, 6, 7, 8};
#define S1(k) load8(a + LANES * (k))
#define S0(k) load8(o + LANES * (k))
#define W1(k) __builtin_shuffle(load8(a - NS * LANES + LANES * (k)), S1(k), before)
#define E0(k) __builtin_shuffle(S0(k), load8(o + NS * LANES + LANES * (k)), after)
#define W0(k) __builtin_shuffle(load8(o - NS * LANES + LANES * (k)), S0(k), before)
    for (int64_t b = 1; b <= nb; ++b) {
        const double *a = s1 + NS * LANES * b, *o = s0 + NS * LANES * b;
        if (ahead)
            for (int k = 0; k < NS; ++k)
                __builtin_prefetch(ahead + NS * LANES * b + LANES * k, 0, HINT);
        const int64_t c = LANES * (b - 1);
        const v8 xu = load8(u1 + c), xv = load8(v1 + c), eu = load8(u1 + c + 1), ev = load8(v1 + c + 1);
        const v8 wu = load8(u1 + c - 1), wv = load8(v1 + c - 1);
        const v8 nu = load8(u2 + c), nv = load8(v2 + c), nwu = load8(u2 + c - 1), nwv = load8(v2 + c - 1);
        const v8 neu = load8(u2 + c + 1), nev = load8(v2 + c + 1);
        const v8 su = load8(u0 + c), sv = load8(v0 + c), swu = load8(u0 + c - 1), swv = load8(v0 + c - 1);
        const v8 seu = load8(u0 + c + 1), sev = load8(v0 + c + 1);
        /* D, the upper blocks E, NW, N, NE, then the transposed ones from W (its E), SE (its NW), S (its N)
         * and SW (its NE) */
        v8 y0 = S1(0) * xu + S1(1) * xv;
        v8 y1 = S1(1) * xu + S1(2) * xv;
        y0 += S1(3) * eu + S1(4) * ev;
        y1 += S1(5) * eu + S1(6) * ev;
        y0 += S1(7) * nwu + S1(8) * nwv;
        y1 += S1(9) * nwu + S1(10) * nwv;
        y0 += S1(11) * nu + S1(12) * nv;
        y1 += S1(13) * nu + S1(14) * nv;
        y0 += S1(15) * neu + S1(16) * nev;
        y1 += S1(17) * neu + S1(18) * nev;
        y0 += W1(3) * wu + W1(5) * wv;
        y1 += W1(4) * wu + W1(6) * wv;
        y0 += E0(7) * seu + E0(9) * sev;
        y1 += E0(8) * seu + E0(10) * sev;
        y0 += S0(11) * su + S0(13) * sv;
        y1 += S0(12) * su + S0(14) * sv;
        y0 += W0(15) * swu + W0(17) * swv;
        y1 += W0(16) * swu + W0(18) * swv;
        if (step)
            step_block(step, c - 1, y0, y1);
        else {
            store8(yu + c, y0);
            store8(yv + c, y1);
        }
    }
#undef S1
#undef S0
#undef W1
#undef E0
#undef W0
}

/* A product's rolling row buffers: x's rows j - 1, j, j + 1 split (slot (r + 1) % 3 for row r) and the
 * product's two components. */
typedef struct {
    double *u[3], *v[3], *yu, *yv;
    int64_t nb, row;
} rows;

static rows rows_in(double *work, int64_t nx)
{
    rows w;
    const int64_t width = (blocks_of(nx) + 2) * LANES;
    for (int k = 0; k < 3; ++k) {
        w.u[k] = work + 2 * width * k + LANES;  /* column -1 at [0]: a block's lanes from [-LANES + 1] on */
        w.v[k] = work + 2 * width * k + width + LANES;
    }
    w.yu = work + 6 * width + LANES;
    w.yv = work + 7 * width + LANES;
    w.nb = blocks_of(nx);
    w.row = (w.nb + 2) * NS * LANES;
    memset(work, 0, sizeof(double) * 8 * (size_t)width);
    return w;
}

/* Row j's product into w's yu, yv, x's rows j - 1 and j split before (row j + 1 split here). */
static void product_of_row(const field *fx, const double *packed, rows *w, int64_t j, const step_io *step)
{
    const int s0 = (int)(j % 3), s1 = (int)((j + 1) % 3), s2 = (int)((j + 2) % 3);
    split_row(fx, j + 1, w->u[s2] - 1, w->v[s2] - 1);
    const double *ahead = j + 1 + AHEAD < fx->ny + 1 ? packed + w->row * (j + 1 + AHEAD) : 0;
    const double *a = packed + w->row * (j + 1), *o = packed + w->row * j;
    double *u0 = w->u[s0] - 1, *v0 = w->v[s0] - 1, *u1 = w->u[s1] - 1, *v1 = w->v[s1] - 1, *u2 = w->u[s2] - 1,
           *v2 = w->v[s2] - 1;
    if (step)
        product_row(w->nb, a, o, u0, v0, u1, v1, u2, v2, 0, 0, ahead, step);
    else
        product_row(w->nb, a, o, u0, v0, u1, v1, u2, v2, w->yu - 1, w->yv - 1, ahead, 0);
}

/* y = A x on the owned nodes (x: owned values and ring; packed: stencil_pack's); with want_dot returns the
 * owned part of x . y, else 0.  work: stencil_work_size(nx) doubles. */
SPHYR_KERNEL
double stencil_apply(int64_t ny, int64_t nx, const double *x, const double *x_ring, const double *packed,
                     double *restrict y, int64_t want_dot, double *work)
{
    const field fx = make(x, x_ring, ny, nx, 2);
    rows w = rows_in(work, nx);
    split_row(&fx, -1, w.u[0] - 1, w.v[0] - 1);
    split_row(&fx, 0, w.u[1] - 1, w.v[1] - 1);
    double dot = 0.0;
    for (int64_t j = 0; j < ny; ++j) {
        product_of_row(&fx, packed, &w, j, 0);
        const double *restrict xj = x + 2 * nx * j;
        double *restrict yj = y + 2 * nx * j;
        for (int64_t c = 0; c < nx; ++c) {
            yj[2 * c] = w.yu[c];
            yj[2 * c + 1] = w.yv[c];
        }
        if (want_dot) {
            double part = 0.0;
            for (int64_t q = 0; q < 2 * nx; ++q)
                part += xj[q] * yj[q];
            dot += part;
        }
    }
    return dot;
}

/* One Chebyshev step on the owned nodes, x updated in place: d = c_d d + c_r D^-1 (b - A x), x += d, the
 * product from x's values before the step (the ring holding the neighbours' from before it; a row is
 * split before the row above it is updated); with d_is_x, d is taken to equal x (as q4_apply.c's
 * chebyshev_first leaves them) and only written.  work: stencil_work_size(nx) doubles. */
SPHYR_KERNEL
void stencil_chebyshev_step(int64_t ny, int64_t nx, double *x, const double *x_ring, const double *packed,
                            const double *restrict b, const double *restrict dinv, double *restrict d, double c_d,
                            double c_r, int64_t d_is_x, double *restrict work)
{
    const field fx = make(x, x_ring, ny, nx, 2);
    rows w = rows_in(work, nx);
    split_row(&fx, -1, w.u[0] - 1, w.v[0] - 1);
    split_row(&fx, 0, w.u[1] - 1, w.v[1] - 1);
    const int64_t n = 2 * nx;
    for (int64_t j = 0; j < ny; ++j) {
        const step_io io = {x + n * j, d + n * j, (d_is_x ? x : d) + n * j, b + n * j, dinv + n * j, c_d, c_r, nx};
        product_of_row(&fx, packed, &w, j, &io);
    }
}

/* The owned nodes' diagonal and its inverse (2 ny nx values each) from their stencils. */
SPHYR_KERNEL
void stencil_diagonal(int64_t ny, int64_t nx, const double *restrict s, double *restrict diagonal,
                      double *restrict inverse)
{
    for (int64_t q = 0; q < ny * nx; ++q) {
        const double *sn = s + NS * q;
        diagonal[2 * q] = sn[0];
        diagonal[2 * q + 1] = sn[2];
        inverse[2 * q] = 1.0 / sn[0];
        inverse[2 * q + 1] = 1.0 / sn[2];
    }
}

/* The upper triangle of an 8x8 element matrix (local nodes (0, 0), (0, 1), (1, 1), (1, 0): row, column
 * offsets from its first node; 2 DOFs a node) in the order add_upper takes it: each node's D (3 values),
 * then for each pair (a, b, k) of PAIR the block G[a][b] (4, row-major), which is U_k of node a. */
static const int PAIR[6][3] = {{0, 1, 0}, {3, 2, 0}, {1, 3, 1}, {0, 3, 2}, {1, 2, 2}, {0, 2, 3}};
static const int PR[4] = {0, 0, 1, 1};
static const int PC[4] = {0, 1, 1, 0};
#define UPPER 36

/* UPPER indices into the 8x8 row-major element matrix, in add_upper's order (stencil.upper_order, the same). */
static void stencil_upper_order(int64_t *out)
{
    int q = 0;
    for (int a = 0; a < 4; ++a) {
        out[q++] = (2 * a) * 8 + 2 * a;
        out[q++] = (2 * a) * 8 + 2 * a + 1;
        out[q++] = (2 * a + 1) * 8 + 2 * a + 1;
    }
    for (int p = 0; p < 6; ++p) {
        const int a = PAIR[p][0], b = PAIR[p][1];
        out[q++] = (2 * a) * 8 + 2 * b;
        out[q++] = (2 * a) * 8 + 2 * b + 1;
        out[q++] = (2 * a + 1) * 8 + 2 * b;
        out[q++] = (2 * a + 1) * 8 + 2 * b + 1;
    }
}

/* Add one element's upper triangle g (stencil_upper_order) into the stencils of its nodes, its first node
 * (r, c) of the owned box, every node in [-1, ny] x [-1, nx] (a corner of the ring counts in the top or
 * bottom row). */
static void add_upper(const field *f, int64_t r, int64_t c, const double *g)
{
    double *at[4];
    for (int a = 0; a < 4; ++a)
        at[a] = (double *)node(f, r + PR[a], c + PC[a]);
    for (int a = 0; a < 4; ++a)
        for (int k = 0; k < 3; ++k)
            at[a][k] += g[3 * a + k];
    for (int p = 0; p < 6; ++p) {
        double *u = at[PAIR[p][0]] + 3 + 4 * PAIR[p][2];
        for (int k = 0; k < 4; ++k)
            u[k] += g[12 + 4 * p + k];
    }
}

/* Add element matrices into the stencils: g (ne_y, ne_x, 64), element (ey, ex)'s 8x8 matrix, its
 * first node (r0 + ey, c0 + ex) of the owned box (add_upper). */
SPHYR_KERNEL
void stencil_add_elements(int64_t ne_y, int64_t ne_x, const double *restrict g, int64_t ny, int64_t nx,
                          int64_t r0, int64_t c0, double *s, double *s_ring)
{
    int64_t order[UPPER];
    stencil_upper_order(order);
    const field f = make(s, s_ring, ny, nx, NS);
    double upper[UPPER];
    for (int64_t ey = 0; ey < ne_y; ++ey)
        for (int64_t ex = 0; ex < ne_x; ++ex) {
            const double *ge = g + 64 * (ey * ne_x + ex);
            for (int q = 0; q < UPPER; ++q)
                upper[q] = ge[order[q]];
            add_upper(&f, r0 + ey, c0 + ex, upper);
        }
}

/* Add n elements' upper triangles g (n, UPPER), element k's first node (rc[2k], rc[2k + 1]) of the owned
 * box (add_upper). */
SPHYR_KERNEL
void stencil_add_listed(int64_t n, const int64_t *rc, const double *restrict g, int64_t ny, int64_t nx,
                        double *s, double *s_ring)
{
    const field f = make(s, s_ring, ny, nx, NS);
    for (int64_t k = 0; k < n; ++k)
        add_upper(&f, rc[2 * k], rc[2 * k + 1], g + UPPER * k);
}

typedef double v4 __attribute__((vector_size(32)));

/* sum over the fine elements (i, j) of coarse element (cy, cx) of moduli[i][j] table[ytype[i]][xtype[j]],
 * the table's rows UPPER (36) values (the fine elements of coarse row cy: ystart[cy] <= i < ystart[cy + 1]).
 * The sums stay in registers: four vectors of 8 and one of 4 (each value summed in the same order as one
 * at a time). */
static void weighted_sum(int64_t cy, int64_t cx, const int64_t *ystart, const int64_t *xstart, const int64_t *ytype,
                         const int64_t *xtype, int64_t ntx, const double *moduli, int64_t mstride,
                         const double *table, double *out)
{
    v8 acc[4] = {{0.0}, {0.0}, {0.0}, {0.0}};
    v4 last = {0.0, 0.0, 0.0, 0.0};
    for (int64_t i = ystart[cy]; i < ystart[cy + 1]; ++i) {
        const double *erow = moduli + mstride * i, *trow = table + UPPER * ntx * ytype[i];
        for (int64_t j = xstart[cx]; j < xstart[cx + 1]; ++j) {
            const double m = erow[j], *t = trow + UPPER * xtype[j];
            const v8 e = {m, m, m, m, m, m, m, m};
            for (int k = 0; k < 4; ++k)
                acc[k] += e * load8(t + LANES * k);
            v4 tl;
            memcpy(&tl, t + 32, sizeof tl);
            last += (v4){m, m, m, m} * tl;
        }
    }
    for (int k = 0; k < 4; ++k)
        store8(out + LANES * k, acc[k]);
    memcpy(out + 32, &last, sizeof last);
}

SPHYR_KERNEL
void stencil_from_moduli(int64_t ncy, int64_t ncx, const int64_t *ystart, const int64_t *xstart,
                         const int64_t *ytype, const int64_t *xtype, int64_t ntx, const double *moduli,
                         int64_t mstride, const double *table, int64_t ny, int64_t nx, int64_t r0, int64_t c0,
                         double *s, double *s_ring, double *g)
{
    int64_t order[UPPER];
    stencil_upper_order(order);
    const field f = make(s, s_ring, ny, nx, NS);
    double upper[UPPER];
    for (int64_t cy = 0; cy < ncy; ++cy)
        for (int64_t cx = 0; cx < ncx; ++cx) {
            weighted_sum(cy, cx, ystart, xstart, ytype, xtype, ntx, moduli, mstride, table, upper);
            if (g) {
                double *ge = g + 64 * (cy * ncx + cx);
                for (int q = 0; q < UPPER; ++q)
                    ge[order[q]] = ge[(order[q] % 8) * 8 + order[q] / 8] = upper[q];
            } else {
                add_upper(&f, r0 + cy, c0 + cx, upper);
            }
        }
}

/* Bilinear transfers between a level (fine) and the next coarser (coarse), 2 values a node.  Fine owned node
 * (r, c), (fny, fnx) of them, lies between the coarse rows cy[r], cy[r] + 1 with weights wy[2 r], wy[2 r + 1]
 * and the coarse columns cx[c], cx[c] + 1 likewise (coarse indices of the coarse owned box, in [-1, cny]
 * and [-1, cnx]: its ring beyond).  A node's two values are interpolated alike.
 *
 * The weights are a product of one along y and one along x, so both transfers go one axis at a time: a
 * coarse row interpolated along x onto the fine columns once (x_interpolate), then every fine row a
 * weighted sum of the two rows beside it, one streaming pass (P x); and the transpose, each fine row added
 * with its weights into the two coarse rows' accumulators along the fine columns, an accumulator restricted
 * along x into its coarse row once no later fine row adds to it (P^T x).  Rows come in increasing order
 * (cy is nondecreasing), so two rows' buffers of 2 fnx values are all a transfer holds. */

static const double *pair_at(const field *f, const double *row, int64_t k, int64_t j)
{
    return (j >= 0 && j < f->nx) ? row + 2 * j : node(f, k, j);
}

/* out = coarse row k (in [-1, cny]) interpolated along x onto the fine columns. */
static void x_interpolate(const field *f, int64_t k, int64_t fnx, const int64_t *cx, const double *wx,
                          double *restrict out)
{
    const double *row = row_start(f, k);
    for (int64_t c = 0; c < fnx; ++c) {
        const double *p0 = pair_at(f, row, k, cx[c]), *p1 = pair_at(f, row, k, cx[c] + 1);
        const double b0 = wx[2 * c], b1 = wx[2 * c + 1];
        out[2 * c] = b0 * p0[0] + b1 * p1[0];
        out[2 * c + 1] = b0 * p0[1] + b1 * p1[1];
    }
}

/* Coarse row k (in [-1, cny]) += acc (fine columns) restricted along x. */
static void x_restrict(const field *f, int64_t k, int64_t fnx, const int64_t *cx, const double *wx,
                       const double *restrict acc)
{
    const double *row = row_start(f, k);
    for (int64_t c = 0; c < fnx; ++c) {
        double *p0 = (double *)pair_at(f, row, k, cx[c]), *p1 = (double *)pair_at(f, row, k, cx[c] + 1);
        const double b0 = wx[2 * c], b1 = wx[2 * c + 1], v0 = acc[2 * c], v1 = acc[2 * c + 1];
        p0[0] += b0 * v0, p0[1] += b0 * v1;
        p1[0] += b1 * v0, p1[1] += b1 * v1;
    }
}

/* The buffer of coarse row k (k >= -1): rows of one parity share one. */
#define SLOT(k) ((int)(((k) + 2) & 1))

/* y = P xc (add: y += P xc): xc the coarse owned values and its ring.  work: 4 fnx doubles. */
SPHYR_KERNEL
void grid_prolong(int64_t fny, int64_t fnx, const int64_t *cy, const double *wy, const int64_t *cx,
                  const double *wx, int64_t cny, int64_t cnx, const double *xc, const double *xc_ring,
                  double *restrict y, int64_t add, double *work)
{
    const field f = make(xc, xc_ring, cny, cnx, 2);
    const int64_t n = 2 * fnx;
    int64_t held[2] = {INT64_MIN, INT64_MIN};
    for (int64_t r = 0; r < fny; ++r) {
        const int64_t k = cy[r];
        const double a0 = wy[2 * r], a1 = wy[2 * r + 1];
        for (int64_t kk = k; kk <= k + (a1 != 0.0); ++kk)
            if (held[SLOT(kk)] != kk) {
                x_interpolate(&f, kk, fnx, cx, wx, work + n * SLOT(kk));
                held[SLOT(kk)] = kk;
            }
        const double *restrict lo = work + n * SLOT(k), *restrict hi = work + n * SLOT(k + 1);
        double *restrict yr = y + n * r;
        if (a1 == 0.0) {
            if (add)
                for (int64_t q = 0; q < n; ++q)
                    yr[q] += a0 * lo[q];
            else
                for (int64_t q = 0; q < n; ++q)
                    yr[q] = a0 * lo[q];
        } else if (add) {
            for (int64_t q = 0; q < n; ++q)
                yr[q] += a0 * lo[q] + a1 * hi[q];
        } else {
            for (int64_t q = 0; q < n; ++q)
                yr[q] = a0 * lo[q] + a1 * hi[q];
        }
    }
}

/* yc = P^T x on the coarse owned nodes and their ring (both zeroed here; the ring's sums belong to the
 * neighbours: added into them by the caller).  work: 4 fnx doubles. */
SPHYR_KERNEL
void grid_restrict(int64_t fny, int64_t fnx, const int64_t *cy, const double *wy, const int64_t *cx,
                   const double *wx, int64_t cny, int64_t cnx, const double *restrict x, double *yc,
                   double *yc_ring, double *work)
{
    memset(yc, 0, sizeof(double) * 2 * (size_t)(cny * cnx));
    memset(yc_ring, 0, sizeof(double) * 2 * (size_t)(2 * (cnx + 2) + 2 * (cny + 2)));
    const field f = make(yc, yc_ring, cny, cnx, 2);
    const int64_t n = 2 * fnx;
    int64_t held[2] = {INT64_MIN, INT64_MIN};
    for (int64_t r = 0; r < fny; ++r) {
        const int64_t k = cy[r];
        for (int s = 0; s < 2; ++s)  /* rows no later fine row adds to */
            if (held[s] != INT64_MIN && held[s] < k) {
                x_restrict(&f, held[s], fnx, cx, wx, work + n * s);
                held[s] = INT64_MIN;
            }
        const double *restrict xr = x + n * r;
        for (int64_t kk = k; kk <= k + 1; ++kk) {
            const double a = wy[2 * r + (kk - k)];
            if (a == 0.0)
                continue;
            double *restrict acc = work + n * SLOT(kk);
            if (held[SLOT(kk)] != kk) {
                for (int64_t q = 0; q < n; ++q)
                    acc[q] = a * xr[q];
                held[SLOT(kk)] = kk;
            } else {
                for (int64_t q = 0; q < n; ++q)
                    acc[q] += a * xr[q];
            }
        }
    }
    for (int s = 0; s < 2; ++s)
        if (held[s] != INT64_MIN)
            x_restrict(&f, held[s], fnx, cx, wx, work + n * s);
}
