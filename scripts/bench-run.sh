#!/usr/bin/env bash
# bench-run: the runtime's headline figures on the `small` pair (a ~232M-parameter BF16
# deepseek2 target, hidden 1024, 16 layers, vocab 32000, and its DSpark draft) and on the
# `small` qwen3 target (6 dense GQA layers whose decode step reads as many weight bytes, 232 MB).
#
# Builds dspark, synthesizes and converts the pair and the qwen3 target (into
# $DSPARK_BENCH_DIR, reused when the GGUF files are already there; otherwise a temporary
# directory removed at exit), runs the runtime benchmarks of runtime/deepseek2/bench_test.go
# with DSPARK_BENCH_TARGET/DRAFT set and those of runtime/qwen3/bench_test.go with
# DSPARK_BENCH_QWEN3 (the two decode benchmarks alternate, $ROUNDS times, so that both
# targets see the same machine), and prints each figure with the limit measured in the same
# run and their ratio. The raw `go test -bench` output is kept in
# $DSPARK_BENCH_DIR/bench-run.txt (or printed with -v).
#
# Usage: scripts/bench-run.sh [-v] [path/to/dspark]   (built from ./cmd/dspark if missing)
# Env:   DSPARK_BENCH_DIR   cache directory for the pair (default: a fresh temp dir)
#        BENCHTIME          -benchtime of the decode and verify benchmarks (default 10x)
#        SPECTIME           -benchtime of the speculative benchmark (default 3x)
#        ROUNDS             alternations of the two targets' decode benchmarks (default 3)
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
qwen3=$dir/target-qwen3.gguf
if [ ! -s "$qwen3" ]; then
  echo "bench-run: synthesizing and converting the small qwen3 target into $dir" >&2
  rm -rf "$dir/qwen3-hf"
  "$bin" synth --kind target --arch qwen3 --preset small --seed 1 --out "$dir/qwen3-hf" --quiet
  "$bin" convert "$dir/qwen3-hf" -o "$qwen3" --quiet --force
  rm -rf "$dir/qwen3-hf"
fi
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
export DSPARK_BENCH_TARGET=$target DSPARK_BENCH_DRAFT=$draft DSPARK_BENCH_QWEN3=$qwen3
go test -c -o "$dir/deepseek2.test" ./runtime/deepseek2/
go test -c -o "$dir/qwen3.test" ./runtime/qwen3/
bench() { # bench PKG REGEXP BENCHTIME: one benchmark binary, names prefixed with the package
  "$dir/$1.test" -test.run '^$' -test.bench "$2" -test.benchtime "$3" -test.count 1 | sed "s/^Benchmark/Benchmark$1:/"
}
{
  for r in $(seq 1 "${ROUNDS:-3}"); do
    bench deepseek2 '^BenchmarkTargetDecode$' "${BENCHTIME:-10x}"
    bench qwen3 '^BenchmarkTargetDecode$' "${BENCHTIME:-10x}"
  done
  bench deepseek2 '^BenchmarkVerify8$' "${BENCHTIME:-10x}"
  bench qwen3 '^BenchmarkVerify8$' "${BENCHTIME:-10x}"
  bench deepseek2 '^BenchmarkSpeculative$' "${SPECTIME:-3x}"
} >"$raw" 2>&1 || { cat "$raw" >&2; exit 1; }
if [ "$verbose" = 1 ]; then
  cat "$raw"
fi

