#!/usr/bin/env bash
# bench-synth: writes the k3-full draft (7,124,633,450 bytes) with `dspark synth` and, in the
# same run, copies a file of the same size with cp (+ fsync, since synth syncs its output
# before renaming it into place). Prints both wall times, their ratio (the disk is the limit)
# and synth's peak RSS (goal: under 256 MiB). Needs ~14.3 GB free in $BENCH_DIR (default
# $TMPDIR or /tmp); everything is removed at exit.
#
# Usage: scripts/bench-synth.sh [path/to/dspark]   (built from ./cmd/dspark if missing)
set -euo pipefail
bin=${1:-bin/dspark}
if [ ! -x "$bin" ]; then
  mkdir -p "$(dirname "$bin")"
  go build -o "$bin" ./cmd/dspark
fi
base=${BENCH_DIR:-${TMPDIR:-/tmp}}
need=$((15 * 1000 * 1000))  # KB
avail=$(df -Pk "$base" | awk 'NR==2 {print $4}')
if [ "$avail" -lt "$need" ]; then
  echo "bench-synth: need ~15 GB free in $base, have $((avail / 1000 / 1000)) GB" >&2
  exit 1
fi
tmp=$(mktemp -d "$base/bench-synth.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

sync
/usr/bin/time -f '%e %M' -o "$tmp/synth.time" \
  "$bin" synth --kind dspark --preset k3-full --seed 1 --out "$tmp/k3" --quiet
file="$tmp/k3/model.safetensors"
size=$(stat -c %s "$file")

sync
/usr/bin/time -f '%e %M' -o "$tmp/cp.time" sh -c 'cp "$1" "$2" && sync "$2"' sh "$file" "$tmp/copy"

read -r synth_s synth_kb < "$tmp/synth.time"
read -r cp_s cp_kb < "$tmp/cp.time"
awk -v s="$synth_s" -v c="$cp_s" -v kb="$synth_kb" -v n="$size" 'BEGIN {
  printf "bench-synth: k3-full draft, %.0f bytes\n", n
  printf "  %-28s %8.2f s  %7.0f MB/s\n", "dspark synth (incl. fsync)", s, n / 1e6 / s
  printf "  %-28s %8.2f s  %7.0f MB/s   (limit, same run)\n", "cp + sync, same size", c, n / 1e6 / c
  printf "  %-28s %8.2f x  (goal: close to 1)\n", "synth / cp time", s / c
  printf "  %-28s %8.1f MiB (goal: < 256 MiB)\n", "synth peak RSS", kb / 1024
}'
if [ "$size" -ne 7124633450 ]; then
  echo "bench-synth: FAIL: k3-full file is $size bytes, want 7124633450" >&2
  exit 1
fi
