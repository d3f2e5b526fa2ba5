/* y = K(E) x on a rank's owned nodes, from the element moduli: no stored matrix.
 *
 * Unit square Q4 elements on a structured grid, 2 DOFs a node interleaved (x fastest), as in
 * sphyr_hpc.solvers.assembly: local node a of an element sits at (row, column) offset
 * (PR[a], PC[a]) from its first node (0, 0), (0, 1), (1, 1), (1, 0).  With the element's
 * displacements written in the modes 1, x, y, xy of each component (nodes at x, y = -1/2 or
 * 1/2), K0 is block-sparse: the translations carry no energy, the linear modes give the constant
 * strains (exx, eyy, gxy) and the stresses c11, c12, c33 of plane stress, the bilinear modes two
 * hourglass stiffnesses.  So an element's forces on its nodes are 5 numbers, E times
 *
 *   A = (c11 p + c12 qv) / 4,  B = (c12 p + c11 qv) / 4,  T = c33 (q + pv) / 4,
 *   Hu = hu w / 16,  Hv = hv wv / 16,
 *
 * of the differences p = (u1 - u0) + (u2 - u3), q = (u3 - u0) + (u2 - u1), w = (u2 - u3) - (u1 - u0)
 * (pv, qv, wv of v), spread with signs: node 0 gets (-A - T + Hu, -T - B + Hv), node 1
 * (A - T - Hu, T - B - Hv), node 2 (A + T + Hu, T + B + Hv), node 3 (-A + T - Hu, -T + B - Hv).
 * About 50 operations a node instead of the 128 of K0's 8x8 product (modes[5] = c11, c12, c33, hu,
 * hv come from K0 itself: sphyr_hpc.solvers.matfree.modal_constants checks the structure).
 *
 * x: the owned values, (ny, nx, 2) contiguous, read in place (no ghosted copy).  The ring of
 * neighbours around the owned box comes from four halo arrays, corners included: top and bottom
 * (the node rows above and below, nx + 2 nodes from column -1), left and right (the node columns
 * beside, ny + 2 nodes from row -1).  A neighbour outside the grid must hold a finite value (0):
 * it is used only with an element modulus of 0.
 * E: the element moduli around the owned nodes, (ny + 1) x (nx + 1), element (j - 1, i - 1) of
 * the owned box at [j][i] (e_stride = nx + 1), 0 outside the grid.
 * y: the owned values, (ny, nx, 2) contiguous, every one written.
 * One pass a node row, eight nodes at a time: the element row below it is computed (its 5 numbers
 * once an element), node row j's forces finished from it and from what the pass before left (the
 * element row above's part, the carry), and what node row j + 1 gets from it left in turn.  The row
 * buffers are the two node rows split into u and v and the carry (about 6 values a column), so that
 * they stay in L1 while the vectors stream by: with the element rows held whole (6 values an element,
 * two rows) and the phases one after the other, a row of 1025 nodes spilled to L2 and a Chebyshev step
 * of 1025x1025 nodes took 11 ns a node, 5 ns so.
 *
 * chebyshev_step (below) is one step of Jacobi-preconditioned Chebyshev smoothing fused around the
 * same product, x updated in place row by row.
 */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

static const int PR[4] = {0, 0, 1, 1};
static const int PC[4] = {0, 1, 1, 0};

/* Node row r (r in [-1, ny]) of x: its column 0, and its nodes at columns -1 and nx. */
typedef struct {
    const double *at0, *before, *after;
} xrow;

static xrow row_of(const double *x, const double *top, const double *bottom, const double *left,
                   const double *right, int64_t ny, int64_t nx, int64_t r)
{
    xrow row;
    if (r < 0 || r >= ny) {
        const double *ring = r < 0 ? top : bottom;
        row.at0 = ring + 2;
        row.before = ring;
        row.after = ring + 2 * (nx + 1);
    } else {
        row.at0 = x + 2 * nx * r;
        row.before = left + 2 * (r + 1);
        row.after = right + 2 * (r + 1);
    }
    return row;
}

