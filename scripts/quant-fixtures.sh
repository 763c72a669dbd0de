#!/usr/bin/env bash
# quant-fixtures: rebuilds the reference fixtures of dspark's dequantization from llama.cpp's
# own code. Never run in CI: it compiles ggml's C sources (a few minutes on a shared machine).
#
#   internal/dtype/testdata/ggml-dequant/TYPE.bin: pseudo-random blocks of every type dspark
#   reads and the values ggml's dequantize_row_* decodes them to (scripts/quantref/dequant_ref.c
#   compiled against ggml/src/ggml-quants.c exactly as ggml-base builds it: -O3 -std=gnu11,
#   no -march, so no FMA; the script checks the object has no vfmadd).
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