awk -v load="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')" '
# Each benchmark line is "Name-P  N  ns/op  (value unit)..."; repeated runs of a name (the
# alternating decode rounds) keep every value, and the table shows their median.
/^Benchmark/ {
  name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
  for (i = 3; i < NF; i += 2) { k = name SUBSEP $(i + 1); n[k]++; v[k, n[k]] = $i }
}
function med(name, unit,   k, c, i, j, t, a) {
  k = name SUBSEP unit
  c = n[k]
  if (c == 0) return ""
  for (i = 1; i <= c; i++) a[i] = v[k, i]
  for (i = 2; i <= c; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
  return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
function has(name, unit) { return n[name SUBSEP unit] > 0 }
function row(fig, val, lim, ratio, goal) {
  printf "| %-52s | %12s | %12s | %8s | %-10s |\n", fig, val, lim, ratio, goal
}
function f(x, fmt) { return x == "" ? "-" : sprintf(fmt, x) }
END {
  printf "runtime benchmarks on the small pair and the small qwen3 target (load average %s)\n\n", load
  row("figure", "value", "limit", "ratio", "goal")
  print "|------------------------------------------------------|--------------|--------------|----------|------------|"
  for (p = 1; p <= 2; p++) {
    pkg = p == 1 ? "deepseek2" : "qwen3"
    for (t = 1; t <= 8; t++) {
      d = pkg ":TargetDecode/threads=" t
      if (has(d, "tok/s")) {
        row(pkg " decode tok/s, " t " thread(s), " n[d SUBSEP "tok/s"] " run(s)", f(med(d, "tok/s"), "%.1f"), f(med(d, "read-limit-tok/s"), "%.1f"), f(med(d, "ratio-to-read"), "%.2f"), ">= 0.85")
        row("  weight GB/s (" f(med(d, "weight-MB/tok"), "%.0f") " MB/token) vs streaming read", f(med(d, "GB/s"), "%.2f"), f(med(d, "read-GB/s"), "%.2f"), f(med(d, "ratio-to-read"), "%.2f"), ">= 0.85")
      }
    }
  }
  for (t = 1; t <= 8; t++) {
    a = "deepseek2:TargetDecode/threads=" t; b = "qwen3:TargetDecode/threads=" t
    if (has(a, "ratio-to-read") && has(b, "ratio-to-read"))
      row("qwen3 / deepseek2 share of the read, " t " thread(s)", f(med(b, "ratio-to-read"), "%.2f"), f(med(a, "ratio-to-read"), "%.2f"), f(med(b, "ratio-to-read") / med(a, "ratio-to-read"), "%.2f"), "~1")
  }
  for (p = 1; p <= 2; p++) {
    pkg = p == 1 ? "deepseek2" : "qwen3"
    for (t = 1; t <= 8; t++) {
      r = pkg ":Verify8/threads=" t
      if (has(r, "cost-vs-1-row"))
        row(pkg " 8-row verify / 1-row step, " t " thread(s)", f(med(r, "ms/8-rows"), "%.1f ms"), f(med(r, "ms/1-row"), "%.1f ms"), f(med(r, "cost-vs-1-row"), "%.2f"), "<= 1.6")
      if (has(r, "bytes-vs-1-row"))
        row("  weight bytes 8 rows / 1 row (MoE union)", f(med(r, "bytes-vs-1-row"), "%.2f"), "-", "-", "-")
    }
  }
  for (t = 1; t <= 8; t++) {
    s = "deepseek2:Speculative/threads=" t
    if (!has(s, "speedup")) continue
    row("speculative vs plain tok/s, " t " thread(s)", f(med(s, "spec-tok/s"), "%.1f"), f(med(s, "plain-tok/s"), "%.1f"), f(med(s, "speedup"), "%.2f"), "-")
    row("  speedup vs tau", f(med(s, "speedup"), "%.2f"), f(med(s, "tau"), "%.2f"), f(med(s, "speedup/tau"), "%.2f"), ">= 0.6")
    row("  acceptance rate", f(med(s, "accept-rate"), "%.3f"), "-", "-", "-")
    acc = ""
    for (q = 1; has(s, "accept-p" q); q++) acc = acc (q > 1 ? " " : "") sprintf("%.2f", med(s, "accept-p" q))
    row("  acceptance per position", acc, "-", "-", "-")
    row("  draft / verify ms per round (wall)", f(med(s, "draft-ms/round"), "%.1f"), f(med(s, "verify-ms/round"), "%.1f"), f(med(s, "draft-share"), "%.2f"), "-")
  }
}' "$raw"
echo
echo "clocks: 1 thread = process CPU time under GOMAXPROCS=1; more threads = wall clock"
echo "limits: decode = streaming read of the step's weight bytes; verify = the 1-row step; speculative = plain decoding"
if [ -n "${DSPARK_BENCH_DIR:-}" ]; then
  echo "raw output: $raw"
fi
