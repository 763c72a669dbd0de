#!/usr/bin/env bash
# llamacpp-kimi: greedy-token and log-prob parity of dspark's kimik3 runtime with llama.cpp on
# tiny kimi-k3 (every K3 feature on: q-LoRA, the lower-bound gate, the MLA output gate,
# attention residuals, the latent MoE with its norm, shared experts, situ) and kimi-linear
# files that dspark synthesizes and converts, and on F32 files built by internal/testmodel with
# every optional feature switched on and off (scripts/kimi-variants.go; the tokenizer taken
# from the converted K3). A check gated on
# llama.cpp being installed (node-llama-cpp, as scripts/bench-llamacpp.sh installs it), never
# part of `make test` or CI.
#
# For each variant it decodes a fixed token-id prompt greedily with llama.cpp (F32 KV cache,
# scripts/llamacpp-decode.mjs --logits) and feeds llama.cpp's tokens to dspark
# (scripts/llamacpp-compare.go): the first step where the argmaxes differ and the largest
# |log p_dspark - log p_llama| over the vocabulary. The exact-arithmetic check is on F32
# files (--outtype f32): there the two runtimes compute the same math in float32. On BF16
# weights llama.cpp rounds the activations of every product to bf16, and on MXFP4 experts it
# quantizes them to Q8_0 (ggml's vec_dot_type), where dspark keeps float32 activations unless
# told otherwise: the BF16 files are compared with dspark's bf16 activations
# (llamacpp-compare.go --bf16-activations), the MXFP4 file with dspark's q8 activations
# (--activations q8), and the same files with float32 activations printed for information. The tiny random
# models are ill-conditioned (a KDA head's output can be far below the RMSNorm epsilon), so a
# rounding difference of 4e-3 can move log-probs by whole nats.
#
# Usage: scripts/llamacpp-kimi.sh
# Env:   DSPARK_LLAMA_DIR (default ~/.cache/dspark/llama), TOKENS (24)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
export DSPARK_LLAMA_DIR=${DSPARK_LLAMA_DIR:-$HOME/.cache/dspark/llama}
[ -d "$DSPARK_LLAMA_DIR/node_modules/node-llama-cpp" ] || {
  echo "llamacpp-kimi: node-llama-cpp is not installed in $DSPARK_LLAMA_DIR (scripts/bench-llamacpp.sh installs it)" >&2
  exit 1
}
ntok=${TOKENS:-24}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/dspark
go build -o "$bin" ./cmd/dspark
prompt=1,5,9,13,200,31,7,77
run() { # name synth-args outtype [compare flags]
  local name=$1 args=$2 out=$3 flags=${4:-}
  "$bin" synth --kind target $args --preset tiny --quiet --out "$work/$name-hf"
  "$bin" convert "$work/$name-hf" --outtype "$out" -o "$work/$name.gguf" >/dev/null 2>&1
  node scripts/llamacpp-decode.mjs --model "$work/$name.gguf" --tokens $prompt -n "$ntok" --kv f32 \
    --logits "$work/$name.json" >/dev/null
  printf '%-22s %-5s ' "$name" "$out"
  go run scripts/llamacpp-compare.go $flags --target "$work/$name.gguf" --llama "$work/$name.json" | tail -1
}
run k3 "--arch kimi-k3" f32
run linear "--arch kimi-linear" f32
echo "hand-built F32 variants (scripts/kimi-variants.go), every optional feature on and off:"
for f in $(go run scripts/kimi-variants.go --tokenizer "$work/k3.gguf" --out "$work/var"); do
  node scripts/llamacpp-decode.mjs --model "$f" --tokens $prompt -n "$ntok" --kv f32 --logits "${f%.gguf}.json" >/dev/null
  printf '%-22s %-5s ' "$(basename "$f" .gguf)" f32
  go run scripts/llamacpp-compare.go --target "$f" --llama "${f%.gguf}.json" | tail -1
done
echo "BF16 weights, dspark's activations rounded to bf16 as llama.cpp's:"
run k3-bf16 "--arch kimi-k3" bf16 --bf16-activations
run linear-bf16 "--arch kimi-linear" bf16 --bf16-activations
echo "MXFP4 experts, dspark's activations quantized to Q8_0 as llama.cpp's (--activations q8):"
run k3-mxfp4-q8 "--arch kimi-k3 --mxfp4" f32 "--activations q8"
echo "information (llama.cpp rounds the activations to bf16 / quantizes them to Q8_0; dspark does not):"
run k3-bf16-f32act "--arch kimi-k3" bf16
run k3-mxfp4 "--arch kimi-k3 --mxfp4" f32
