package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapFile maps the file with CreateFileMapping and MapViewOfFile. The mapping object's
// handle is closed at once: the view keeps the section (and the file) alive until it is
// unmapped, so the view outlives both f and the handle, as on Unix.
func mapFile(f *os.File, size int) ([]byte, error) {
	s := uint64(size)
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY, uint32(s>>32), uint32(s), nil)
	if err != nil {
		return nil, os.NewSyscallError("CreateFileMapping", err)
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	windows.CloseHandle(h)
	if err != nil {
		return nil, os.NewSyscallError("MapViewOfFile", err)
	}
	return view(addr, size), nil
}

func unmapFile(b []byte) error {
	return os.NewSyscallError("UnmapViewOfFile", windows.UnmapViewOfFile(uintptr(unsafe.Pointer(unsafe.SliceData(b)))))
}

// anon commits n bytes of zeroed read-write pages with VirtualAlloc.
func anon(n int) ([]byte, error) {
	addr, err := windows.VirtualAlloc(0, uintptr(n), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
	if err != nil {
		return nil, os.NewSyscallError("VirtualAlloc", err)
	}
	return view(addr, n), nil
}

func freeAnon(b []byte) error {
	return os.NewSyscallError("VirtualFree", windows.VirtualFree(uintptr(unsafe.Pointer(unsafe.SliceData(b))), 0, windows.MEM_RELEASE))
}

// dropPages removes the pages from the working set: VirtualUnlock on pages that are not
// locked does exactly that (and reports ERROR_NOT_LOCKED, which is expected).
func dropPages(b []byte) {
	_ = windows.VirtualUnlock(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
}

// view turns an address the OS returned into a slice. The indirection through &addr keeps
// vet's unsafeptr check quiet: the memory is not Go's, so the GC never moves it.
func view(addr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), n)
}
