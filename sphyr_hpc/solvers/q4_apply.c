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
 * A node row's forces come from the element rows above and below it: each element row's 5 numbers
 * are computed once into a row buffer (work) and used by the two node rows beside it.
 *
 * chebyshev_step (below) is one step of Jacobi-preconditioned Chebyshev smoothing fused around the
 * same product, x updated in place row by row.
 */
#include <stdint.h>
#include <string.h>

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

/* Node row r's two components apart: u[c + 1], v[c + 1] of column c in [-1, nx] (the ring's columns
 * included). */
static void split_row(const xrow *row, int64_t nx, double *restrict u, double *restrict v)
{
    u[0] = row->before[0], v[0] = row->before[1];
    for (int64_t c = 0; c < nx; ++c) {
        u[c + 1] = row->at0[2 * c];
        v[c + 1] = row->at0[2 * c + 1];
    }
    u[nx + 1] = row->after[0], v[nx + 1] = row->after[1];
}

typedef double v8 __attribute__((vector_size(64)));
typedef int64_t v8i __attribute__((vector_size(64)));

static inline v8 load8(const double *p)
{
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Planes of 8 elements' (u, v) pairs: (a, b) side by side, pair by pair, into out (16 values). */
static inline void store_pairs(double *out, v8 a, v8 b)
{
    const v8i low = {0, 8, 1, 9, 2, 10, 3, 11}, high = {4, 12, 5, 13, 6, 14, 7, 15};
    const v8 first = __builtin_shuffle(a, b, low), second = __builtin_shuffle(a, b, high);
    memcpy(out, &first, sizeof first);
    memcpy(out + 8, &second, sizeof second);
}

/* Element row r's numbers for its columns -1 .. nx - 1 (element()'s planes, out = S, D, H; element column
 * k - 1 at pair k): node rows r and r + 1 split (split_row: lo, hi).  Eight elements at a time from the
 * components apart, the same operations as element() (a sum's terms swapped at most). */
static void element_row(int64_t nx, const double *restrict ulo, const double *restrict vlo,
                        const double *restrict uhi, const double *restrict vhi, const double *restrict e_row,
                        const double *restrict modes, double *restrict out)
{
    const int64_t n = 2 * (nx + 1);
    double *restrict S = out, *restrict D = out + n, *restrict H = out + 2 * n;
    const double m[5] = {0.25 * modes[0], 0.25 * modes[1], 0.25 * modes[2], 0.0625 * modes[3], 0.0625 * modes[4]};
    const v8 m0 = {m[0], m[0], m[0], m[0], m[0], m[0], m[0], m[0]}, m1 = {m[1], m[1], m[1], m[1], m[1], m[1], m[1], m[1]},
             m2 = {m[2], m[2], m[2], m[2], m[2], m[2], m[2], m[2]}, m3 = {m[3], m[3], m[3], m[3], m[3], m[3], m[3], m[3]},
             m4 = {m[4], m[4], m[4], m[4], m[4], m[4], m[4], m[4]};
    int64_t k = 0;  /* pair k: element column k - 1, nodes k - 1 and k: [k] and [k + 1] of the split rows */
    for (; k + 8 <= nx + 1; k += 8) {
        const v8 a = load8(ulo + k + 1) - load8(ulo + k), b = load8(uhi + k + 1) - load8(uhi + k);
        const v8 c = load8(uhi + k) - load8(ulo + k), d = load8(uhi + k + 1) - load8(ulo + k + 1);
        const v8 av = load8(vlo + k + 1) - load8(vlo + k), bv = load8(vhi + k + 1) - load8(vhi + k);
        const v8 cv = load8(vhi + k) - load8(vlo + k), dv = load8(vhi + k + 1) - load8(vlo + k + 1);
        const v8 p = a + b, q = c + d, w = b - a, pv = av + bv, qv = cv + dv, wv = bv - av;
        const v8 e = load8(e_row + k);
        const v8 A = e * (m0 * p + m1 * qv), B = e * (m1 * p + m0 * qv), T = e * (m2 * (q + pv));
        store_pairs(S + 2 * k, A + T, B + T);
        store_pairs(D + 2 * k, A - T, T - B);
        store_pairs(H + 2 * k, e * (m3 * w), e * (m4 * wv));
    }
    for (; k <= nx; ++k) {
        const double x0[2] = {ulo[k], vlo[k]}, x1[2] = {ulo[k + 1], vlo[k + 1]}, x2[2] = {uhi[k + 1], vhi[k + 1]},
                     x3[2] = {uhi[k], vhi[k]};
        element(x0, x1, x2, x3, e_row[k], m, S, D, H, k);
    }
}

/* Node row forces from the element rows above (prev) and below (cur) it, into out (2 nx): node i
 * is node 0 of element (j, i) (cur, pair i + 1), node 1 of (j, i - 1) (cur, i), node 2 of
 * (j - 1, i - 1) (prev, i) and node 3 of (j - 1, i) (prev, i + 1). */
static void node_row(int64_t nx, const double *restrict prev, const double *restrict cur, double *restrict out)
{
    const int64_t n = 2 * (nx + 1);
    const double *restrict pS = prev, *restrict pD = prev + n, *restrict pH = prev + 2 * n;
    const double *restrict cS = cur, *restrict cD = cur + n, *restrict cH = cur + 2 * n;
    for (int64_t q = 0; q < 2 * nx; ++q)
        out[q] = (pS[q] - cS[q + 2]) + (cD[q] - pD[q + 2]) + ((cH[q + 2] - cH[q]) + (pH[q] - pH[q + 2]));
}

/* The work of a product (q4_work_size doubles): element rows (two, 6 (nx + 1) each), a node row (2 nx),
 * then two node rows split (u and v, nx + 2 each). */
typedef struct {
    double *rows[2], *forces, *u[2], *v[2];
} buffers;

int64_t q4_work_size(int64_t nx)
{
    return 14 * (nx + 1) + 4 * (nx + 2);
}

static buffers split(double *work, int64_t nx)
{
    double *at = work + 14 * (nx + 1);
    buffers b = {{work, work + 6 * (nx + 1)}, work + 12 * (nx + 1),
                 {at, at + 2 * (nx + 2)}, {at + nx + 2, at + 3 * (nx + 2)}};
    return b;
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

/* Rows this far ahead of the one in work are asked for (x; E and y, to be written, where given):
 * the hardware prefetcher alone leaves a product waiting on memory (1025x1024 nodes: 9.6 ms, 6.4
 * with this). */
#define AHEAD 2

static void prefetch_rows(const double *x, const double *y, const double *E, int64_t e_stride, int64_t ny,
                          int64_t nx, int64_t j)
{
    if (j >= ny)
        return;
    for (int64_t q = 0; q < 2 * nx; q += 8) {
        __builtin_prefetch(x + 2 * nx * j + q, 0, 0);
        if (y)
            __builtin_prefetch(y + 2 * nx * j + q, 1, 0);
    }
    for (int64_t q = 0; E && q < nx + 1; q += 8)
        __builtin_prefetch(E + (j + 1) * e_stride + q, 0, 0);
}

/* With want_dot, returns x . y over the owned values (each row's, while it is in cache), else 0.
 * work: q4_work_size(nx) doubles. */
double q4_apply(int64_t ny, int64_t nx, const double *restrict x, const double *restrict top,
                const double *restrict bottom, const double *restrict left, const double *restrict right,
                const double *restrict E, int64_t e_stride, const double *restrict modes, double *restrict y,
                int64_t want_dot, double *restrict work)
{
    buffers buf = split(work, nx);
    double dot = 0.0;
    xrow lo = row_of(x, top, bottom, left, right, ny, nx, -1), hi = row_of(x, top, bottom, left, right, ny, nx, 0);
    split_row(&lo, nx, buf.u[0], buf.v[0]);  /* node row r split in slot (r + 1) & 1 */
    split_row(&hi, nx, buf.u[1], buf.v[1]);
    element_row(nx, buf.u[0], buf.v[0], buf.u[1], buf.v[1], E, modes, buf.rows[1]);  /* element row -1 */
    for (int64_t j = 0; j < ny; ++j) {
        double *prev = buf.rows[(j + 1) & 1], *cur = buf.rows[j & 1];
        const int s0 = (int)((j + 1) & 1), s1 = (int)(j & 1);
        hi = row_of(x, top, bottom, left, right, ny, nx, j + 1);
        split_row(&hi, nx, buf.u[s1], buf.v[s1]);
        element_row(nx, buf.u[s0], buf.v[s0], buf.u[s1], buf.v[s1], E + (j + 1) * e_stride, modes, cur);
        double *restrict yj = y + 2 * nx * j;
        prefetch_rows(x, y, E, e_stride, ny, nx, j + AHEAD);
        node_row(nx, prev, cur, yj);
        if (want_dot)
            dot += dot4(2 * nx, x + 2 * nx * j, yj, 0);
    }
    return dot;
}

/* One Chebyshev step on the owned nodes, in place:
 *
 *   d = c_d d + c_r D^-1 (b - K x),   x = x + d
 *
 * (dinv: D^-1, the inverse diagonal).  x, the halo and E as for q4_apply, the halo holding the
 * neighbours' values from before the step.  work: q4_work_size(nx) doubles.  Row j is updated once
 * the element rows beside it are computed, and those read rows j - 1 .. j + 1 before any of
 * them is updated, so the step is the same as with a separate product. */
void chebyshev_step(int64_t ny, int64_t nx, double *restrict x, const double *restrict top,
                    const double *restrict bottom, const double *restrict left, const double *restrict right,
                    const double *restrict E, int64_t e_stride, const double *restrict modes,
                    const double *restrict b, const double *restrict dinv, double *restrict d,
                    double c_d, double c_r, double *restrict work)
{
    buffers buf = split(work, nx);
    const int64_t n = 2 * nx;
    double *restrict kx = buf.forces;
    xrow lo = row_of(x, top, bottom, left, right, ny, nx, -1), hi = row_of(x, top, bottom, left, right, ny, nx, 0);
    split_row(&lo, nx, buf.u[0], buf.v[0]);  /* node row r split in slot (r + 1) & 1, before it is updated */
    split_row(&hi, nx, buf.u[1], buf.v[1]);
    element_row(nx, buf.u[0], buf.v[0], buf.u[1], buf.v[1], E, modes, buf.rows[1]);
    for (int64_t j = 0; j < ny; ++j) {
        double *prev = buf.rows[(j + 1) & 1], *cur = buf.rows[j & 1];
        const int s0 = (int)((j + 1) & 1), s1 = (int)(j & 1);
        hi = row_of(x, top, bottom, left, right, ny, nx, j + 1);
        split_row(&hi, nx, buf.u[s1], buf.v[s1]);  /* rows j, j + 1: not updated yet */
        element_row(nx, buf.u[s0], buf.v[s0], buf.u[s1], buf.v[s1], E + (j + 1) * e_stride, modes, cur);
        prefetch_rows(x, d, E, e_stride, ny, nx, j + AHEAD);
        prefetch_rows(b, 0, 0, e_stride, ny, nx, j + AHEAD);
        prefetch_rows(dinv, 0, 0, e_stride, ny, nx, j + AHEAD);
        node_row(nx, prev, cur, kx);
        double *restrict xj = x + n * j;
        const double *restrict bj = b + n * j, *restrict dj_inv = dinv + n * j;
        double *restrict dj = d + n * j;
        for (int64_t q = 0; q < n; ++q) {
            const double step = c_d * dj[q] + c_r * dj_inv[q] * (bj[q] - kx[q]);
            dj[q] = step;
            xj[q] += step;
        }
    }
}

/* The first Chebyshev step from x = 0: d = scale D^-1 b, x = d (n values). */
void chebyshev_first(int64_t n, const double *restrict b, const double *restrict dinv, double scale,
                     double *restrict d, double *restrict x)
{
    for (int64_t q = 0; q < n; ++q) {
        const double step = scale * dinv[q] * b[q];
        d[q] = step;
        x[q] = step;
    }
}

/* K's diagonal on the owned nodes and its inverse, from the element moduli (E as for q4_apply). */
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
double cg_residual(int64_t n, double alpha, double *restrict r, const double *restrict w,
                   const double *restrict dinv)
{
    for (int64_t q = 0; q < n; ++q)
        r[q] -= alpha * w[q];
    return dot4(n, r, r, dinv);
}

/* A CG step's new direction, p = D^-1 r + beta p. */
void cg_direction(int64_t n, double beta, const double *restrict r, const double *restrict dinv, double *restrict p)
{
    for (int64_t q = 0; q < n; ++q)
        p[q] = dinv[q] * r[q] + beta * p[q];
}

/* u_e^T K0 u_e of a box of elements, (ne_y, ne_x) row-major into out: element (ey, ex)'s first
 * node is (r0 + ey, c0 + ex) of the ghosted nodes u (gnx nodes a row, 2 values a node).  In the
 * element's modes (see the top of this file) the energy is c11 (sux^2 + svy^2) + 2 c12 sux svy
 * + c33 (suy + svx)^2 + hu suxy^2 + hv svxy^2 with sux = p / 2, suy = q / 2, suxy = w / 4, ... */
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
