#!/usr/bin/env bash
# npm run bench: installs what the benchmarks need (npm peers, onnx/onnxscript), builds, exports
# the models, then runs bench/suite/bench.mjs. The table goes to stdout (docs/performance.md holds one).
set -euo pipefail
# TANDEM_BENCH=image (or a comma-separated list of gemm, state, decode, smollm, conv, image, codec,
# memory, load, threads, llm, mimi, pocket, stt, field-peers, vad, native, toolchain, gemv, smollm30) exports and runs only those sections, e.g. `TANDEM_BENCH=image npm run
# bench` for the resnet18 / mobilenet_v3_small rows; unset, everything runs. llm (bench/suite/llm.mjs)
# runs in headless Chromium (Debian's, installed by scripts/setup.sh) beside onnxruntime-web and
# @wllama/wllama. native (bench/suite/native.py) runs tandem from Python, native scalar / native SIMD /
# wasm against PyTorch eager, single thread.
cd "$(dirname "$0")/../.."
wants() { [ -z "${TANDEM_BENCH:-}" ] || [[ ",${TANDEM_BENCH// /}," == *,$1,* ]]; }
if wants llm; then PY=$(bash scripts/setup.sh chromium | tail -n 1); else PY=$(bash scripts/setup.sh | tail -n 1); fi
"$PY" -c "import onnx, onnxscript, onnxruntime, gguf" 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check -r bench/requirements.txt >&2
# torchvision (resnet18, mobilenet_v3_small) beside the venv's torch: --no-deps, so pip never
# changes the torch version (torchvision declares an older minimum); pillow is what it imports.
"$PY" -c "import torchvision" 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check --no-deps torchvision pillow >&2
[ -d node_modules/onnxruntime-web ] && [ -d node_modules/@tensorflow/tfjs-backend-wasm ] && [ -d node_modules/@wllama/wllama ] || npm ci --no-audit --no-fund >&2
TANDEM_NO_ASAN=1 bash scripts/build.sh >/dev/null
mkdir -p build/bench
# Debian's Emscripten runs wasm-opt from PATH: not npm's binaryen (npm run puts node_modules/.bin first;
# it cannot read LLVM 14's prototype relaxed opcodes), as in scripts/build.sh
EM_PATH=$(tr ':' '\n' <<<"$PATH" | grep -v '/node_modules/\.bin$' | paste -sd: -)
PATH=$EM_PATH emcc -O3 -msimd128 -mbulk-memory -sSTANDALONE_WASM --no-entry -sALLOW_MEMORY_GROWTH=1 \
  -sEXPORTED_FUNCTIONS=_tdm_bench_peak,_tdm_bench_alloc,_tdm_bench_copy,_tdm_bench_read bench/suite/peak.c -o build/bench/peak.wasm
