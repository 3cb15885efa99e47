# Toolchain for the relaxed-SIMD wasm runtime (build/wasi; scripts/build.sh): Debian's clang-19 and
# wasm-ld-19 for wasm32-wasi over the wasi-libc package (headers in /usr/include/wasm32-wasi, libraries
# in /usr/lib/wasm32-wasi; compiler-rt's builtins from libclang-rt-19-dev-wasm32). LLVM 19 emits the
# standard relaxed-SIMD opcodes (f32x4.relaxed_madd, i16x8.relaxed_dot_i8x16_i7x16_s, ...), so this
# build needs no rewriting after linking (the Emscripten builds use LLVM 14, which lacks them).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR wasm32)
set(TDM_WASI ON CACHE BOOL "the wasi-libc + clang build of the relaxed-SIMD runtime" FORCE)
find_program(TDM_WASI_CLANG NAMES clang-19 REQUIRED)
set(CMAKE_C_COMPILER ${TDM_WASI_CLANG})
set(CMAKE_C_COMPILER_TARGET wasm32-wasi)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
# No -O on the link line: with one, clang runs Binaryen's wasm-opt when it is on PATH, and Debian's
# (version 108) cannot read standard relaxed-SIMD opcodes. Each target compiles with -O3 itself.
set(CMAKE_C_FLAGS_RELEASE "" CACHE STRING "" FORCE)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