/* An element's numbers for its 4 nodes, as pairs (u, v) like the nodes' own: S = (A + T, B + T),
 * D = (A - T, T - B), H = (Hu, Hv); its forces are -S + H on node 0, D - H on node 1, S + H on node 2
 * and -D - H on node 3.  Planes of 2 (nx + 1) values: element column c at pair c + 1. */
static inline void element(const double *x0, const double *x1, const double *x2, const double *x3, double e,
                           const double *m, double *S, double *D, double *H, int64_t k)
{
    const double a = x1[0] - x0[0], b = x2[0] - x3[0], cc = x3[0] - x0[0], d = x2[0] - x1[0];
    const double av = x1[1] - x0[1], bv = x2[1] - x3[1], cv = x3[1] - x0[1], dv = x2[1] - x1[1];
    const double p = a + b, q = cc + d, w = b - a, pv = av + bv, qv = cv + dv, wv = bv - av;
    const double A = e * (m[0] * p + m[1] * qv), B = e * (m[1] * p + m[0] * qv), T = e * (m[2] * (q + pv));
    S[2 * k] = A + T;
    S[2 * k + 1] = B + T;
    D[2 * k] = A - T;
    D[2 * k + 1] = T - B;
    H[2 * k] = e * (m[3] * w);
    H[2 * k + 1] = e * (m[4] * wv);
}

#define LANES 8
typedef double v8 __attribute__((vector_size(8 * LANES)));
typedef int64_t v8i __attribute__((vector_size(8 * LANES)));

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

static inline v8 splat(double a)
{
    const v8 v = {a, a, a, a, a, a, a, a};
    return v;
}

/* (a, b) pair by pair: a[0], b[0], a[1], b[1], ... in first (lanes 0-3 of each) and second. */
static inline void pairs(v8 a, v8 b, v8 *first, v8 *second)
{
    const v8i low = {0, 8, 1, 9, 2, 10, 3, 11}, high = {4, 12, 5, 13, 6, 14, 7, 15};
    *first = __builtin_shuffle(a, b, low);
    *second = __builtin_shuffle(a, b, high);
}

/* v's lanes moved up by one, lane 0 from before's last: a value's element one column to the left. */
static inline v8 from_left(v8 before, v8 v)
{
    const v8i shift = {7, 8, 9, 10, 11, 12, 13, 14};
    return __builtin_shuffle(before, v, shift);
}

/* Node row r's two components apart at indices [first, first + LANES): u[c + 1], v[c + 1] of column c, those
 * of columns -1 .. nx (the ring's columns included). */
static inline void split_block(const xrow *row, int64_t nx, double *restrict u, double *restrict v, int64_t first)
{
    const int64_t c0 = first - 1;
    if (c0 >= 0 && c0 + LANES <= nx) {
        const v8i even = {0, 2, 4, 6, 8, 10, 12, 14}, odd = {1, 3, 5, 7, 9, 11, 13, 15};
        const v8 a = load8(row->at0 + 2 * c0), b = load8(row->at0 + 2 * c0 + LANES);
        store8(u + first, __builtin_shuffle(a, b, even));
        store8(v + first, __builtin_shuffle(a, b, odd));
        return;
    }
    for (int64_t c = c0; c < c0 + LANES && c <= nx; ++c) {
        const double *node = c < 0 ? row->before : c < nx ? row->at0 + 2 * c : row->after;
        u[c + 1] = node[0], v[c + 1] = node[1];
    }
}

/* Rows this far ahead of the one in work are asked for (x; E and the arrays a step reads and writes): the
 * hardware prefetcher alone leaves a product waiting on memory.  Their lines are asked for block by block,
 * as the row in work is computed (into L2: hint 2), not in one burst at a row's start. */
#define AHEAD 2
#define HINT 2

