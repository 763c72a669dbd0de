//go:build exhaustive

package dtype

// Exhaustive checks over all 2^32 float32 inputs, too slow for every run (~30 s of CPU):
//
//	go test -tags exhaustive -run Exhaustive ./internal/dtype

import (
	"math"
	"sync"
	"testing"

	"github.com/x448/float16"
)

// TestExhaustiveF16 compares F32ToF16 with x448/float16 (itself verified exhaustively by its
// author) on every float32 bit pattern.
func TestExhaustiveF16(t *testing.T) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for w := uint64(0); w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w << 30; i < (w+1)<<30; i++ {
				f := math.Float32frombits(uint32(i))
				if F32ToF16(f) != float16.Fromfloat32(f).Bits() {
					mu.Lock()
					if bad < 10 {
						t.Errorf("%#08x: %#04x vs %#04x", i, F32ToF16(f), float16.Fromfloat32(f).Bits())
					}
					bad++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("mismatches: %d", bad)
}
