/* simd.h — where the SIMD128 kernels get their vector type and intrinsics (src/ only).
 *
 * TDM_SIMD128 is 1 when the build compiles the SIMD128 variants of src/kernels/ and picks them over
 * the scalar references, 0 otherwise; every kernel file tests it, not the compiler's own macro:
 *  - wasm (-msimd128): <wasm_simd128.h>, the engine's SIMD128 instructions;
 *  - native, unless built with -DTDM_NATIVE_SIMD=OFF (CMake; it defines TDM_NO_NATIVE_SIMD): SIMDe's
 *    implementation of the same intrinsics (Debian's libsimde-dev, header only) over SSE2 on
 *    x86-64 and NEON on arm64, so the native library runs the same kernels with the same results
 *    (each SIMDe intrinsic gives the wasm instruction's lanes, NaN and signed-zero rules included;
 *    tests/c/kernel_selftest.c checks them against the scalar references natively too).
 * TDM_SIMD128 decides at build time. TDM_X86_AVX2 (native x86-64 with the SIMD kernels, GCC or
 * clang) adds the AVX2+FMA GEMM/GEMV variants of gemm_x86.c, compiled for that target alone and
 * called only where the CPU has both (src/kernels/config.c, the one place that picks variants). */
#ifndef TDM_SIMD_H
#define TDM_SIMD_H

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#define TDM_SIMD128 1
#elif !defined(TDM_NO_NATIVE_SIMD) && (defined(__x86_64__) || defined(__aarch64__))
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/wasm/simd128.h>
#define TDM_SIMD128 1
#else
#define TDM_SIMD128 0
#endif

/* TDM_RELAXED_DOT: the relaxed integer dot product (i16x8.relaxed_dot_i8x16_i7x16_s) is there, as
 * tdm_relaxed_dot(a, b). From LLVM 15+ (clang-19's tandem-relaxed.wasm) it is the instruction itself.
 * Emscripten's LLVM 14 (tandem-mt-relaxed.wasm) predates it: there it is written as LLVM 14's prototype
 * i8x16.relaxed_swizzle, which takes the same operands and which no kernel uses otherwise, and
 * scripts/relaxed_simd.py (run on every LLVM 14 relaxed build after linking) rewrites that opcode to
 * the dot's. */
#if defined(__wasm_relaxed_simd__) && defined(__has_builtin)
#if __has_builtin(__builtin_wasm_relaxed_dot_i8x16_i7x16_s_i16x8)
#define TDM_RELAXED_DOT 1
#define tdm_relaxed_dot(a, b) wasm_i16x8_relaxed_dot_i8x16_i7x16((a), (b))
#elif __has_builtin(__builtin_wasm_relaxed_swizzle_i8x16)
#define TDM_RELAXED_DOT 1
#define tdm_relaxed_dot(a, b) ((v128_t)__builtin_wasm_relaxed_swizzle_i8x16((__i8x16)(a), (__i8x16)(b)))
#endif
#endif
#ifndef TDM_RELAXED_DOT
#define TDM_RELAXED_DOT 0
#endif

#if TDM_SIMD128 && defined(__x86_64__) && !defined(__wasm__) && (defined(__GNUC__) || defined(__clang__))
#define TDM_X86_AVX2 1
#else
#define TDM_X86_AVX2 0
#endif

#endif
