#!/usr/bin/env bash
# cross-tokens.sh: the README tour and `dspark run --quick` give the same bytes and tokens on
# another platform as natively (issue 42's "done when"). Builds dspark for the host and for
# GOOS/GOARCH (default linux/arm64), runs each step with both binaries (the foreign one through
# $EXEC, default qemu-aarch64), and compares:
#   - the checkpoints synth writes and the GGUFs convert writes, byte for byte (sha256);
#   - the tokens of plain decoding of the tour's deepseek2 and qwen3 targets;
#   - the tokens of speculative decoding with the tour's MLA and GQA drafts, greedy and sampled
#     (--schedule full: the sampled tokens then depend on the seed only, not on measured costs);
#   - the greedy tokens of the embedded demo pair (run --quick; its sampled mode uses the verify
#     schedule, fitted to the machine's measured costs, so only greedy is compared).
# Exit 0 when everything is identical; 1 naming the first difference.
#
# Usage: scripts/cross-tokens.sh [GOOS/GOARCH] (env EXEC: the runner, e.g. qemu-aarch64 or wine64)
set -euo pipefail

plat=${1:-linux/arm64}
goos=${plat%/*} goarch=${plat#*/}
exec_=${EXEC:-qemu-aarch64}
if ! command -v "$exec_" >/dev/null; then
  echo "cross-tokens: $exec_ not installed" >&2
  exit 1
fi
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ext=
[ "$goos" = windows ] && ext=.exe
(cd "$here" && CGO_ENABLED=0 go build -o "$work/native" ./cmd/dspark)
(cd "$here" && GOOS=$goos GOARCH=$goarch CGO_ENABLED=0 go build -o "$work/foreign$ext" ./cmd/dspark)

# both NAME ARGS...: runs dspark ARGS in $work/native/NAME and $work/$plat/NAME (same relative
# paths), stdout kept as NAME.out in each.
mkdir -p "$work/n" "$work/f"
both() {
  local name=$1
  shift
  (cd "$work/n" && "$work/native" "$@" >"$name.out" 2>"$name.err") ||
    { echo "cross-tokens: native dspark $*: failed" >&2; cat "$work/n/$name.err" >&2; exit 1; }
  (cd "$work/f" && "$exec_" "$work/foreign$ext" "$@" >"$name.out" 2>"$name.err") ||
    { echo "cross-tokens: $plat dspark $*: failed" >&2; cat "$work/f/$name.err" >&2; exit 1; }
}
same_files() {
  local a b
  a=$(cd "$work/n" && find "$@" -type f -print0 | sort -z | xargs -0 sha256sum)
  b=$(cd "$work/f" && find "$@" -type f -print0 | sort -z | xargs -0 sha256sum)
  if [ "$a" != "$b" ]; then
    echo "cross-tokens: $* differ between native and $plat:" >&2
    diff <(echo "$a") <(echo "$b") >&2 || true
    exit 1
  fi
  echo "same bytes: $*"
}
# same_tokens NAME FILTER: the jq FILTER of NAME.out is the same on both sides.
same_tokens() {
  local a b
  a=$(jq -c "$2" "$work/n/$1.out")
  b=$(jq -c "$2" "$work/f/$1.out")
  if [ "$a" != "$b" ] || [ -z "$a" ] || [ "$a" = null ]; then
    echo "cross-tokens: $1: tokens differ between native and $plat:" >&2
    echo "native:  $a" >&2
    echo "$plat: $b" >&2
    exit 1
  fi
  echo "same tokens: $1 ($(echo "$a" | head -c 60)...)"
}

both synth-t synth --kind target --preset tiny --seed 1 --out tgt -q
both synth-d synth --kind dspark --preset tiny --seed 2 --target tgt --out drf -q
both synth-q synth --kind target --arch qwen3 --preset tiny --out q -q
both synth-g synth --kind dflash --preset tiny --seed 3 --target tgt --out gqa -q
same_files tgt drf q gqa
both conv-t convert tgt -o target.gguf -q
both conv-d convert drf --target tgt -o draft.gguf -q
both conv-q convert q -o qwen3.gguf -q
both conv-g convert gqa --target tgt -o gqa.gguf -q
same_files target.gguf draft.gguf qwen3.gguf gqa.gguf
both tok tokenize target.gguf "Hello, world" --json
same_tokens tok '.'
both run-q run --target qwen3.gguf --prompt Hello -n 16 --json
same_tokens run-q '[.. | .tokens? // empty]'
both run-mla run --target target.gguf --draft draft.gguf --prompt Hello -n 24 --schedule full --json
same_tokens run-mla '[.. | .tokens? // empty]'
both run-mla-s run --target target.gguf --draft draft.gguf --prompt Hello -n 24 --schedule full --temp 0.8 --seed 7 --json
same_tokens run-mla-s '[.. | .tokens? // empty]'
both run-gqa run --target target.gguf --draft gqa.gguf --prompt Hello -n 24 --schedule full --json
same_tokens run-gqa '[.. | .tokens? // empty]'
both quick run --quick -n 16 --json
same_tokens quick '[.modes[] | select(.mode == "greedy") | .prompts[] | .tokens]'
echo "cross-tokens: native and $plat agree"
