# Binaryen's wasm-opt after the link of the clang-19 relaxed-SIMD build (tandem-relaxed.wasm and its
# kernel self-test; included from CMakeLists.txt's TDM_WASI branch). npm's `binaryen` package (a
# devDependency: `npm ci` installs node_modules/binaryen/bin/wasm-opt) is searched first, then
# TDM_WASM_OPT if given. It must be version 116 or later: older ones, like Debian's 108, cannot read
# the standard relaxed-SIMD opcodes, which is also why clang gets no -O on its link line
# (cmake/wasi-clang.cmake) and never runs a wasm-opt from PATH itself.
#
# -O3 --low-memory-unused, as Emscripten runs it: the second tells Binaryen that no address below
# 1024 is used (wasm-ld puts the data at 1024 and the stack after it), so a constant added to a
# pointer can become the load's offset. It speeds up the float GEMM; the decode's GEMVs, bound by
# memory, are unchanged. Without a wasm-opt the build still works and says so.
find_program(TDM_WASM_OPT wasm-opt PATHS ${CMAKE_SOURCE_DIR}/node_modules/binaryen/bin NO_DEFAULT_PATH
  DOC "Binaryen's wasm-opt (version >= 116) run on tandem-relaxed.wasm after linking")
set(TDM_WASM_OPT_OK OFF)
if(TDM_WASM_OPT)
  execute_process(COMMAND ${TDM_WASM_OPT} --version OUTPUT_VARIABLE v ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX MATCH "version ([0-9]+)" _ "${v}")
  if(CMAKE_MATCH_1 AND CMAKE_MATCH_1 GREATER_EQUAL 116)
    set(TDM_WASM_OPT_OK ON)
    message(STATUS "tandem-relaxed.wasm: wasm-opt -O3 after linking (${TDM_WASM_OPT}, version ${CMAKE_MATCH_1})")
  else()
    message(WARNING "${TDM_WASM_OPT} is '${v}', older than Binaryen 116 (no standard relaxed SIMD): "
      "tandem-relaxed.wasm is left unoptimized after linking. Run `npm ci` for npm's binaryen.")
  endif()
else()
  message(WARNING "no wasm-opt in node_modules/binaryen/bin: tandem-relaxed.wasm is left unoptimized after "
    "linking (3-10% slower float GEMM). Run `npm ci` (package.json's binaryen) or pass -DTDM_WASM_OPT=path.")
endif()

# Runs wasm-opt over the target's .wasm in place after each link (a no-op without a usable wasm-opt).
function(tdm_wasm_opt target)
  if(TDM_WASM_OPT_OK)
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND ${TDM_WASM_OPT} -O3 --low-memory-unused --enable-simd --enable-relaxed-simd --enable-bulk-memory
        --enable-sign-ext --enable-nontrapping-float-to-int --enable-mutable-globals
        $<TARGET_FILE:${target}> -o $<TARGET_FILE:${target}>
      COMMENT "wasm-opt -O3 $<TARGET_FILE_NAME:${target}>" VERBATIM)
  endif()
endfunction()
