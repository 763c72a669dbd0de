package mmap

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// smaps returns the Rss (KiB) and VmFlags of the mapping that contains b's first byte, as
// /proc/self/smaps reports them; ok is false if the entry is missing (e.g. under an
// emulator that does not provide smaps).
func smaps(t *testing.T, b []byte) (rss int, flags []string, ok bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, nil, false
	}
	defer f.Close()
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, found := strings.Cut(fields[0], "-"); found && !strings.HasSuffix(fields[0], ":") {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				if in {
					return rss, flags, ok
				}
				in = l <= addr && addr < h
				continue
			}
		}
		if !in {
			continue
		}
		switch fields[0] {
		case "Rss:":
			rss, _ = strconv.Atoi(fields[1])
			ok = true
		case "VmFlags:":
			flags = fields[1:]
		}
	}
	return rss, flags, ok
}

func has(flags []string, f string) bool {
	for _, x := range flags {
		if x == f {
			return true
		}
	}
	return false
}

// TestHugePageSwitch: on Linux, Anon memory carries the huge-page advice ("hg" in smaps'
// VmFlags) exactly when the switch is on; off, it is the plain mapping other OSes get.
func TestHugePageSwitch(t *testing.T) {
	defer func() { hugePages = hugePagesDefault }()
	flagsOf := func(huge bool) ([]string, bool) {
		hugePages = huge
		b, err := Anon(4 << 20)
		if err != nil {
			t.Fatal(err)
		}
		defer FreeAnon(b)
		b[0] = 1
		_, flags, ok := smaps(t, b)
		return flags, ok
	}
	on, ok := flagsOf(true)
	if !ok || !has(on, "hg") {
		t.Skipf("no MADV_HUGEPAGE flag visible in /proc/self/smaps (found %v, VmFlags %v): "+
			"a kernel without transparent huge pages, or an emulator", ok, on)
	}
	off, ok := flagsOf(false)
	if !ok {
		t.Fatal("plain mapping missing from /proc/self/smaps")
	}
	if has(off, "hg") {
		t.Fatalf("huge-page advice given with the switch off: VmFlags %v", off)
	}
}

// TestDropPagesRSS: after every page was read, DropPages shrinks the mapping's resident set
// to the partial pages it must keep.
func TestDropPagesRSS(t *testing.T) {
	page := os.Getpagesize()
	n := 256*page + 100
	p, _ := writeFile(t, n)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := File(f, int64(n))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Bytes()
	var sum byte
	for i := 0; i < n; i += page {
		sum += b[i]
	}
	before, _, ok := smaps(t, b)
	if !ok || before < 200*page/1024 {
		t.Skipf("resident set of the mapping not visible in /proc/self/smaps (%d KiB, found %v)", before, ok)
	}
	DropPages(b[1:])
	after, _, _ := smaps(t, b)
	if after > 2*page/1024 {
		t.Fatalf("resident set %d KiB after DropPages, %d before (sum %d); want at most the two partial pages", after, before, sum)
	}
}
