/* y = K(E) x on a rank's owned nodes, from the element moduli: no stored matrix.
 *
 * Unit square Q4 elements on a structured grid, 2 DOFs a node interleaved (x fastest), as in
 * sphyr_hpc.solvers.assembly: local node a of an element sits at (row, column) offset
 * (PR[a], PC[a]) from its top-left node, and K0's DOF 2a + d is node a's component d.  Owned node
 * (j, i) is local node a of the element at (j - PR[a], i - PC[a]), so
 *
 *   y(j, i, d) = sum_a E(j - PR[a], i - PC[a]) sum_{b, d2} K0[2a + d][2b + d2] x(j - PR[a] + PR[b], i - PC[a] + PC[b], d2).
 *
 * x: the ghosted local array at owned node (0, 0), x_stride doubles a node row; every neighbour it
 * reads (one node row above and below, one node either side) must be readable memory, and its
 * value is used only with an element modulus of 0 where it lies outside the grid.
 * E: the element moduli around the owned nodes, (ny + 1) x (nx + 1), element (j - 1, i - 1) of
 * the owned box at [j][i] (e_stride = nx + 1), 0 outside the grid.
 * y: the owned values, (ny, nx, 2) contiguous, every one written.
 * The loop over a node row has no dependences between nodes: gcc vectorises it.
 */
#include <stdint.h>

static const int PR[4] = {0, 0, 1, 1};
static const int PC[4] = {0, 1, 1, 0};

void q4_apply(int64_t ny, int64_t nx, const double *restrict x, int64_t x_stride,
              const double *restrict E, int64_t e_stride, const double *restrict ke, double *restrict y)
{
    double k[64];
    for (int q = 0; q < 64; ++q)
        k[q] = ke[q];
    for (int64_t j = 0; j < ny; ++j) {
        double *restrict row = y + j * 2 * nx;
        for (int64_t i = 0; i < nx; ++i) {
            double acc0 = 0.0, acc1 = 0.0;
#pragma GCC unroll 4
            for (int a = 0; a < 4; ++a) {
                const double e = E[(j + 1 - PR[a]) * e_stride + i + 1 - PC[a]];
                double s0 = 0.0, s1 = 0.0;
#pragma GCC unroll 4
                for (int b = 0; b < 4; ++b) {
                    const double *xp = x + (j - PR[a] + PR[b]) * x_stride + 2 * (i - PC[a] + PC[b]);
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
