#!/usr/bin/env bash
# Runs every fuzz target of the module for $FUZZTIME each (default 3s). Targets are discovered
# with `go test -list`, so a new Fuzz function is picked up without editing this script.
set -euo pipefail
fuzztime=${FUZZTIME:-3s}
n=0
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    echo "fuzz $pkg $t ($fuzztime)"
    go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" "$pkg"
    n=$((n + 1))
  done
done
echo "fuzz: $n targets ran for $fuzztime each"
