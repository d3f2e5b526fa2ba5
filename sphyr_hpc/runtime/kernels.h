/* The interface of sphyr_hpc's C kernels: every function the package calls, declared once, here.
 *
 * setup.py compiles the kernels (the C files of sphyr_hpc/solvers and sphyr_hpc/optimiser, each of
 * which includes this header) into one extension module, sphyr_hpc.runtime._kernels, made by cffi
 * from the declarations below: Python calls each kernel through them and nothing else
 * (sphyr_hpc/runtime/native.py).  The build holds both sides to them: a definition that differs
 * from its declaration is a compile error (conflicting types), so is an exported function that is
 * not declared here (-Werror=missing-prototypes), and so is a call from the module with other
 * arguments; setup.py's -Werror= flags make errors of what GCC only warns about (incompatible
 * pointer types, integer-pointer conversions).  A Python call with the wrong number or kind of
 * arguments raises TypeError.  Pointers are passed from Python as addresses (numpy's
 * array.ctypes.data; 0 for NULL).
 *
 * The declarations are plain C that cffi reads: one per function, integers int64_t, reals double,
 * arrays pointers to double or int64_t, results void, double or int64_t; no macro in them.
 *
 * SPHYR_KERNEL marks a kernel's definition (every exported function but the size queries).  A
 * portable x86-64 build (the default) targets the baseline instruction set, where GCC splits the
 * kernels' vectors of 8 doubles (vector_size(64)) into SSE2 pairs.  So with GCC on x86-64 each kernel
 * is built three times, for AVX-512, AVX2 and the baseline (function multi-versioning), and the
 * dynamic loader binds the one this CPU runs when the library is opened; flatten inlines a kernel's
 * helpers into each version, so they run at its width too.  A build for one CPU (SPHYR_HPC_MARCH at
 * build time: setup.py defines SPHYR_HPC_ONE_TARGET), another compiler or another architecture builds
 * each kernel once.  Every build gives the same results bit for bit: -std=c99 keeps
 * -ffp-contract=off (no multiply-add is fused), and a lane of a vector is the same IEEE operation at
 * any width.
 */
#ifndef SPHYR_HPC_KERNELS_H
#define SPHYR_HPC_KERNELS_H

#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(SPHYR_HPC_ONE_TARGET)
#define SPHYR_KERNEL __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#else
#define SPHYR_KERNEL
#endif

/* sphyr_hpc/solvers/q4_apply.c: the finest level's matrix-free product and smoother */
int64_t q4_work_size(int64_t nx);
double q4_apply(int64_t ny, int64_t nx, const double *x, const double *top, const double *bottom,
                const double *left, const double *right, const double *E, int64_t e_stride,
                const double *modes, double *y, int64_t want_dot, double *work);
void chebyshev_step(int64_t ny, int64_t nx, double *x, const double *top, const double *bottom,
                    const double *left, const double *right, const double *E, int64_t e_stride,
                    const double *modes, const double *b, const double *dinv, double *d, double c_d,
                    double c_r, int64_t d_is_x, double *work);
void chebyshev_first(int64_t n, const double *b, const double *dinv, double scale, double *d, double *x);
void q4_diagonal(int64_t ny, int64_t nx, const double *E, int64_t e_stride, const double *ke,
                 double *diagonal, double *inverse);
double cg_residual(int64_t n, double alpha, double *r, const double *w, const double *dinv);
void cg_direction(int64_t n, double beta, const double *r, const double *dinv, double *p);
void q4_energies(int64_t ne_y, int64_t ne_x, const double *u, int64_t gnx, int64_t r0, int64_t c0,
                 const double *modes, double *out);

/* sphyr_hpc/solvers/stencil_apply.c: the stencil levels and the transfers between levels */
int64_t stencil_packed_size(int64_t ny, int64_t nx);
int64_t stencil_work_size(int64_t nx);
void stencil_pack(int64_t ny, int64_t nx, const double *s, const double *s_ring, double *packed);
double stencil_apply(int64_t ny, int64_t nx, const double *x, const double *x_ring, const double *packed,
                     double *y, int64_t want_dot, double *work);
void stencil_chebyshev_step(int64_t ny, int64_t nx, double *x, const double *x_ring, const double *packed,
                            const double *b, const double *dinv, double *d, double c_d, double c_r,
                            int64_t d_is_x, double *work);
void stencil_diagonal(int64_t ny, int64_t nx, const double *s, double *diagonal, double *inverse);
void stencil_add_elements(int64_t ne_y, int64_t ne_x, const double *g, int64_t ny, int64_t nx, int64_t r0,
                          int64_t c0, double *s, double *s_ring);
void stencil_add_listed(int64_t n, const int64_t *rc, const double *g, int64_t ny, int64_t nx, double *s,
                        double *s_ring);
void stencil_from_moduli(int64_t ncy, int64_t ncx, const int64_t *ystart, const int64_t *xstart,
                         const int64_t *ytype, const int64_t *xtype, int64_t ntx, const double *moduli,
                         int64_t mstride, const double *table, int64_t ny, int64_t nx, int64_t r0, int64_t c0,
                         double *s, double *s_ring, double *g);
void grid_prolong(int64_t fny, int64_t fnx, const int64_t *cy, const double *wy, const int64_t *cx,
                  const double *wx, int64_t cny, int64_t cnx, const double *xc, const double *xc_ring,
                  double *y, int64_t add, double *work);
void grid_restrict(int64_t fny, int64_t fnx, const int64_t *cy, const double *wy, const int64_t *cx,
                   const double *wx, int64_t cny, int64_t cnx, const double *x, double *yc, double *yc_ring,
                   double *work);

/* sphyr_hpc/optimiser/oc_volume.c: the optimality-criteria bisection */
double oc_volume(int64_t n, const double *scaled, const double *x, const double *dv, double move, double s);
void oc_candidate(int64_t n, const double *scaled, const double *x, double move, double s, double *out);

/* sphyr_hpc/optimiser/mma_dual.c: MMA's subproblem, one pass a dual evaluation */
void mma_dual(int64_t n, const double *x, const double *low, const double *upp, const double *df0, const double *g,
              double move, double lam, double *out, double *sums);
double mma_asymptotes(int64_t n, int64_t first, const double *x, const double *xold1, const double *xold2,
                      double *low, double *upp, const double *g);

/* sphyr_hpc/optimiser/filter_stencil.c: the density filter */
void filter_stencil(int64_t ny, int64_t nx, int64_t reach, const double *padded, int64_t n_terms,
                    const int64_t *dr, const int64_t *dc, const double *w, double *out);

#endif
