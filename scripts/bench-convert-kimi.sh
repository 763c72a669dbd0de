#!/usr/bin/env bash
# bench-convert-kimi: converts the real-slice Kimi-K3 target (real widths: 7168 hidden, 96
# KDA/MLA heads, 33792 dense FFN, 3584 latent MoE, 163840 vocab; 4 layers, 4 experts; MXFP4
# experts) synthesized first (not timed), and copies a file of the output's size with
# cp + fsync in the same run. Prints both wall times, their ratio and convert's peak RSS
# (/usr/bin/time -v): the streaming converter's memory must not grow with the tensors.
# Needs ~23 GB free in $BENCH_DIR (default $TMPDIR or /tmp); everything is removed at exit.
#
# Usage: scripts/bench-convert-kimi.sh [path/to/dspark] [kimi-k3|kimi-linear]
set -euo pipefail
bin=${1:-bin/dspark}
arch=${2:-kimi-k3}
if [ ! -x "$bin" ]; then
  mkdir -p "$(dirname "$bin")"
  go build -o "$bin" ./cmd/dspark
fi
base=${BENCH_DIR:-${TMPDIR:-/tmp}}
avail=$(df -Pk "$base" | awk 'NR==2 {print $4}')
if [ "$avail" -lt $((23 * 1000 * 1000)) ]; then
  echo "bench-convert-kimi: need ~23 GB free in $base, have $((avail / 1000 / 1000)) GB" >&2
  exit 1
fi
tmp=$(mktemp -d "$base/bench-convert-kimi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

extra=()
[ "$arch" = kimi-k3 ] && extra=(--mxfp4)
"$bin" synth --kind target --arch "$arch" --preset real-slice "${extra[@]}" --seed 1 --out "$tmp/src" --quiet
sync
/usr/bin/time -v -o "$tmp/convert.time" "$bin" convert "$tmp/src" -o "$tmp/out.gguf" --quiet >/dev/null
size=$(stat -c %s "$tmp/out.gguf")
sync
/usr/bin/time -v -o "$tmp/cp.time" sh -c 'cp --reflink=never "$1" "$2" && sync "$2"' sh "$tmp/out.gguf" "$tmp/copy"

wall() {
  sed -n "s/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p" "$1" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'
}
rss() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }
awk -v s="$(wall "$tmp/convert.time")" -v c="$(wall "$tmp/cp.time")" -v kb="$(rss "$tmp/convert.time")" -v n="$size" -v a="$arch" 'BEGIN {
  printf "bench-convert-kimi: %s real-slice -> GGUF, %.0f output bytes\n", a, n
  printf "  %-30s %8.2f s  %7.0f MB/s\n", "dspark convert (incl. fsync)", s, n / 1e6 / s
  printf "  %-30s %8.2f s  %7.0f MB/s   (limit, same run)\n", "cp + sync, same bytes", c, n / 1e6 / c
  printf "  %-30s %8.2f x\n", "convert / cp time", s / c
  printf "  %-30s %8.1f MiB\n", "convert peak RSS", kb / 1024
}'
