/* MMA's subproblem with one constraint, one pass over the free cells at a time (sphyr_hpc/optimiser/mma.py).
 *
 * mma_asymptotes: the asymptotes low < x < upp of an iteration, in place, and this rank's part of the
 * constraint's approximation at x, sum_j P_j / (upp_j - x_j) + Q_j / (x_j - low_j).
 *
 * mma_dual: one evaluation of the dual's derivative at the multiplier lam.  Each cell's approximations
 *
 *   p0 = (upp - x)^2 (1.001 df0^+ + 0.001 df0^- + RAA0),  q0 = (x - low)^2 (0.001 df0^+ + 1.001 df0^- + RAA0),
 *   P, Q the same of the constraint's gradient g,
 *
 * and move limits alpha = max(low + 0.1 (x - low), x - move, 0), beta = min(upp - 0.1 (upp - x), x + move, 1)
 * are made from x, low, upp, df0 and g as they are read (nothing of them is stored); the cell's minimiser of
 * the Lagrangian x(lam) = (sqrt(p) low + sqrt(q) upp) / (sqrt(p) + sqrt(q)) clipped to [alpha, beta]
 * (p = p0 + lam P, q = q0 + lam Q) is written to out, and sums gets this rank's
 *
 *   sums[0] = sum_j P_j / (upp_j - x_j(lam)) + Q_j / (x_j(lam) - low_j)   (the constraint's approximation)
 *   sums[1] = sum over the unclipped cells of G_j^2 / H_j                   (minus twice the derivative's slope)
 *
 * with G = P / (upp - x)^2 - Q / (x - low)^2 (the constraint's derivative in x_j) and H = p / (upp - x)^3 +
 * q / (x - low)^3 (half the Lagrangian's second derivative).  Each sum in four
 * interleaved partial sums, in a fixed order: the same bits on every run.
 */
#include <math.h>
#include <stdint.h>

#include "kernels.h"

#define RAA0 1e-5
#define ALBEFA 0.1

/* numpy.maximum and numpy.minimum of two numbers (a tie gives the first: the sign of a zero as numpy's). */
static inline double maximum(double a, double b) { return a >= b ? a : b; }
static inline double minimum(double a, double b) { return a <= b ? a : b; }

static inline double cell(double x, double low, double upp, double df0, double g, double move, double lam,
                          double *out, double *slope)
{
    double ux0 = upp - x, xl0 = x - low;
    double ux0sq = ux0 * ux0, xl0sq = xl0 * xl0;
    double dpos = maximum(df0, 0.0), dneg = maximum(-df0, 0.0);
    double gpos = maximum(g, 0.0), gneg = maximum(-g, 0.0);
    double P = ux0sq * (1.001 * gpos + 0.001 * gneg + RAA0);
    double Q = xl0sq * (0.001 * gpos + 1.001 * gneg + RAA0);
    double p = ux0sq * (1.001 * dpos + 0.001 * dneg + RAA0) + lam * P;
    double q = xl0sq * (0.001 * dpos + 1.001 * dneg + RAA0) + lam * Q;
    double alpha = maximum(maximum(low + ALBEFA * xl0, x - move), 0.0);
    double beta = minimum(minimum(upp - ALBEFA * ux0, x + move), 1.0);
    double sp = sqrt(p), sq = sqrt(q);
    double xn = minimum(maximum((sp * low + sq * upp) / (sp + sq), alpha), beta);
    double ux = 1.0 / (upp - xn), xl = 1.0 / (xn - low);
    double ux2 = ux * ux, xl2 = xl * xl;
    double G = P * ux2 - Q * xl2;
    double H = p * ux2 * ux + q * xl2 * xl;
    *slope = (xn > alpha && xn < beta) ? G * G / H : 0.0;  /* a clipped cell does not move with lam */
    *out = xn;
    return P * ux + Q * xl;
}

SPHYR_KERNEL
void mma_dual(int64_t n, const double *restrict x, const double *restrict low, const double *restrict upp,
              const double *restrict df0, const double *restrict g, double move, double lam, double *restrict out,
              double *restrict sums)
{
    double c[4] = {0.0, 0.0, 0.0, 0.0}, s[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 3 < n; i += 4)
        for (int k = 0; k < 4; ++k) {
            double slope;
            c[k] += cell(x[i + k], low[i + k], upp[i + k], df0[i + k], g[i + k], move, lam, out + i + k, &slope);
            s[k] += slope;
        }
    for (; i < n; ++i) {
        double slope;
        c[0] += cell(x[i], low[i], upp[i], df0[i], g[i], move, lam, out + i, &slope);
        s[0] += slope;
    }
    sums[0] = (c[0] + c[1]) + (c[2] + c[3]);
    sums[1] = (s[0] + s[1]) + (s[2] + s[3]);
}

/* The notes' asymptotes: x -/+ 0.5 at the first iterations (first != 0), else widened by 1.2 where x moved the
 * same way twice and narrowed by 0.7 where it turned, kept within [0.01, 10] of x. */
static inline double asymptotes(int64_t first, double x, double x1, double x2, double *low, double *upp, double g)
{
    double l, u;
    if (first) {
        l = x - 0.5;
        u = x + 0.5;
    } else {
        double sign = (x - x1) * (x1 - x2);
        double factor = sign > 0.0 ? 1.2 : (sign < 0.0 ? 0.7 : 1.0);
        l = x - factor * (x1 - *low);
        u = x + factor * (*upp - x1);
        l = minimum(maximum(l, x - 10.0), x - 0.01);
        u = minimum(maximum(u, x + 0.01), x + 10.0);
    }
    *low = l;
    *upp = u;
    double gpos = maximum(g, 0.0), gneg = maximum(-g, 0.0);
    return (u - x) * (1.001 * gpos + 0.001 * gneg + RAA0) + (x - l) * (0.001 * gpos + 1.001 * gneg + RAA0);
}

SPHYR_KERNEL
double mma_asymptotes(int64_t n, int64_t first, const double *restrict x, const double *restrict xold1,
                      const double *restrict xold2, double *restrict low, double *restrict upp,
                      const double *restrict g)
{
    double c[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 3 < n; i += 4)
        for (int k = 0; k < 4; ++k)
            c[k] += asymptotes(first, x[i + k], first ? 0.0 : xold1[i + k], first ? 0.0 : xold2[i + k], low + i + k,
                               upp + i + k, g[i + k]);
    for (; i < n; ++i)
        c[0] += asymptotes(first, x[i], first ? 0.0 : xold1[i], first ? 0.0 : xold2[i], low + i, upp + i, g[i]);
    return (c[0] + c[1]) + (c[2] + c[3]);
}
