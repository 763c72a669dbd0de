package cpuclock

import (
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

var procGetThreadTimes = windows.NewLazySystemDLL("kernel32.dll").NewProc("GetThreadTimes")

func process() (time.Duration, error) {
	h, _ := windows.GetCurrentProcess()
	var c, e, k, u windows.Filetime
	if err := windows.GetProcessTimes(h, &c, &e, &k, &u); err != nil {
		return 0, os.NewSyscallError("GetProcessTimes", err)
	}
	return ticks(k) + ticks(u), nil
}

func thread() (time.Duration, error) {
	h, _ := windows.GetCurrentThread()
	var c, e, k, u windows.Filetime
	r, _, err := procGetThreadTimes.Call(uintptr(h), uintptr(unsafe.Pointer(&c)), uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&k)), uintptr(unsafe.Pointer(&u)))
	if r == 0 {
		return 0, os.NewSyscallError("GetThreadTimes", err)
	}
	return ticks(k) + ticks(u), nil
}

// ticks converts a FILETIME duration (100 ns units) to a time.Duration.
func ticks(f windows.Filetime) time.Duration {
	return time.Duration(int64(f.HighDateTime)<<32|int64(f.LowDateTime)) * 100
}
