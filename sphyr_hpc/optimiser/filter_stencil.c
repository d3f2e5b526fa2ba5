/* The density filter's weighted sum over a slab, in one pass: out[r][c] = sum_k w[k]
 * padded[r + reach + dr[k]][c + reach + dc[k]], the terms added in the order given (as the numpy
 * passes it stands for add them: the same sums, bit for bit).
 *
 * padded: (ny + 2 reach) x (nx + 2 reach), row-major, zeros outside the grid; out: ny x nx.
 */
#include <stdint.h>

#include "kernels.h"

SPHYR_KERNEL
void filter_stencil(int64_t ny, int64_t nx, int64_t reach, const double *restrict padded, int64_t n_terms,
                    const int64_t *restrict dr, const int64_t *restrict dc, const double *restrict w,
                    double *restrict out)
{
    const int64_t stride = nx + 2 * reach;
    for (int64_t r = 0; r < ny; ++r) {
        double *restrict row = out + nx * r;
        for (int64_t c = 0; c < nx; ++c)
            row[c] = 0.0;
        for (int64_t k = 0; k < n_terms; ++k) {
            const double *restrict src = padded + (r + reach + dr[k]) * stride + reach + dc[k];
            const double weight = w[k];
            for (int64_t c = 0; c < nx; ++c)
                row[c] += weight * src[c];
        }
    }
}
