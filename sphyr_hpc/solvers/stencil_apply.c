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
 * Every array is over the rank's ghosted nodes (gny x gnx, the DMDA's box ghost region of width 1):
 * x's ghosted values and the stencils (the neighbours' below and left of the owned box are read for
 * the transposed terms).  A neighbour outside the ghosted region is outside the grid: its terms
 * are skipped.  The owned box is (ny, nx) nodes from ghosted node (oy, ox); y, b, d and the
 * owned x of chebyshev are over the owned nodes only, (ny, nx, 2) contiguous.
 */
#include <stdint.h>

#define NS 19

static const int DR[4] = {0, 1, 1, 1};   /* E, NW, N, NE: row offset */
static const int DC[4] = {1, -1, 0, 1};  /* column offset */

/* Node (r, c)'s product (ghosted coordinates), every neighbour checked. */
static void edge_node(int64_t gny, int64_t gnx, int64_t r, int64_t c, const double *x, const double *s,
                      double *out)
{
    const double *sn = s + NS * (r * gnx + c), *xn = x + 2 * (r * gnx + c);
    double y0 = sn[0] * xn[0] + sn[1] * xn[1];
    double y1 = sn[1] * xn[0] + sn[2] * xn[1];
    for (int k = 0; k < 4; ++k) {
        const int64_t ru = r + DR[k], cu = c + DC[k];
        if (ru >= 0 && ru < gny && cu >= 0 && cu < gnx) {
            const double *u = sn + 3 + 4 * k, *xm = x + 2 * (ru * gnx + cu);
            y0 += u[0] * xm[0] + u[1] * xm[1];
            y1 += u[2] * xm[0] + u[3] * xm[1];
        }
        const int64_t rl = r - DR[k], cl = c - DC[k];
        if (rl >= 0 && rl < gny && cl >= 0 && cl < gnx) {
            const double *u = s + NS * (rl * gnx + cl) + 3 + 4 * k, *xm = x + 2 * (rl * gnx + cl);
            y0 += u[0] * xm[0] + u[2] * xm[1];
            y1 += u[1] * xm[0] + u[3] * xm[1];
        }
    }
    out[0] = y0;
    out[1] = y1;
}

/* Owned node row j's product into out (2 nx values). */
static void apply_row(int64_t gny, int64_t gnx, int64_t oy, int64_t ox, int64_t nx, int64_t j,
                      const double *restrict x, const double *restrict s, double *restrict out)
{
    const int64_t r = oy + j;
    int64_t first = 0, last = nx;  /* the owned columns with every neighbour inside */
    if (r == 0 || r + 1 >= gny) {
        first = last = nx;
    } else {
        if (ox == 0)
            first = 1;
        if (ox + nx >= gnx)
            last = nx - 1;
    }
    for (int64_t i = 0; i < first; ++i)
        edge_node(gny, gnx, r, ox + i, x, s, out + 2 * i);
    for (int64_t i = last > first ? last : first; i < nx; ++i)
        edge_node(gny, gnx, r, ox + i, x, s, out + 2 * i);
    const double *restrict s0 = s + NS * ((r - 1) * gnx + ox), *restrict s1 = s + NS * (r * gnx + ox);
    const double *restrict x0 = x + 2 * ((r - 1) * gnx + ox), *restrict x1 = x + 2 * (r * gnx + ox),
                 *restrict x2 = x + 2 * ((r + 1) * gnx + ox);
    for (int64_t i = first; i < last; ++i) {
        const double *sn = s1 + NS * i;
        double y0 = sn[0] * x1[2 * i] + sn[1] * x1[2 * i + 1];
        double y1 = sn[1] * x1[2 * i] + sn[2] * x1[2 * i + 1];
        /* upper: E (same row), NW, N, NE (next row) */
        y0 += sn[3] * x1[2 * i + 2] + sn[4] * x1[2 * i + 3];
        y1 += sn[5] * x1[2 * i + 2] + sn[6] * x1[2 * i + 3];
        y0 += sn[7] * x2[2 * i - 2] + sn[8] * x2[2 * i - 1];
        y1 += sn[9] * x2[2 * i - 2] + sn[10] * x2[2 * i - 1];
        y0 += sn[11] * x2[2 * i] + sn[12] * x2[2 * i + 1];
        y1 += sn[13] * x2[2 * i] + sn[14] * x2[2 * i + 1];
        y0 += sn[15] * x2[2 * i + 2] + sn[16] * x2[2 * i + 3];
        y1 += sn[17] * x2[2 * i + 2] + sn[18] * x2[2 * i + 3];
        /* transposed: from W (its E), SE (its NW), S (its N), SW (its NE) */
        const double *w = s1 + NS * (i - 1) + 3, *se = s0 + NS * (i + 1) + 7, *so = s0 + NS * i + 11,
                     *sw = s0 + NS * (i - 1) + 15;
        y0 += w[0] * x1[2 * i - 2] + w[2] * x1[2 * i - 1];
        y1 += w[1] * x1[2 * i - 2] + w[3] * x1[2 * i - 1];
        y0 += se[0] * x0[2 * i + 2] + se[2] * x0[2 * i + 3];
        y1 += se[1] * x0[2 * i + 2] + se[3] * x0[2 * i + 3];
        y0 += so[0] * x0[2 * i] + so[2] * x0[2 * i + 1];
        y1 += so[1] * x0[2 * i] + so[3] * x0[2 * i + 1];
        y0 += sw[0] * x0[2 * i - 2] + sw[2] * x0[2 * i - 1];
        y1 += sw[1] * x0[2 * i - 2] + sw[3] * x0[2 * i - 1];
        out[2 * i] = y0;
        out[2 * i + 1] = y1;
    }
}

