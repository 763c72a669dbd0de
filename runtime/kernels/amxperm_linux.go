//go:build linux && amd64 && !purego && !noasm

package kernels

import (
	"fmt"
	"syscall"
)

// amxPermit asks Linux for the permission to use the AMX tile data state (XTILEDATA, xstate
// component 18) in this process: arch_prctl(ARCH_REQ_XCOMP_PERM). Without it the first tile
// instruction faults. The kernel then saves the tile state on context switches and signals.
func amxPermit() error {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0); e != 0 {
		return fmt.Errorf("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA): %w", e)
	}
	return nil
}