# The fused multiply-add rate (relaxed SIMD, standard opcodes): clang-19 and lld-19, as tandem-relaxed.wasm
clang-19 --target=wasm32 -O2 -msimd128 -mrelaxed-simd -c bench/suite/peak_fma.c -o build/bench/peak_fma.o
wasm-ld-19 --no-entry build/bench/peak_fma.o -o build/bench/peak-fma.wasm
"$PY" -W ignore bench/models/make_models.py build/bench >&2
# bench.mjs has every section but threads, llm, mimi, pocket, stt, field-peers, vad, native, toolchain, gemv and smollm30: it runs unless those are all that was asked for.
if [ -z "${TANDEM_BENCH:-}" ] || [ -n "$(tr ',' '\n' <<<"${TANDEM_BENCH// /}" | grep -vx -e threads -e llm -e mimi -e pocket -e stt -e field-peers -e vad -e native -e toolchain -e gemv -e smollm30 -e '')" ]; then
  node --expose-gc --experimental-wasm-relaxed-simd bench/suite/bench.mjs build/bench
fi
# The thread rows: 2 threads, and 4 and 8 where the machine has them (a process per count:
# onnxruntime-web's thread count is fixed per process).
if wants threads; then
  for t in 2 4 8; do
    [ "$t" -le "$(nproc)" ] || [ "$t" -eq 2 ] || continue
    node --expose-gc --experimental-wasm-relaxed-simd bench/suite/threads.mjs build/bench "$t"
  done
fi
# Mimi (moshi from PyPI, full size): exported and timed eagerly on one thread by bench/models/mimi.py,
# then run in wasm on 1 and 2 threads by bench/suite/mimi.mjs, in the same run: float32, int8 linear
# weights, and those with the 1-2 position convs' weights bfloat16 (quantize_convs="bf16") or also the 3-128
# position ones on 16-bit integers (quantize_convs="int16"); on the
# relaxed builds, which Chromium, Firefox 145+ and Node 22+ load by default (each row names its build).
# Only when asked (TANDEM_BENCH=mimi): the full-size exports take minutes.
if [[ ",${TANDEM_BENCH:-}," == *,mimi,* ]]; then
  "$PY" -W ignore bench/models/mimi.py build/bench 20 float32,int8,int8bf16,int8i16 >&2
  node --experimental-wasm-relaxed-simd bench/suite/mimi.mjs build/bench
fi
# pocket-tts (PyPI, full size): exported and timed eagerly on one thread by bench/models/pocket.py, then
# run in wasm on 1 and 2 threads by bench/suite/pocket.mjs (float32, int8 and int8 + int16 convs interleaved), in the same
# run. Only when asked
# (TANDEM_BENCH=pocket): the full-size export takes minutes.
if [[ ",${TANDEM_BENCH:-}," == *,pocket,* ]]; then
  "$PY" -W ignore bench/models/pocket.py build/bench 12 float32,int8,int8i16 >&2
  node --experimental-wasm-relaxed-simd bench/suite/pocket.mjs build/bench
fi
# Kyutai STT at the size of kyutai/stt-1b-en_fr (moshi from PyPI, seeded): bench/models/stt.py exports Mimi's
# streaming encode + LMGen.step as one program per precision and computes eager's tokens on the same weights,
# then bench/suite/stt.mjs runs it in wasm on 1 and 2 threads (and the SIMD128 build on 1). Only when asked (TANDEM_BENCH=stt): each
# export builds the 1B model (4 GB in float32) and takes minutes. TANDEM_STT_FRAMES (200) frames.
if [[ ",${TANDEM_BENCH:-}," == *,stt,* ]]; then
  "$PY" -W ignore bench/models/stt.py build/bench "${TANDEM_STT_FRAMES:-200}" int8,int4 >&2
  node --experimental-wasm-relaxed-simd bench/suite/stt.mjs build/bench int8,int4
fi
# The field models against onnxruntime-web (TANDEM_BENCH=field-peers): full-size Mimi and pocket-tts and the
# small Kyutai STT (STT_SMALL), each exported by its bench/models script to tandem and, with the variant
# onnx, to ONNX with its state as inputs and outputs (bench/models/onnx_state.py: checked against eager,
# int8 by quantize_dynamic), into build/bench/peers; then bench/suite/peers.mjs, once per thread count
# (onnxruntime-web's is fixed per process), interleaves the two frame by frame. Only when asked: the
# full-size exports take minutes.
if [[ ",${TANDEM_BENCH:-}," == *,field-peers,* ]]; then
  P=build/bench/peers
  "$PY" -W ignore bench/models/mimi.py $P 20 float32,int8,onnx >&2
  "$PY" -W ignore bench/models/pocket.py $P 12 float32,int8,onnx >&2
  "$PY" -W ignore bench/models/stt.py $P 200 float32,int8,onnx small >&2
  for t in 1 2; do node --experimental-wasm-relaxed-simd bench/suite/peers.mjs $P $t; done
fi
# The LLM table: tandem, onnxruntime-web and llama.cpp (@wllama/wllama) in one Chromium page per width.
if wants llm; then
  node bench/suite/llm.mjs build/bench
fi
# Silero VAD on the audio demo's recording: tandem against onnxruntime-web on the shipped ONNX file.
if wants vad; then
  bash scripts/setup.sh espeak-ng >/dev/null
  "$PY" -W ignore demo/build_audio.py build/demo >&2
  TANDEM_PYTHON="$PY" node --experimental-wasm-relaxed-simd bench/suite/vad.mjs
fi
# The relaxed build's toolchain (bench/suite/toolchain.mjs, docs/performance.md): clang-19's tandem-relaxed.wasm
# beside Emscripten's (built here for the comparison only) and SIMD128, GEMM / one-row GEMV / decode
# (the decode rows need the smollm_int8 / int4 exports of TANDEM_BENCH=llm; skipped without them).
if [[ ",${TANDEM_BENCH:-}," == *,toolchain,* ]]; then
  PATH=$EM_PATH NODE_PATH=/usr/share/nodejs ninja -C build/wasm tandem_relaxed_emcc_wasm >/dev/null
  if [ -f build/bench/smollm_int4.tandem ]; then
    node --expose-gc --experimental-wasm-relaxed-simd bench/suite/toolchain.mjs build/bench
  else
    for s in gemm gemv; do TANDEM_TOOLCHAIN=$s node --expose-gc --experimental-wasm-relaxed-simd bench/suite/toolchain.mjs build/bench; done
  fi
fi
# The transformer GEMVs of Mimi and pocket-tts (bench/suite/gemv.mjs; TANDEM_BENCH=gemv):
# ns per weight and GB/s against peak.c's read bandwidth of as many bytes, relaxed and SIMD128.
if [[ ",${TANDEM_BENCH:-}," == *,gemv,* ]]; then
  node --expose-gc --experimental-wasm-relaxed-simd bench/suite/gemv.mjs build/bench
fi
# The full 30-layer SmolLM-135M shape at float32, int8 and int4 (the quantized decode targets;
# bench/models/smollm30.py exports into build/bench30 once and keeps what is there, then
# bench/suite/smollm30.mjs: SIMD128 and relaxed, one thread, fills 32 and 256, against the read rate of
# each width's bytes). Only when asked (TANDEM_BENCH=smollm30): the three exports take many minutes.
if [[ ",${TANDEM_BENCH:-}," == *,smollm30,* ]]; then
  "$PY" -W ignore bench/models/smollm30.py build/bench30 >&2
  node --expose-gc --experimental-wasm-relaxed-simd bench/suite/smollm30.mjs build/bench30
fi
# The native table: the scalar build beside the shipped one (build/native-scalar, its library renamed
# so both load into one process), then bench/suite/native.py.
if wants native; then
  cmake -S . -B build/native-scalar -G Ninja -DCMAKE_BUILD_TYPE=Release -DTDM_NATIVE_SIMD=OFF >/dev/null
  ninja -C build/native-scalar tandem >/dev/null
  cp build/native-scalar/libtandem.so build/native-scalar/libtandem-scalar.so
  "$PY" -W ignore bench/suite/native.py
fi
