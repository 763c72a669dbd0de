#!/usr/bin/env bash
# bench-convert: converts the k3-full draft (synthesized first, not timed) and, in the same
# run, copies a file of the same number of bytes as the output with cp + fsync (convert
# syncs its output before renaming it into place). Prints both wall times, their ratio
# (goal <= 1.15x: the disk is the limit) and convert's peak RSS from /usr/bin/time -v
# (goal < 256 MiB). Needs ~17 GB free in $BENCH_DIR (default $TMPDIR or /tmp); everything
# is removed at exit.
#
# Usage: scripts/bench-convert.sh [path/to/dspark]   (built from ./cmd/dspark if missing)
set -euo pipefail
bin=${1:-bin/dspark}
if [ ! -x "$bin" ]; then
  mkdir -p "$(dirname "$bin")"
  go build -o "$bin" ./cmd/dspark
fi
base=${BENCH_DIR:-${TMPDIR:-/tmp}}
avail=$(df -Pk "$base" | awk 'NR==2 {print $4}')
if [ "$avail" -lt $((17 * 1000 * 1000)) ]; then
  echo "bench-convert: need ~17 GB free in $base, have $((avail / 1000 / 1000)) GB" >&2
  exit 1
fi
tmp=$(mktemp -d "$base/bench-convert.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$bin" synth --kind dspark --preset k3-full --seed 1 --out "$tmp/k3" --quiet
sync
/usr/bin/time -v -o "$tmp/convert.time" "$bin" convert "$tmp/k3" -o "$tmp/k3.gguf" --quiet >/dev/null
out="$tmp/k3.gguf"
size=$(stat -c %s "$out")
sync
/usr/bin/time -v -o "$tmp/cp.time" sh -c 'cp --reflink=never "$1" "$2" && sync "$2"' sh "$out" "$tmp/copy"

wall() { # "Elapsed (wall clock) time (h:mm:ss or m:ss): 0:12.34" -> seconds
  sed -n "s/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p" "$1" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'
}
rss() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }
conv_s=$(wall "$tmp/convert.time")
cp_s=$(wall "$tmp/cp.time")
conv_kb=$(rss "$tmp/convert.time")
awk -v s="$conv_s" -v c="$cp_s" -v kb="$conv_kb" -v n="$size" 'BEGIN {
  printf "bench-convert: k3-full draft -> GGUF, %.0f output bytes\n", n
  printf "  %-30s %8.2f s  %7.0f MB/s\n", "dspark convert (incl. fsync)", s, n / 1e6 / s
  printf "  %-30s %8.2f s  %7.0f MB/s   (limit, same run)\n", "cp + sync, same bytes", c, n / 1e6 / c
  printf "  %-30s %8.2f x  (goal: <= 1.15)\n", "convert / cp time", s / c
  printf "  %-30s %8.1f MiB (goal: < 256 MiB)\n", "convert peak RSS", kb / 1024
}'
