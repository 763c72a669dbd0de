package kernels

import (
	"sync"

	"github.com/dspark-dev/dspark/internal/mmap"
)

// Packed matrices smaller than arenaShared share 32 MiB anonymous chunks instead of getting a
// mapping each: transparent huge pages only back 2 MiB-aligned ranges, so a 300 KB matrix in
// a mapping of its own sits on 4 KiB pages and pays TLB misses on every pass. A chunk is
// unmapped when every matrix in it is released (and it is no longer the one being filled).
const (
	arenaChunk  = 32 << 20
	arenaShared = 4 << 20
)

type chunk struct {
	mem  []byte
	off  int
	live int
}

var arena struct {
	mu  sync.Mutex
	cur *chunk
}

// allocPacked returns n zeroed bytes for a packed matrix, 64-byte aligned, and the chunk they
// belong to (nil for a mapping of their own).
func allocPacked(n int) ([]byte, *chunk, error) {
	if n > arenaShared {
		b, err := mmap.Anon(n)
		return b, nil, err
	}
	arena.mu.Lock()
	defer arena.mu.Unlock()
	if c := arena.cur; c == nil || c.off+n > len(c.mem) {
		mem, err := mmap.Anon(arenaChunk)
		if err != nil {
			return nil, nil, err
		}
		if c != nil && c.live == 0 {
			mmap.FreeAnon(c.mem)
		}
		arena.cur = &chunk{mem: mem}
	}
	c := arena.cur
	b := c.mem[c.off : c.off+n : c.off+n]
	c.off = min(len(c.mem), (c.off+n+63)&^63)
	c.live++
	return b, c, nil
}

// freePacked releases memory from allocPacked.
func freePacked(b []byte, c *chunk) error {
	if c == nil {
		return mmap.FreeAnon(b)
	}
	arena.mu.Lock()
	c.live--
	free := c.live == 0 && c != arena.cur
	arena.mu.Unlock()
	if free {
		return mmap.FreeAnon(c.mem)
	}
	return nil
}
