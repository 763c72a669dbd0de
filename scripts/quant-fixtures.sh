#!/usr/bin/env bash
# quant-fixtures: rebuilds the reference fixtures of dspark's dequantization from llama.cpp's
# own code. Never run in CI: it compiles ggml's C sources (a few minutes on a shared machine).
#
#   internal/dtype/testdata/ggml-dequant/TYPE.bin: pseudo-random blocks of every type dspark
#   reads and the values ggml's dequantize_row_* decodes them to (scripts/quantref/dequant_ref.c
#   compiled against ggml/src/ggml-quants.c exactly as ggml-base builds it: -O3 -std=gnu11,
#   no -march, so no FMA; the script checks the object has no vfmadd).
#
#   runtime/qwen3/testdata/quant/: a one-layer F32 qwen3 target (input-f32.gguf, from
#   scripts/quantref/mkinput) quantized by the real llama-quantize to Q4_0, Q4_1, Q5_0,
#   Q5_1, Q8_0, Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS and MXFP4_MOE (no imatrix;
#   MXFP4_MOE of a dense model is Q8_0 throughout), and manifest.txt: for every tensor of a
#   block type, the sha256 of ggml's dequantize_row_* output of its bytes.
#   llama-quantize: $LLAMA_QUANTIZE, or built from the tree (cmake, only the llama-quantize
#   target, -j2; apt-get install cmake g++ if missing).
#
# The llama.cpp tree: $LLAMA_CPP, else /work/ref/llama.cpp, else the one inside the npm package
# node-llama-cpp (llama/gitRelease.bundle, cloned into a temporary directory; needs npm and git).
#
# Usage: scripts/quant-fixtures.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quant-fixtures.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

src=${LLAMA_CPP:-/work/ref/llama.cpp}
if [ ! -f "$src/ggml/src/ggml-quants.c" ]; then
  echo "quant-fixtures: no llama.cpp tree at $src; cloning it from node-llama-cpp's gitRelease.bundle" >&2
  (cd "$tmp" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null && tar xzf node-llama-cpp-*.tgz)
  git clone --quiet "$tmp/package/llama/gitRelease.bundle" "$tmp/llama.cpp"
  src=$tmp/llama.cpp
fi
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "quant-fixtures: no C compiler ($cc); apt-get install gcc" >&2; exit 1; }
ggml=$src/ggml

start=$(date +%s)
"$cc" -O3 -std=gnu11 -fPIC -I"$ggml/include" -I"$ggml/src" -c "$ggml/src/ggml-quants.c" -o "$tmp/ggml-quants.o"
if command -v objdump >/dev/null && objdump -d "$tmp/ggml-quants.o" | grep -q vfmadd; then
  echo "quant-fixtures: ggml-quants.o contains FMA instructions; its values would not be ggml-base's" >&2
  exit 1
fi
"$cc" -O2 -std=gnu11 -I"$ggml/include" -I"$ggml/src" -c "$root/scripts/quantref/dequant_ref.c" -o "$tmp/dequant_ref.o"
"$cc" "$tmp/dequant_ref.o" "$tmp/ggml-quants.o" -lm -o "$tmp/dequant_ref"
out=$root/internal/dtype/testdata/ggml-dequant
mkdir -p "$out"
"$tmp/dequant_ref" "$out"
echo "quant-fixtures: wrote $(ls "$out" | wc -l) files to ${out#"$root"/} in $(($(date +%s) - start)) s"

quantize=${LLAMA_QUANTIZE:-}
if [ -z "$quantize" ]; then
  command -v cmake >/dev/null || { echo "quant-fixtures: no cmake; apt-get install cmake g++" >&2; exit 1; }
  bstart=$(date +%s)
  cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
    -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF >"$tmp/cmake.log"
  cmake --build "$tmp/build" --target llama-quantize -j2 >"$tmp/build.log"
  quantize=$tmp/build/bin/llama-quantize
  echo "quant-fixtures: built llama-quantize in $(($(date +%s) - bstart)) s"
fi
fx=$root/runtime/qwen3/testdata/quant
mkdir -p "$fx"
(cd "$root" && go run ./scripts/quantref/mkinput "$fx/input-f32.gguf")
: >"$tmp/manifest.txt"
for ft in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4_MOE; do
  if ! "$quantize" "$fx/input-f32.gguf" "$tmp/$ft.gguf" "$ft" >"$tmp/$ft.log" 2>&1; then
    echo "quant-fixtures: llama-quantize refuses $ft (see below); skipped" >&2
    tail -3 "$tmp/$ft.log" >&2
    continue
  fi
  cp "$tmp/$ft.gguf" "$fx/$ft.gguf"
  rm -rf "$tmp/t" && mkdir "$tmp/t"
  (cd "$root" && go run ./scripts/quantref/tensors "$fx/$ft.gguf" "$tmp/t")
  for b in "$tmp"/t/*.bin; do
    [ -e "$b" ] || continue
    base=$(basename "$b" .bin)
    name=${base%.*}
    id=${base##*.}
    sum=$("$tmp/dequant_ref" --dequant "$id" <"$b" | sha256sum | cut -d' ' -f1)
    echo "$ft.gguf $name $id $sum" >>"$tmp/manifest.txt"
  done
done
sort "$tmp/manifest.txt" >"$fx/manifest.txt"
echo "quant-fixtures: $(ls "$fx"/*.gguf | wc -l) files, $(wc -l <"$fx/manifest.txt") tensors in ${fx#"$root"/} ($(du -sh "$fx" | cut -f1)) in $(($(date +%s) - start)) s"
