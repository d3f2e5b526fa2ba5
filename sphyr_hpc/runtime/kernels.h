/* What every C kernel of sphyr_hpc includes: setup.py compiles the kernels (the C files of
 * sphyr_hpc/solvers and sphyr_hpc/optimiser) into one library, the extension module
 * sphyr_hpc.runtime._kernels, which sphyr_hpc/runtime/native.py opens with ctypes.
 *
 * SPHYR_KERNEL marks a kernel the package calls (every exported function but the size queries).  A
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

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(SPHYR_HPC_ONE_TARGET)
#define SPHYR_KERNEL __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#else
#define SPHYR_KERNEL
#endif

#endif
