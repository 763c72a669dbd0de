package convert

import (
	"os"

	"golang.org/x/sys/unix"
)

func reserveBlocks(f *os.File, size int64) error {
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
