#!/usr/bin/env bash
# bench-llamacpp: dspark's target decoding side by side with llama.cpp's CPU backend on the
# same GGUF file, in one run, with the streaming read of the step's weight bytes as the limit.
# A benchmark, never part of `make test` or CI.
#
# llama.cpp comes from the npm package node-llama-cpp (prebuilt CPU backends for linux-x64;
# ggml loads the best variant for the CPU, e.g. zen4 or sapphirerapids), installed on first
# use into $DSPARK_LLAMA_DIR with `npm install` (nothing is downloaded at run time). Each
# round runs, for every thread count, llama.cpp with flash attention off and on, and
# `dspark run --threads T` (GOMAXPROCS = T), alternating the order from round to round, then
# the file architecture's BenchmarkTargetDecode (runtime/deepseek2, runtime/qwen3 or runtime/qwen35) for the streaming read of the same bytes
# (kernels.StreamRead of the step's weights). Every run decodes the same fixed token-id prompt greedily for the
# same number of tokens and is timed from the first generated token to the last (prompt
# processing excluded on both sides). scripts/llamacpp-report.mjs prints the medians and the
# ratios; then llama.cpp's greedy tokens and logits are compared with dspark's step by step
# (scripts/llamacpp-compare.go), on the file and, for a generated model, on an F32 copy with
# an F32 KV cache (the exact-arithmetic check).
#
# Usage: scripts/bench-llamacpp.sh [--dense | --qwen3 | --qwen35 [--moe]] [--no-compare] [FILE.gguf]
#   FILE.gguf     any deepseek2, qwen3, qwen35 or qwen35moe GGUF; without it the `small` preset
#                 target of scripts/bench-run.sh (MoE, 232M parameters), or with --dense its
#                 all-dense variant (244M parameters, 16 dense layers), or with --qwen3 the
#                 small qwen3 target (149M parameters, 232 MB read per step), or with --qwen35
#                 the small Qwen3.5 hybrid (6 DeltaNet and 2 attention layers, ~372 MB read per
#                 step; --moe: the MoE variant, 16 experts of which 4 used, ~322 MB, with an MTP
#                 block, in the multimodal wrapper; TINY=1: the tiny presets, for a quick
#                 agreement check), is synthesized and converted.
#   --no-compare  skip the token/logit comparison
# Env:   DSPARK_LLAMA_DIR   node-llama-cpp install directory (default ~/.cache/dspark/llama)
#        NODE_LLAMA_CPP_VERSION   the version installed there (default 3.22.1)
#        LLAMA_CPU          ggml CPU variant to force (e.g. zen4, haswell; default: ggml's pick)
#        DSPARK_BENCH_DIR   cache directory for the generated GGUFs (default: a temp dir)
#        DSPARK_BIN         the dspark binary (default bin/dspark, built from ./cmd/dspark)
#        ROUNDS (5), TOKENS (64 decoded), PROMPT_LEN (32), THREADS ("1 2"), BENCHTIME (5x),
#        TINY (0; 1: the tiny qwen35 presets)
set -euo pipefail
dense=0
qwen3=0
qwen35=0
moe=0
compare=1
model=
while [ $# -gt 0 ]; do
  case $1 in
  --dense) dense=1 ;;
  --qwen3) qwen3=1 ;;
  --qwen35) qwen35=1 ;;
  --moe) moe=1 ;;
  --no-compare) compare=0 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "bench-llamacpp: unknown flag $1" >&2; exit 2 ;;
  *) model=$1 ;;
  esac
  shift
done
rounds=${ROUNDS:-5}
ntok=${TOKENS:-64}
plen=${PROMPT_LEN:-32}
threads=${THREADS:-1 2}
version=${NODE_LLAMA_CPP_VERSION:-3.22.1}
llama_dir=${DSPARK_LLAMA_DIR:-$HOME/.cache/dspark/llama}
here=$(cd "$(dirname "$0")" && pwd)
# Paths from the caller's directory, then work from the repository root (go test, go run).
if [ -n "$model" ]; then
  [ -s "$model" ] || { echo "bench-llamacpp: $model: no such file" >&2; exit 2; }
  model=$(realpath "$model")
fi
bin=$(realpath -m "${DSPARK_BIN:-$here/../bin/dspark}")
[ -z "${DSPARK_BENCH_DIR:-}" ] || DSPARK_BENCH_DIR=$(realpath -m "$DSPARK_BENCH_DIR")
cd "$here/.."

for tool in node npm go; do
  command -v $tool >/dev/null || { echo "bench-llamacpp: needs $tool on PATH" >&2; exit 1; }
done
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  echo "bench-llamacpp: only linux-x64 is wired up (the @node-llama-cpp/linux-x64 binaries)" >&2
  exit 1
fi
if [ -z "${DSPARK_BIN:-}" ]; then
  mkdir -p "$(dirname "$bin")"
  go build -o "$bin" ./cmd/dspark