/* y = A x on the owned nodes; with want_dot returns the owned part of x . y, else 0. */
double stencil_apply(int64_t gny, int64_t gnx, int64_t oy, int64_t ox, int64_t ny, int64_t nx,
                     const double *restrict x, const double *restrict s, double *restrict y, int64_t want_dot)
{
    double dot = 0.0;
    for (int64_t j = 0; j < ny; ++j) {
        double *restrict yj = y + 2 * nx * j;
        apply_row(gny, gnx, oy, ox, nx, j, x, s, yj);
        if (want_dot) {
            const double *xj = x + 2 * ((oy + j) * gnx + ox);
            double part = 0.0;
            for (int64_t q = 0; q < 2 * nx; ++q)
                part += xj[q] * yj[q];
            dot += part;
        }
    }
    return dot;
}

/* One Chebyshev step on the owned nodes: d = c_d d + c_r D^-1 (b - A x), x_owned += d, the
 * product from the ghosted values xg from before the step (work: 2 nx doubles). */
void stencil_chebyshev_step(int64_t gny, int64_t gnx, int64_t oy, int64_t ox, int64_t ny, int64_t nx,
                            const double *restrict xg, const double *restrict s, const double *restrict b,
                            const double *restrict dinv, double *restrict d, double *restrict x, double c_d,
                            double c_r, double *restrict work)
{
    const int64_t n = 2 * nx;
    for (int64_t j = 0; j < ny; ++j) {
        apply_row(gny, gnx, oy, ox, nx, j, xg, s, work);
        const double *restrict bj = b + n * j, *restrict ij = dinv + n * j;
        double *restrict dj = d + n * j, *restrict xj = x + n * j;
        for (int64_t q = 0; q < n; ++q) {
            const double step = c_d * dj[q] + c_r * ij[q] * (bj[q] - work[q]);
            dj[q] = step;
            xj[q] += step;
        }
    }
}

/* The owned nodes' diagonal and its inverse (2 ny nx values each) from the stencils. */
void stencil_diagonal(int64_t gnx, int64_t oy, int64_t ox, int64_t ny, int64_t nx, const double *restrict s,
                      double *restrict diagonal, double *restrict inverse)
{
    for (int64_t j = 0; j < ny; ++j)
        for (int64_t i = 0; i < nx; ++i) {
            const double *sn = s + NS * ((oy + j) * gnx + ox + i);
            const int64_t q = 2 * (j * nx + i);
            diagonal[q] = sn[0];
            diagonal[q + 1] = sn[2];
            inverse[q] = 1.0 / sn[0];
            inverse[q + 1] = 1.0 / sn[2];
        }
}

/* Add element matrices into the stencils: g (ne_y, ne_x, 64), element (ey, ex)'s 8x8 matrix in
 * local node order (0, 0), (0, 1), (1, 1), (1, 0) (row, column offsets from its first node), 2
 * DOFs a node; its first node is ghosted node (r0 + ey, c0 + ex). */
void stencil_add_elements(int64_t ne_y, int64_t ne_x, const double *restrict g, int64_t gnx, int64_t r0,
                          int64_t c0, double *restrict s)
{
    /* (a, b, k): the block G[a][b] is U_k of local node a (its neighbour b in direction k). */
    static const int PAIR[6][3] = {{0, 1, 0}, {3, 2, 0}, {1, 3, 1}, {0, 3, 2}, {1, 2, 2}, {0, 2, 3}};
    static const int PR[4] = {0, 0, 1, 1};
    static const int PC[4] = {0, 1, 1, 0};
    for (int64_t ey = 0; ey < ne_y; ++ey)
        for (int64_t ex = 0; ex < ne_x; ++ex) {
            const double *ge = g + 64 * (ey * ne_x + ex);
            double *node[4];
            for (int a = 0; a < 4; ++a)
                node[a] = s + NS * ((r0 + ey + PR[a]) * gnx + c0 + ex + PC[a]);
            for (int a = 0; a < 4; ++a) {
                node[a][0] += ge[(2 * a) * 8 + 2 * a];
                node[a][1] += ge[(2 * a) * 8 + 2 * a + 1];
                node[a][2] += ge[(2 * a + 1) * 8 + 2 * a + 1];
            }
            for (int p = 0; p < 6; ++p) {
                const int a = PAIR[p][0], bb = PAIR[p][1];
                double *u = node[a] + 3 + 4 * PAIR[p][2];
                u[0] += ge[(2 * a) * 8 + 2 * bb];
                u[1] += ge[(2 * a) * 8 + 2 * bb + 1];
                u[2] += ge[(2 * a + 1) * 8 + 2 * bb];
                u[3] += ge[(2 * a + 1) * 8 + 2 * bb + 1];
            }
        }
}
