/* The optimality-criteria bisection's pass over the free cells, in one read of three arrays: the volume
 * term of the candidate design at a multiplier, sum_i dv[i] * candidate[i] with
 *
 *   candidate[i] = min(max(scaled[i] * s, max(x[i] - move, 0)), min(x[i] + move, 1)),  s = 1 / sqrt(middle),
 *
 * each candidate the very value numpy's multiply and clip give (the same operations on the same doubles),
 * the sum in four interleaved partial sums (a dot product's order: another rounding than BLAS's).  No
 * candidate is stored: oc_candidate writes the final one.
 */
#include <stdint.h>

#include "kernels.h"

/* numpy.maximum and numpy.minimum of two numbers (a tie gives the first: the sign of a zero as numpy's). */
static inline double maximum(double a, double b) { return a >= b ? a : b; }
static inline double minimum(double a, double b) { return a <= b ? a : b; }

static inline double candidate(double scaled, double x, double move, double s)
{
    return minimum(maximum(scaled * s, maximum(x - move, 0.0)), minimum(x + move, 1.0));
}

SPHYR_KERNEL
double oc_volume(int64_t n, const double *restrict scaled, const double *restrict x, const double *restrict dv,
                 double move, double s)
{
    double sum[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 3 < n; i += 4)
        for (int k = 0; k < 4; ++k)
            sum[k] += dv[i + k] * candidate(scaled[i + k], x[i + k], move, s);
    for (; i < n; ++i)
        sum[0] += dv[i] * candidate(scaled[i], x[i], move, s);
    return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

SPHYR_KERNEL
void oc_candidate(int64_t n, const double *restrict scaled, const double *restrict x, double move, double s,
                  double *restrict out)
{
    for (int64_t i = 0; i < n; ++i)
        out[i] = candidate(scaled[i], x[i], move, s);
}