fi

# --- llama.cpp: node-llama-cpp and its linux-x64 CPU binaries, outside the repository -----
installed=$(node -p "try { require('$llama_dir/node_modules/node-llama-cpp/package.json').version } catch { '' }")
if [ "$installed" != "$version" ]; then
  echo "bench-llamacpp: installing node-llama-cpp@$version into $llama_dir" >&2
  mkdir -p "$llama_dir"
  [ -f "$llama_dir/package.json" ] || echo '{"name": "dspark-llamacpp-bench", "private": true}' >"$llama_dir/package.json"
  # --omit=optional keeps out the CUDA/Vulkan builds; --ignore-scripts keeps postinstall from
  # trying to build or download anything: the prebuilt CPU package is all that is used.
  npm install --prefix "$llama_dir" --no-audit --no-fund --omit=optional --ignore-scripts \
    "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version" >&2
  rm -rf "$llama_dir"/cpu-*
fi
run_dir=$llama_dir
if [ -n "${LLAMA_CPU:-}" ] && [ "$LLAMA_CPU" != auto ]; then
  # ggml loads the best-scoring libggml-cpu-*.so of the directory: a hard-linked copy of the
  # install holding only the wanted variant forces it.
  run_dir=$llama_dir/cpu-$LLAMA_CPU
  bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
  if [ ! -f "$llama_dir/$bins/libggml-cpu-$LLAMA_CPU.so" ]; then
    echo "bench-llamacpp: no CPU variant $LLAMA_CPU; have: $(cd "$llama_dir/$bins" && ls libggml-cpu-*.so | sed 's/libggml-cpu-//; s/\.so//' | tr '\n' ' ')" >&2
    exit 2
  fi
  if [ ! -d "$run_dir" ]; then
    mkdir -p "$run_dir"
    cp -al "$llama_dir/node_modules" "$llama_dir/package.json" "$run_dir/"
    find "$run_dir/$bins" -name 'libggml-cpu-*.so' ! -name "libggml-cpu-$LLAMA_CPU.so" -delete
  fi
fi

# --- the model --------------------------------------------------------------------------
if [ -n "${DSPARK_BENCH_DIR:-}" ]; then
  dir=$DSPARK_BENCH_DIR
  mkdir -p "$dir"
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-llamacpp.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
fi
f32=
if [ -z "$model" ]; then
  # The same recipe and file name as scripts/bench-run.sh, so the two share the cache.
  name=target
  flags=()
  if [ "$dense" = 1 ]; then
    name=target-dense
    flags=(--dense)
  fi
  if [ "$qwen3" = 1 ]; then
    name=target-qwen3
    flags=(--arch qwen3)
  fi
  preset=small
  if [ "$qwen35" = 1 ]; then
    name=target-qwen35
    flags=(--arch qwen35)
    [ "${TINY:-0}" = 0 ] || { preset=tiny; name=$name-tiny; }
    if [ "$moe" = 1 ]; then
      name=${name/qwen35/qwen35moe}
      flags=(--arch qwen35 --moe --mtp 1 --wrapper)
    fi
  fi
  model=$dir/$name.gguf
  f32=$dir/$name-f32.gguf
  if [ ! -s "$model" ] || { [ "$compare" = 1 ] && [ ! -s "$f32" ]; }; then
    echo "bench-llamacpp: synthesizing and converting the small target into $dir" >&2
    rm -rf "$dir/$name-hf"
    "$bin" synth --kind target --preset "$preset" --seed 1 "${flags[@]}" --out "$dir/$name-hf" --quiet
    # convert writes atomically: a GGUF that exists is complete
    [ -s "$model" ] || "$bin" convert "$dir/$name-hf" -o "$model" --quiet --force
    [ "$compare" = 0 ] || "$bin" convert "$dir/$name-hf" --outtype f32 -o "$f32" --quiet --force
    rm -rf "$dir/$name-hf"
  fi
fi

# A fixed prompt of token ids, clear of the reserved tokens at the top of the vocabulary.
"$bin" inspect "$model" --json --no-tensors >"$dir/inspect.json"
prompt=$(node "$here/llamacpp-report.mjs" prompt "$dir/inspect.json" "$plen")