/* A pass's work (q4_work_size doubles): node rows j and j + 1 split (two slots, u and v, column c at
 * [c + 1], LANES zeros past column nx), and the carry: node row j + 1's forces from element row j (u and v,
 * column c at [c]), added when that row's pass comes. */
typedef struct {
    double *u[2], *v[2], *cu, *cv;
} buffers;

static int64_t split_width(int64_t nx)
{
    return nx + 2 + LANES;
}

int64_t q4_work_size(int64_t nx)
{
    return 4 * split_width(nx) + 2 * (nx + LANES);
}

static buffers split(double *work, int64_t nx)
{
    const int64_t w = split_width(nx);
    buffers b = {{work, work + 2 * w}, {work + w, work + 3 * w}, work + 4 * w, work + 4 * w + nx + LANES};
    memset(work, 0, sizeof(double) * (size_t)q4_work_size(nx));
    return b;
}

/* What a pass does with node row j's forces: nothing (element row -1's pass: the carry only), y = K x
 * (and x . y), or a Chebyshev step. */
enum { CARRY_ONLY, PRODUCT, STEP };

typedef struct {
    const double *x;        /* PRODUCT: x's row j (read); STEP: x's row j (updated) */
    double *y;              /* PRODUCT: y's row j */
    double *d;              /* STEP: d's row j, b's, D^-1's; d_old: d's row j or, right after the first step, x's */
    const double *d_old, *b, *dinv;
    double c_d, c_r;
    const double *ahead[5]; /* rows asked for ahead (0: none) */
} row_io;

/* 16 interleaved values (8 nodes) of node row j: forces f0, f1, done with as the mode says; returns their
 * part of x . y (PRODUCT). */
static inline __attribute__((always_inline)) v8 consume(int mode, const row_io *io, int64_t at, v8 f0, v8 f1)
{
    const v8 zero = splat(0.0);
    if (mode == PRODUCT) {
        store8(io->y + at, f0);
        store8(io->y + at + 8, f1);
        return load8(io->x + at) * f0 + load8(io->x + at + 8) * f1;
    }
    if (mode == STEP) {
        double *restrict x = (double *)io->x;
        const v8 cd = splat(io->c_d), cr = splat(io->c_r);
        const v8 s0 = cd * load8(io->d_old + at) + cr * load8(io->dinv + at) * (load8(io->b + at) - f0);
        const v8 s1 = cd * load8(io->d_old + at + 8) + cr * load8(io->dinv + at + 8) * (load8(io->b + at + 8) - f1);
        store8(io->d + at, s0);
        store8(io->d + at + 8, s1);
        store8(x + at, load8(x + at) + s0);
        store8(x + at + 8, load8(x + at + 8) + s1);
    }
    return zero;
}

/* The same for the last n < 8 nodes (values at [at, at + 2 n)), one by one. */
static double consume_tail(int mode, const row_io *io, int64_t at, int64_t n, v8 f0, v8 f1)
{
    double f[16], dot = 0.0;
    memcpy(f, &f0, sizeof f0);
    memcpy(f + 8, &f1, sizeof f1);
    for (int64_t q = 0; q < 2 * n; ++q) {
        if (mode == PRODUCT) {
            io->y[at + q] = f[q];
            dot += io->x[at + q] * f[q];
        } else if (mode == STEP) {
            double *x = (double *)io->x;
            const double s = io->c_d * io->d_old[at + q] + io->c_r * io->dinv[at + q] * (io->b[at + q] - f[q]);
            io->d[at + q] = s;
            x[at + q] += s;
        }
    }
    return dot;
}

