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
 */
#include <stdint.h>

static const int PR[4] = {0, 0, 1, 1};
static const int PC[4] = {0, 1, 1, 0};

struct box {
    int64_t ny, nx;
    const double *x, *top, *bottom, *left, *right;
};

/* Node (r, c)'s two values, r in [-1, ny], c in [-1, nx]. */
static const double *at(const struct box *b, int64_t r, int64_t c)
{
    if (c < 0)
        return b->left + 2 * (r + 1);
    if (c >= b->nx)
        return b->right + 2 * (r + 1);
    if (r < 0)
        return b->top + 2 * (c + 1);
    if (r >= b->ny)
        return b->bottom + 2 * (c + 1);
    return b->x + 2 * (r * b->nx + c);
}

static void edge_node(const struct box *bx, int64_t j, int64_t i, const double *E, int64_t e_stride,
                      const double *k, double *out)
{
    double acc0 = 0.0, acc1 = 0.0;
    for (int a = 0; a < 4; ++a) {
        const double e = E[(j + 1 - PR[a]) * e_stride + i + 1 - PC[a]];
        double s0 = 0.0, s1 = 0.0;
        for (int b = 0; b < 4; ++b) {
            const double *xp = at(bx, j - PR[a] + PR[b], i - PC[a] + PC[b]);
            s0 += k[16 * a + 2 * b] * xp[0] + k[16 * a + 2 * b + 1] * xp[1];
            s1 += k[16 * a + 8 + 2 * b] * xp[0] + k[16 * a + 8 + 2 * b + 1] * xp[1];
        }
        acc0 += e * s0;
        acc1 += e * s1;
    }
    out[0] = acc0;
    out[1] = acc1;
}

void q4_apply(int64_t ny, int64_t nx, const double *restrict x, const double *restrict top,
              const double *restrict bottom, const double *restrict left, const double *restrict right,
              const double *restrict E, int64_t e_stride, const double *restrict ke, double *restrict y)
{
    const struct box bx = {ny, nx, x, top, bottom, left, right};
    double k[64];
    for (int q = 0; q < 64; ++q)
        k[q] = ke[q];
    for (int64_t j = 0; j < ny; ++j) {
        const double *restrict r0 = j > 0 ? x + 2 * nx * (j - 1) : top + 2;
        const double *restrict r1 = x + 2 * nx * j;
        const double *restrict r2 = j + 1 < ny ? x + 2 * nx * (j + 1) : bottom + 2;
        const double *restrict e0 = E + j * e_stride, *restrict e1 = E + (j + 1) * e_stride;
        double *restrict row = y + j * 2 * nx;
        edge_node(&bx, j, 0, E, e_stride, k, row);
        if (nx > 1)
            edge_node(&bx, j, nx - 1, E, e_stride, k, row + 2 * (nx - 1));
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
            row[2 * i] = acc0;
            row[2 * i + 1] = acc1;
        }
    }
}
