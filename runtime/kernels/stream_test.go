package kernels

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestStreamRead checks StreamRead's sum against a plain word loop on both paths and on
// lengths that leave every kind of tail.
func TestStreamRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 63, 384, 385, 1000, 6 * 64 * 11, 6*64*11 + 13, 100003} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		var want uint64
		for i := 0; i < n; i += 8 {
			var w [8]byte
			copy(w[:], b[i:])
			want += binary.LittleEndian.Uint64(w[:])
		}
		for _, p := range cpuPaths() {
			restore := setPath(p)
			got := StreamRead(b)
			restore()
			if got != want {
				t.Fatalf("n=%d path %v: sum %x, want %x", n, p, got, want)
			}
		}
	}
}
