//go:build !linux

package convert

import "os"

// reserveBlocks has no portable equivalent of fallocate here (macOS's F_PREALLOCATE and
// Windows' SetFileInformationByHandle allocation hints reserve without the Linux guarantees);
// preallocate extends the file instead.
func reserveBlocks(*os.File, int64) error { return errNoReserve }
