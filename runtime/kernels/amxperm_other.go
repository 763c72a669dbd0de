//go:build !linux && amd64 && !purego && !noasm

package kernels

import "errors"

// amxPermit reports that this build knows how to obtain the AMX tile permission on Linux only.
func amxPermit() error {
	return errors.New("the AMX tile state permission is requested on Linux only")
}