/* Element row j (its node rows split: lo = node row j, hi = node row j + 1; e_row its moduli, element
 * column k - 1 at [k]) and node row j's forces, eight nodes at a time.  An element's 5 numbers as
 * element() computes them, as u and v planes: S = (A + T, B + T), D = (A - T, T - B), H = (Hu, Hv); its
 * forces are -S + H on node 0, D - H on node 1, S + H on node 2 and -D - H on node 3.  Node i of row j is
 * node 0 of element column i and node 1 of column i - 1 (this element row), and nodes 2 and 3 of
 * element row j - 1's columns i - 1 and i: their part, the carry, came from row j - 1's pass; this pass
 * leaves row j + 1's.  Node row j + 1 (hirow) is split into uhi, vhi a block ahead of the elements that
 * read it.  Returns x . y (PRODUCT). */
static inline __attribute__((always_inline)) double pass(int mode, int64_t nx, const double *restrict ulo,
                                                         const double *restrict vlo, const double *restrict uhi,
                                                         const double *restrict vhi, const double *restrict e_row,
                                                         const double *restrict modes, double *restrict cu,
                                                         double *restrict cv, const row_io *io,
                                                         const xrow *hirow)
{
    const double m[5] = {0.25 * modes[0], 0.25 * modes[1], 0.25 * modes[2], 0.0625 * modes[3], 0.0625 * modes[4]};
    const v8 m0 = splat(m[0]), m1 = splat(m[1]), m2 = splat(m[2]), m3 = splat(m[3]), m4 = splat(m[4]);
    v8 lSu, lSv, lDu, lDv, lHu, lHv;  /* the block to the left's numbers (its last lane: element column k - 2) */
    split_block(hirow, nx, (double *)uhi, (double *)vhi, 0);
    split_block(hirow, nx, (double *)uhi, (double *)vhi, LANES);
    {
        /* element column -1, on its own: lane 7 of a block before the first */
        const double x0[2] = {ulo[0], vlo[0]}, x1[2] = {ulo[1], vlo[1]}, x2[2] = {uhi[1], vhi[1]},
                     x3[2] = {uhi[0], vhi[0]};
        double S[2], D[2], H[2];
        element(x0, x1, x2, x3, e_row[0], m, S, D, H, 0);
        const v8 zero = splat(0.0);
        lSu = lSv = lDu = lDv = lHu = lHv = zero;
        lSu[7] = S[0], lSv[7] = S[1], lDu[7] = D[0], lDv[7] = D[1], lHu[7] = H[0], lHv[7] = H[1];
    }
    v8 dot = splat(0.0);
    double dot_tail = 0.0;
    for (int64_t k = 1; k <= nx; k += LANES) {  /* element columns k - 1 .. k + 6, nodes k - 1 .. k + 6 */
        const int64_t n = nx - (k - 1) < LANES ? nx - (k - 1) : LANES;
        split_block(hirow, nx, (double *)uhi, (double *)vhi, k + 2 * LANES - 1);
        for (int q = 0; q < 4; ++q)
            if (io->ahead[q]) {
                __builtin_prefetch(io->ahead[q] + 2 * (k - 1), 0, HINT);
                __builtin_prefetch(io->ahead[q] + 2 * (k - 1) + LANES, 0, HINT);
            }
        if (io->ahead[4])
            __builtin_prefetch(io->ahead[4] + k, 0, HINT);
        v8 e;
        if (k + LANES <= nx + 1)
            e = load8(e_row + k);
        else {
            e = splat(0.0);
            for (int64_t l = 0; k + l <= nx; ++l)
                e[l] = e_row[k + l];
        }
        const v8 a = load8(ulo + k + 1) - load8(ulo + k), b = load8(uhi + k + 1) - load8(uhi + k);
        const v8 c = load8(uhi + k) - load8(ulo + k), d = load8(uhi + k + 1) - load8(ulo + k + 1);
        const v8 av = load8(vlo + k + 1) - load8(vlo + k), bv = load8(vhi + k + 1) - load8(vhi + k);
        const v8 cv_ = load8(vhi + k) - load8(vlo + k), dv = load8(vhi + k + 1) - load8(vlo + k + 1);
        const v8 p = a + b, q = c + d, w = b - a, pv = av + bv, qv = cv_ + dv, wv = bv - av;
        const v8 A = e * (m0 * p + m1 * qv), B = e * (m1 * p + m0 * qv), T = e * (m2 * (q + pv));
        const v8 Su = A + T, Sv = B + T, Du = A - T, Dv = T - B, Hu = e * (m3 * w), Hv = e * (m4 * wv);
        const v8 Su1 = from_left(lSu, Su), Sv1 = from_left(lSv, Sv), Du1 = from_left(lDu, Du),
                 Dv1 = from_left(lDv, Dv), Hu1 = from_left(lHu, Hu), Hv1 = from_left(lHv, Hv);
        double *cuk = cu + k - 1, *cvk = cv + k - 1;
        if (mode != CARRY_ONLY) {
            const v8 fu = load8(cuk) + ((Hu - Su) + (Du1 - Hu1)), fv = load8(cvk) + ((Hv - Sv) + (Dv1 - Hv1));
            v8 f0, f1;
            pairs(fu, fv, &f0, &f1);
            if (n == LANES)
                dot += consume(mode, io, 2 * (k - 1), f0, f1);
            else
                dot_tail += consume_tail(mode, io, 2 * (k - 1), n, f0, f1);
        }
        store8(cuk, (Su1 + Hu1) - (Du + Hu));
        store8(cvk, (Sv1 + Hv1) - (Dv + Hv));
        lSu = Su, lSv = Sv, lDu = Du, lDv = Dv, lHu = Hu, lHv = Hv;
    }
    return ((dot[0] + dot[1]) + (dot[2] + dot[3])) + ((dot[4] + dot[5]) + (dot[6] + dot[7])) + dot_tail;
}

