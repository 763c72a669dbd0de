package kernels

import (
	"testing"
	"unsafe"
)

// TestArenaSharing checks that small packed matrices share a chunk, that big ones get their
// own mapping, and that the chunk's count of live matrices follows Pack and Release.
func TestArenaSharing(t *testing.T) {
	small := func() *Mat {
		m, err := NewMat(BF16, 40, 64, make([]byte, 40*64*2))
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := small(), small()
	if a.pk.chunk == nil || a.pk.chunk != b.pk.chunk {
		t.Fatalf("small packed matrices do not share a chunk: %p %p", a.pk.chunk, b.pk.chunk)
	}
	if &a.pk.mem[len(a.pk.mem)-1] == &b.pk.mem[0] || uintptrOf(b.pk.mem)%64 != 0 {
		t.Fatal("arena allocations overlap or are not 64-byte aligned")
	}
	c := a.pk.chunk
	live := c.live
	big, err := NewMat(BF16, 2048, 2048, make([]byte, 2048*2048*2))
	if err != nil {
		t.Fatal(err)
	}
	bp, err := big.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if bp.pk.chunk != nil {
		t.Fatal("an 8 MiB matrix was put in the shared arena")
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if c.live != live-2 {
		t.Fatalf("chunk live count %d after releasing two, want %d", c.live, live-2)
	}
	if err := bp.Release(); err != nil {
		t.Fatal(err)
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