# --- the runs ---------------------------------------------------------------------------
out=$dir/llamacpp-runs
rm -rf "$out"
mkdir -p "$out"
maxt=1
for t in $threads; do [ "$t" -gt "$maxt" ] && maxt=$t; done
# The read limit comes from the benchmark of the file's own architecture.
arch=$(node -p "JSON.parse(require('fs').readFileSync('$dir/inspect.json', 'utf8')).metadata.find((m) => m.key === 'general.architecture').value")
timing=1
pkg=$arch
case $arch in
deepseek2) benchenv=DSPARK_BENCH_TARGET ;;
qwen3) benchenv=DSPARK_BENCH_QWEN3 ;;
qwen35 | qwen35moe) benchenv=DSPARK_BENCH_QWEN35 pkg=qwen35 ;;
*) echo "bench-llamacpp: $model: architecture $arch is not a target dspark runs" >&2; exit 2 ;;
esac
[ "$timing" = 1 ] || [ "$compare" = 1 ] || { echo "bench-llamacpp: nothing to do (--no-compare on $arch)" >&2; exit 2; }
[ "$timing" = 0 ] || go test -c -o "$dir/runtime.test" "./runtime/$pkg/"
llama() { # llama THREADS FLASH OUTFILE
  (cd "$dir" && DSPARK_LLAMA_DIR=$run_dir node "$here/llamacpp-decode.mjs" --model "$model" \
    --tokens "$prompt" -n "$ntok" --threads "$1" --flash "$2" >"$3" 2>"$3.err") ||
    { echo "bench-llamacpp: llama.cpp failed (threads $1, flash $2):" >&2; cat "$3.err" >&2; exit 1; }
}
dspark() { # dspark THREADS OUTFILE
  GOMAXPROCS=$1 "$bin" run --target "$model" --tokens "$prompt" -n "$ntok" --threads "$1" --json >"$2" 2>"$2.err" ||
    { echo "bench-llamacpp: dspark run failed (threads $1):" >&2; cat "$2.err" >&2; exit 1; }
}
if [ "$timing" = 1 ]; then
{
  echo "start $(date -u '+%Y-%m-%d %H:%M UTC') load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "cpu $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1) | $(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "model $model"
  echo "node-llama-cpp $version, llama.cpp $(node -p "require('$llama_dir/node_modules/node-llama-cpp/llama/binariesGithubRelease.json').release")"
} >"$out/info.txt"
echo "bench-llamacpp: $rounds rounds x threads {$threads} x (llama.cpp flash off, on; dspark) + read, $ntok tokens" >&2
for r in $(seq 1 "$rounds"); do
  for t in $threads; do
    if [ $((r % 2)) = 1 ]; then
      llama "$t" off "$out/r$r-t$t-llama-off.json"
      llama "$t" on "$out/r$r-t$t-llama-on.json"
      dspark "$t" "$out/r$r-t$t-dspark.json"
    else
      dspark "$t" "$out/r$r-t$t-dspark.json"
      llama "$t" on "$out/r$r-t$t-llama-on.json"
      llama "$t" off "$out/r$r-t$t-llama-off.json"
    fi
  done
  (cd "$dir" && GOMAXPROCS=$maxt env "$benchenv=$model" ./runtime.test -test.run '^$' \
    -test.bench '^BenchmarkTargetDecode$' -test.benchtime "${BENCHTIME:-5x}" >"$out/r$r-read.txt" 2>&1) ||
    { cat "$out/r$r-read.txt" >&2; exit 1; }
  echo "round $r done $(date -u '+%H:%M:%S') load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/info.txt" >&2
done
echo "end $(date -u '+%Y-%m-%d %H:%M UTC') load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/info.txt"
node "$here/llamacpp-report.mjs" report "$out" "$threads"
fi

# --- greedy tokens and logits, step by step -----------------------------------------------
if [ "$compare" = 1 ]; then
  logits() { # logits FILE KV TAG: llama.cpp's greedy tokens and logits
    (cd "$dir" && DSPARK_LLAMA_DIR=$run_dir node "$here/llamacpp-decode.mjs" --model "$1" --tokens "$prompt" \
      -n 32 --kv "$2" --logits "$out/logits-$3.json" >/dev/null 2>"$out/logits-$3.err") ||
      { cat "$out/logits-$3.err" >&2; exit 1; }
  }
  cmp() { # cmp DSPARK_FILE TAG DESCRIPTION: dspark on DSPARK_FILE fed the tokens of logits-TAG
    go run "$here/llamacpp-compare.go" --target "$1" --llama "$out/logits-$2.json" >"$out/compare-$2-${1##*/}.txt"
    node "$here/llamacpp-report.mjs" compare "$3" "$out/compare-$2-${1##*/}.txt"
  }
  echo
  echo "greedy decoding of 32 tokens, flash attention off; dspark is fed llama.cpp's tokens and the"
  echo "two next-token distributions are compared at every step:"
  logits "$model" f16 file
  cmp "$model" file "both on the file (llama.cpp: its BF16/F16 paths, KV cache f16)"
  if [ -n "$f32" ]; then
    logits "$f32" f32 f32
    cmp "$f32" f32 "both on an F32 copy, llama.cpp KV cache f32 (exact arithmetic on both sides)"
    cmp "$model" f32 "dspark on the file, llama.cpp on the F32 copy (dspark against the exact result)"
  fi
fi
[ -z "${DSPARK_BENCH_DIR:-}" ] || echo "raw runs: $out"
