#!/usr/bin/env bash
# bench-run: the runtime's headline figures on the `small` pair (a ~232M-parameter BF16
# deepseek2 target, hidden 1024, 16 layers, vocab 32000, and its DSpark draft).
#
# Builds dspark, synthesizes and converts the pair (into $DSPARK_BENCH_DIR, reused when the
# two GGUF files are already there; otherwise a temporary directory removed at exit), runs
# the runtime benchmarks of runtime/deepseek2/bench_test.go with DSPARK_BENCH_TARGET/DRAFT set, and
# prints each figure with the limit measured in the same run and their ratio. The raw `go
# test -bench` output is kept in $DSPARK_BENCH_DIR/bench-run.txt (or printed with -v).
#
# Usage: scripts/bench-run.sh [-v] [path/to/dspark]   (built from ./cmd/dspark if missing)
# Env:   DSPARK_BENCH_DIR   cache directory for the pair (default: a fresh temp dir)
#        BENCHTIME          -benchtime of the decode and verify benchmarks (default 10x)
#        SPECTIME           -benchtime of the speculative benchmark (default 3x)
set -euo pipefail
verbose=0
if [ "${1:-}" = "-v" ]; then
  verbose=1
  shift
fi
bin=${1:-bin/dspark}
mkdir -p "$(dirname "$bin")"
go build -o "$bin" ./cmd/dspark

if [ -n "${DSPARK_BENCH_DIR:-}" ]; then
  dir=$DSPARK_BENCH_DIR
  mkdir -p "$dir"
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-run.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
  verbose=1 # the raw output goes with the directory
fi
target=$dir/target.gguf
draft=$dir/draft.gguf
if [ ! -s "$target" ] || [ ! -s "$draft" ]; then
  echo "bench-run: synthesizing and converting the small pair into $dir" >&2
  rm -rf "$dir/target-hf" "$dir/draft-hf"
  "$bin" synth --kind target --preset small --seed 1 --out "$dir/target-hf" --quiet
  "$bin" synth --kind dspark --preset small --seed 2 --target "$dir/target-hf" --out "$dir/draft-hf" --quiet
  # convert writes atomically: a GGUF that exists is complete
  "$bin" convert "$dir/target-hf" -o "$target" --quiet --force
  "$bin" convert "$dir/draft-hf" --target "$dir/target-hf" -o "$draft" --quiet --force
  rm -rf "$dir/target-hf" "$dir/draft-hf"
else
  echo "bench-run: reusing $target and $draft" >&2
fi

raw=$dir/bench-run.txt
export DSPARK_BENCH_TARGET=$target DSPARK_BENCH_DRAFT=$draft
{
  go test -run '^$' -bench '^Benchmark(TargetDecode|Verify8)$' -benchtime "${BENCHTIME:-10x}" -count 1 ./runtime/deepseek2/
  go test -run '^$' -bench '^BenchmarkSpeculative$' -benchtime "${SPECTIME:-3x}" -count 1 ./runtime/deepseek2/
} >"$raw" 2>&1 || { cat "$raw" >&2; exit 1; }
if [ "$verbose" = 1 ]; then
  cat "$raw"
fi

# Each benchmark line is "Name-P  N  ns/op  (value unit)..."; index the values by name+unit.
awk -v load="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')" '
/^Benchmark/ {
  name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
  for (i = 3; i < NF; i += 2) v[name, $(i + 1)] = $i
}
function row(fig, val, lim, ratio, goal) {
  printf "| %-44s | %12s | %12s | %8s | %-10s |\n", fig, val, lim, ratio, goal
}
function f(x, fmt) { return x == "" ? "-" : sprintf(fmt, x) }
END {
  printf "runtime benchmarks on the small pair (load average %s)\n\n", load
  row("figure", "value", "limit", "ratio", "goal")
  print "|----------------------------------------------|--------------|--------------|----------|------------|"
  for (t = 1; t <= 8; t++) {
    d = "TargetDecode/threads=" t
    if ((d, "tok/s") in v) {
      row("decode tok/s, " t " thread(s)", f(v[d, "tok/s"], "%.1f"), f(v[d, "read-limit-tok/s"], "%.1f"), f(v[d, "ratio-to-read"], "%.2f"), ">= 0.85")
      row("  weight GB/s (" f(v[d, "weight-MB/tok"], "%.0f") " MB/token) vs streaming read", f(v[d, "GB/s"], "%.2f"), f(v[d, "read-GB/s"], "%.2f"), f(v[d, "ratio-to-read"], "%.2f"), ">= 0.85")
    }
    r = "Verify8/threads=" t
    if ((r, "cost-vs-1-row") in v)
      row("8-row verify / 1-row step, " t " thread(s)", f(v[r, "ms/8-rows"], "%.1f ms"), f(v[r, "ms/1-row"], "%.1f ms"), f(v[r, "cost-vs-1-row"], "%.2f"), "<= 1.6")
    if ((r, "bytes-vs-1-row") in v)
      row("  weight bytes 8 rows / 1 row (MoE union)", f(v[r, "bytes-vs-1-row"], "%.2f"), "-", "-", "-")
  }
  for (t = 1; t <= 8; t++) {
    s = "Speculative/threads=" t
    if (!((s, "speedup") in v)) continue
    row("speculative vs plain tok/s, " t " thread(s)", f(v[s, "spec-tok/s"], "%.1f"), f(v[s, "plain-tok/s"], "%.1f"), f(v[s, "speedup"], "%.2f"), "-")
    row("  speedup vs tau", f(v[s, "speedup"], "%.2f"), f(v[s, "tau"], "%.2f"), f(v[s, "speedup/tau"], "%.2f"), ">= 0.6")
    row("  acceptance rate", f(v[s, "accept-rate"], "%.3f"), "-", "-", "-")
    acc = ""
    for (p = 1; (s, "accept-p" p) in v; p++) acc = acc (p > 1 ? " " : "") sprintf("%.2f", v[s, "accept-p" p])
    row("  acceptance per position", acc, "-", "-", "-")
    row("  draft / verify ms per round (wall)", f(v[s, "draft-ms/round"], "%.1f"), f(v[s, "verify-ms/round"], "%.1f"), f(v[s, "draft-share"], "%.2f"), "-")
  }
}' "$raw"
echo
echo "clocks: 1 thread = process CPU time under GOMAXPROCS=1; more threads = wall clock"
echo "limits: decode = streaming read of the step's weight bytes; verify = the 1-row step; speculative = plain decoding"
if [ -n "${DSPARK_BENCH_DIR:-}" ]; then
  echo "raw output: $raw"
fi
