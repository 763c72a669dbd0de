#!/usr/bin/env bash
# wine.sh PROGRAM.exe ARGS...: runs a Windows program under Wine in dspark's own Wine prefix,
# made on first use: `wineboot`, then scripts/wine/bcryptprimitives.dll (built with mingw-w64)
# put in its system32, because Debian 12's Wine 8.0 lacks that DLL and Go >= 1.22 binaries do
# not start without it. Used as `go test -exec scripts/wine.sh` and by scripts/cross-tokens.sh
# (make test-cross). Needs Debian's wine64 and gcc-mingw-w64-x86-64-win32.
#
# Env: DSPARK_WINEPREFIX  the prefix (default: dspark/wine in the user cache directory)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export WINEPREFIX=${DSPARK_WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/dspark/wine}
export WINEDEBUG=${WINEDEBUG:--all}
wine=$(command -v wine64 || command -v wine || { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; } || true)
if [ -z "$wine" ]; then
  echo "wine.sh: no wine64 (Debian: apt-get install wine64)" >&2
  exit 127
fi
dll=$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll
if [ ! -f "$dll" ]; then
  mkdir -p "$(dirname "$WINEPREFIX")"
  # go test runs packages in parallel: one process makes the prefix, the others wait.
  exec 9>"$WINEPREFIX.lock"
  flock 9
  if [ ! -f "$dll" ]; then
    "$wine" wineboot -i >/dev/null 2>&1 || true
    "$(dirname "$wine")/wineserver" -w 2>/dev/null || wineserver -w 2>/dev/null || true
    tmp=$(mktemp -d)
    x86_64-w64-mingw32-gcc -O2 -shared -o "$tmp/bcryptprimitives.dll" \
      "$here/wine/bcryptprimitives.c" "$here/wine/bcryptprimitives.def" -ladvapi32
    mv "$tmp/bcryptprimitives.dll" "$dll"
    rm -rf "$tmp"
  fi
  exec 9>&-
fi
# Start the prefix's wineserver and its system processes (services.exe, winedevice.exe, ...)
# first, with their stdio detached: started by the test program itself they inherit its
# stderr, outlive it while other packages' tests keep the shared server busy, and go test then
# waits for that pipe ("Test I/O incomplete 1m0s after exiting"). -p60: the server stays 60 s
# after its last client, so it does not exit between this step and the program.
server=$(dirname "$wine")/wineserver
[ -x "$server" ] || server=$(command -v wineserver || true)
if [ -n "$server" ]; then
  "$server" -p60 </dev/null >/dev/null 2>&1 || true
fi
"$wine" wineboot </dev/null >/dev/null 2>&1 || true
exec "$wine" "$@"
