/* y = K(E) x on a rank's owned nodes, from the element moduli: no stored matrix.
 *
 * Unit square Q4 elements on a structured grid, 2 DOFs a node interleaved (x fastest), as in
 * sphyr_hpc.solvers.assembly: local node a of an element sits at (row, column) offset
 * (PR[a], PC[a]) from its top-left node, and K0's DOF 2a + d is node a's component d.  Owned node
 * (j, i) is local node a of the element at (j - PR[a], i - PC[a]), so
 *
 *   y(j, i, d) = sum_a E(j - PR[a], i - PC[a]) sum_{b, d2} K0[2a + d][2b + d2] x(j - PR[a] + PR[b], i - PC[a] + PC[b], d2).
 *
 * x: the owned values, (ny, nx, 2) contiguous, read in place (no ghosted copy).  The ring of
 * neighbours around the owned box comes from four halo arrays, corners included: top and bottom
 * (the node rows above and below, nx + 2 nodes from column -1), left and right (the node columns
 * beside, ny + 2 nodes from row -1).  A neighbour outside the grid must hold a finite value (0):
 * it is used only with an element modulus of 0.
 * E: the element moduli around the owned nodes, (ny + 1) x (nx + 1), element (j - 1, i - 1) of
 * the owned box at [j][i] (e_stride = nx + 1), 0 outside the grid.
 * y: the owned values, (ny, nx, 2) contiguous, every one written.
 * Inside a node row (columns 1 .. nx - 2) nodes do not depend on each other: gcc vectorises that
 * loop; the first and last node of a row read the halo columns.
 *
 * chebyshev_step (below) is one step of Jacobi-preconditioned Chebyshev smoothing fused around the
 * same product, x updated in place row by row.
 */
#include <stdint.h>
#include <string.h>

static const int PR[4] = {0, 0, 1, 1};
static const int PC[4] = {0, 1, 1, 0};

/* Node (r, c)'s two values for r in [j - 1, j + 1], c in [-1, nx]: rows[r - j + 1] is node row r
 * at column 0 (its halo row above or below the box included), left/right the halo columns. */
static const double *at(const double *const rows[3], const double *left, const double *right, int64_t nx,
                        int64_t j, int64_t r, int64_t c)
{
    if (c < 0)
        return left + 2 * (r + 1);
    if (c >= nx)
        return right + 2 * (r + 1);
    return rows[r - j + 1] + 2 * c;
}

static void edge_node(const double *const rows[3], const double *left, const double *right, int64_t nx,
                      int64_t j, int64_t i, const double *E, int64_t e_stride, const double *k, double *out)
{
    double acc0 = 0.0, acc1 = 0.0;
    for (int a = 0; a < 4; ++a) {
        const double e = E[(j + 1 - PR[a]) * e_stride + i + 1 - PC[a]];
        double s0 = 0.0, s1 = 0.0;
        for (int b = 0; b < 4; ++b) {
            const double *xp = at(rows, left, right, nx, j, j - PR[a] + PR[b], i - PC[a] + PC[b]);
            s0 += k[16 * a + 2 * b] * xp[0] + k[16 * a + 2 * b + 1] * xp[1];
            s1 += k[16 * a + 8 + 2 * b] * xp[0] + k[16 * a + 8 + 2 * b + 1] * xp[1];
        }
        acc0 += e * s0;
        acc1 += e * s1;
    }
    out[0] = acc0;
    out[1] = acc1;
}

/* Node row j of K x into out (2 nx values): r0, r1, r2 node rows j - 1, j, j + 1 at column 0. */
static void apply_row(int64_t nx, int64_t j, const double *restrict r0, const double *restrict r1,
                      const double *restrict r2, const double *left, const double *right,
                      const double *restrict E, int64_t e_stride, const double *restrict k, double *restrict out)
{
    const double *const rows[3] = {r0, r1, r2};
    const double *restrict e0 = E + j * e_stride, *restrict e1 = E + (j + 1) * e_stride;
    edge_node(rows, left, right, nx, j, 0, E, e_stride, k, out);
    if (nx > 1)
        edge_node(rows, left, right, nx, j, nx - 1, E, e_stride, k, out + 2 * (nx - 1));
    for (int64_t i = 1; i < nx - 1; ++i) {
        double acc0 = 0.0, acc1 = 0.0;
#pragma GCC unroll 4
        for (int a = 0; a < 4; ++a) {
            const double e = (PR[a] ? e0 : e1)[i + 1 - PC[a]];
            double s0 = 0.0, s1 = 0.0;
#pragma GCC unroll 4
            for (int b = 0; b < 4; ++b) {
                const int r = 1 - PR[a] + PR[b];
                const double *xp = (r == 0 ? r0 : r == 1 ? r1 : r2) + 2 * (i - PC[a] + PC[b]);
                s0 += k[16 * a + 2 * b] * xp[0] + k[16 * a + 2 * b + 1] * xp[1];
                s1 += k[16 * a + 8 + 2 * b] * xp[0] + k[16 * a + 8 + 2 * b + 1] * xp[1];
            }
            acc0 += e * s0;
            acc1 += e * s1;
        }
        out[2 * i] = acc0;
        out[2 * i + 1] = acc1;
    }
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

/* With want_dot, returns x . y over the owned values (each row's, while it is in cache), else 0. */
double q4_apply(int64_t ny, int64_t nx, const double *restrict x, const double *restrict top,
                const double *restrict bottom, const double *restrict left, const double *restrict right,
                const double *restrict E, int64_t e_stride, const double *restrict ke, double *restrict y,
                int64_t want_dot)
{
    double k[64];
    for (int q = 0; q < 64; ++q)
        k[q] = ke[q];
    double dot = 0.0;
    for (int64_t j = 0; j < ny; ++j) {
        const double *restrict xj = x + 2 * nx * j;
        double *restrict yj = y + 2 * nx * j;
        apply_row(nx, j, j > 0 ? xj - 2 * nx : top + 2, xj, j + 1 < ny ? xj + 2 * nx : bottom + 2, left, right, E,
                  e_stride, k, yj);
        if (want_dot)
            dot += dot4(2 * nx, xj, yj, 0);
    }
    return dot;
}

/* One Chebyshev step on the owned nodes, in place:
 *
 *   d = c_d d + c_r D^-1 (b - K x),   x = x + d
 *
 * (dinv: D^-1, the inverse diagonal).  x, the halo and E as for q4_apply, the halo holding the
 * neighbours' values from before the step.  work: 6 nx doubles.  Each row's product is computed
 * from the rows' values before the step (row j - 1's are kept in work before row j - 1 is
 * updated), so the step is the same as with a separate product. */
void chebyshev_step(int64_t ny, int64_t nx, double *restrict x, const double *restrict top,
                    const double *restrict bottom, const double *restrict left, const double *restrict right,
                    const double *restrict E, int64_t e_stride, const double *restrict ke,
                    const double *restrict b, const double *restrict dinv, double *restrict d,
                    double c_d, double c_r, double *restrict work)
{
    double k[64];
    for (int q = 0; q < 64; ++q)
        k[q] = ke[q];
    const int64_t n = 2 * nx;
    double *restrict kx = work, *restrict before[2] = {work + n, work + 2 * n};
    for (int64_t j = 0; j < ny; ++j) {
        double *restrict xj = x + n * j;
        double *restrict kept = before[j & 1];
        apply_row(nx, j, j > 0 ? before[(j - 1) & 1] : top + 2, xj, j + 1 < ny ? xj + n : bottom + 2,
                  left, right, E, e_stride, k, kx);
        memcpy(kept, xj, (size_t)n * sizeof(double));
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