static double pass_of(int mode, int64_t nx, const buffers *buf, int lo, const double *e_row, const double *modes,
                      const row_io *io, const xrow *hirow)
{
    const int hi = 1 - lo;
    if (mode == CARRY_ONLY)
        return pass(CARRY_ONLY, nx, buf->u[lo], buf->v[lo], buf->u[hi], buf->v[hi], e_row, modes, buf->cu, buf->cv, io, hirow);
    if (mode == PRODUCT)
        return pass(PRODUCT, nx, buf->u[lo], buf->v[lo], buf->u[hi], buf->v[hi], e_row, modes, buf->cu, buf->cv, io, hirow);
    return pass(STEP, nx, buf->u[lo], buf->v[lo], buf->u[hi], buf->v[hi], e_row, modes, buf->cu, buf->cv, io, hirow);
}

/* Sum of a[q] b[q] (c[q] if c) over n values, in four interleaved partial sums (vectorisable). */
static double dot4(int64_t n, const double *restrict a, const double *restrict b, const double *restrict c)
{
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t q = 0;
    for (; q + 4 <= n; q += 4)
        for (int l = 0; l < 4; ++l)
            s[l] += a[q + l] * b[q + l] * (c ? c[q + l] : 1.0);
    for (; q < n; ++q)
        s[0] += a[q] * b[q] * (c ? c[q] : 1.0);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* The passes over the owned rows: element row -1's (the carry into row 0), then row j's for j = 0 .. ny - 1,
 * each splitting node row j + 1 as it goes (row j's own split is the previous pass's, from before row j
 * was updated).  io's rows are set per row from the whole arrays in io_at (x, y; or x, d, b, D^-1). */
static double passes(int mode, int64_t ny, int64_t nx, const double *x, const double *top, const double *bottom,
                     const double *left, const double *right, const double *E, int64_t e_stride,
                     const double *modes, const row_io *io_at, double *work)
{
    buffers buf = split(work, nx);
    const int64_t n = 2 * nx;
    xrow lo = row_of(x, top, bottom, left, right, ny, nx, -1), hi = row_of(x, top, bottom, left, right, ny, nx, 0);
    for (int64_t first = 0; first <= nx + 1; first += LANES)  /* node row r split in slot (r + 1) & 1 */
        split_block(&lo, nx, buf.u[0], buf.v[0], first);
    const row_io none = {0};
    pass_of(CARRY_ONLY, nx, &buf, 0, E, modes, &none, &hi);
    double dot = 0.0;
    for (int64_t j = 0; j < ny; ++j) {
        hi = row_of(x, top, bottom, left, right, ny, nx, j + 1);
        row_io io = *io_at;
        io.x += n * j;
        if (mode == PRODUCT)
            io.y += n * j;
        else
            io.d += n * j, io.d_old += n * j, io.b += n * j, io.dinv += n * j;
        const int later = j + AHEAD < ny;
        const double *rows[4] = {x, mode == PRODUCT ? io_at->y : io_at->d, io_at->b, io_at->dinv};
        for (int q = 0; q < 4; ++q)
            io.ahead[q] = later && rows[q] ? rows[q] + n * (j + AHEAD) : 0;
        io.ahead[4] = later ? E + (j + AHEAD + 1) * e_stride : 0;
        dot += pass_of(mode, nx, &buf, (int)((j + 1) & 1), E + (j + 1) * e_stride, modes, &io, &hi);
    }
    return dot;
}

/* With want_dot, returns x . y over the owned values (each row's, while it is in cache), else 0.
 * work: q4_work_size(nx) doubles. */
SPHYR_KERNEL
double q4_apply(int64_t ny, int64_t nx, const double *restrict x, const double *restrict top,
                const double *restrict bottom, const double *restrict left, const double *restrict right,
                const double *restrict E, int64_t e_stride, const double *restrict modes, double *restrict y,
                int64_t want_dot, double *restrict work)
{
    row_io io = {0};
    io.x = x;
    io.y = y;
    const double dot = passes(PRODUCT, ny, nx, x, top, bottom, left, right, E, e_stride, modes, &io, work);
    return want_dot ? dot : 0.0;
}

/* One Chebyshev step on the owned nodes, in place:
 *
 *   d = c_d d + c_r D^-1 (b - K x),   x = x + d
 *
 * (dinv: D^-1, the inverse diagonal).  x, the halo and E as for q4_apply, the halo holding the
 * neighbours' values from before the step.  With d_is_x, d is taken to equal x (as chebyshev_first
 * leaves them, which then need not write d) and is only written.  work: q4_work_size(nx) doubles.  Row j is updated in its
 * pass, after node row j + 1 is split, and the split rows are the values the elements read, so the step
 * is the same as with a separate product. */
SPHYR_KERNEL
void chebyshev_step(int64_t ny, int64_t nx, double *restrict x, const double *restrict top,
                    const double *restrict bottom, const double *restrict left, const double *restrict right,
                    const double *restrict E, int64_t e_stride, const double *restrict modes,
                    const double *restrict b, const double *restrict dinv, double *restrict d,
                    double c_d, double c_r, int64_t d_is_x, double *restrict work)
{
    row_io io = {0};
    io.x = x;
    io.d = d;
    io.d_old = d_is_x ? x : d;
    io.b = b;
    io.dinv = dinv;
    io.c_d = c_d;
    io.c_r = c_r;
    passes(STEP, ny, nx, x, top, bottom, left, right, E, e_stride, modes, &io, work);
}

/* The first Chebyshev step from x = 0: d = scale D^-1 b, x = d (n values); d only where given (else the
 * next step takes d from x: chebyshev_step's d_is_x). */
SPHYR_KERNEL
void chebyshev_first(int64_t n, const double *restrict b, const double *restrict dinv, double scale,
                     double *restrict d, double *restrict x)
{
    if (!d) {
        for (int64_t q = 0; q < n; ++q)
            x[q] = scale * dinv[q] * b[q];
        return;
    }
    for (int64_t q = 0; q < n; ++q) {
        const double step = scale * dinv[q] * b[q];
        d[q] = step;
        x[q] = step;
    }
}

/* K's diagonal on the owned nodes and its inverse, from the element moduli (E as for q4_apply). */
SPHYR_KERNEL
void q4_diagonal(int64_t ny, int64_t nx, const double *restrict E, int64_t e_stride, const double *restrict ke,
                 double *restrict diagonal, double *restrict inverse)
{
    double k[8];
    for (int q = 0; q < 8; ++q)
        k[q] = ke[9 * q];
    for (int64_t j = 0; j < ny; ++j) {
        const double *restrict e0 = E + j * e_stride, *restrict e1 = E + (j + 1) * e_stride;
        double *restrict row = diagonal + 2 * nx * j, *restrict inv = inverse + 2 * nx * j;
        for (int64_t i = 0; i < nx; ++i) {
            double acc0 = 0.0, acc1 = 0.0;
#pragma GCC unroll 4
            for (int a = 0; a < 4; ++a) {
                const double e = (PR[a] ? e0 : e1)[i + 1 - PC[a]];
                acc0 += e * k[2 * a];
                acc1 += e * k[2 * a + 1];
            }
            row[2 * i] = acc0;
            row[2 * i + 1] = acc1;
            inv[2 * i] = 1.0 / acc0;
            inv[2 * i + 1] = 1.0 / acc1;
        }
    }
}

/* A CG step's residual update, r -= alpha w; returns r . D^-1 r. */
SPHYR_KERNEL
double cg_residual(int64_t n, double alpha, double *restrict r, const double *restrict w,
                   const double *restrict dinv)
{
    for (int64_t q = 0; q < n; ++q)
        r[q] -= alpha * w[q];
    return dot4(n, r, r, dinv);
}

/* A CG step's new direction, p = D^-1 r + beta p. */
SPHYR_KERNEL
void cg_direction(int64_t n, double beta, const double *restrict r, const double *restrict dinv, double *restrict p)
{
    for (int64_t q = 0; q < n; ++q)
        p[q] = dinv[q] * r[q] + beta * p[q];
}

/* u_e^T K0 u_e of a box of elements, (ne_y, ne_x) row-major into out: element (ey, ex)'s first
 * node is (r0 + ey, c0 + ex) of the ghosted nodes u (gnx nodes a row, 2 values a node).  In the
 * element's modes (see the top of this file) the energy is c11 (sux^2 + svy^2) + 2 c12 sux svy
 * + c33 (suy + svx)^2 + hu suxy^2 + hv svxy^2 with sux = p / 2, suy = q / 2, suxy = w / 4, ... */
SPHYR_KERNEL
void q4_energies(int64_t ne_y, int64_t ne_x, const double *restrict u, int64_t gnx, int64_t r0, int64_t c0,
                 const double *restrict modes, double *restrict out)
{
    const double c11 = 0.25 * modes[0], c12 = 0.5 * modes[1], c33 = 0.25 * modes[2], hu = 0.0625 * modes[3],
                 hv = 0.0625 * modes[4];
    for (int64_t ey = 0; ey < ne_y; ++ey) {
        const double *restrict lo = u + 2 * ((r0 + ey) * gnx + c0), *restrict hi = lo + 2 * gnx;
        double *restrict row = out + ne_x * ey;
        for (int64_t ex = 0; ex < ne_x; ++ex) {
            const double *x0 = lo + 2 * ex, *x1 = x0 + 2, *x3 = hi + 2 * ex, *x2 = x3 + 2;
            const double a = x1[0] - x0[0], b = x2[0] - x3[0], cc = x3[0] - x0[0], d = x2[0] - x1[0];
            const double av = x1[1] - x0[1], bv = x2[1] - x3[1], cv = x3[1] - x0[1], dv = x2[1] - x1[1];
            const double p = a + b, q = cc + d, w = b - a, pv = av + bv, qv = cv + dv, wv = bv - av;
            const double t = q + pv;
            row[ex] = c11 * (p * p + qv * qv) + c12 * (p * qv) + c33 * (t * t) + hu * (w * w) + hv * (wv * wv);
        }
    }
}
