/* bcryptprimitives.c: the one function of Windows' bcryptprimitives.dll that every Go binary
 * since Go 1.22 loads at start-up (ProcessPrng, the runtime's random source), for Wine 8.0
 * (Debian 12), which lacks the DLL. Test tooling for `make test-cross`: it is built with
 * mingw-w64 into the Wine prefix of scripts/wine.sh and is never part of dspark. It fills the
 * buffer from RtlGenRandom (advapi32's SystemFunction036), which Wine implements. */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!RtlGenRandom(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
