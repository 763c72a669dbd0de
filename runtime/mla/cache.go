package mla

import (
	"errors"
	"fmt"
)

// ErrCacheFull is returned (wrapped) when rows would be written past a LatentCache's capacity.
var ErrCacheFull = errors.New("mla: latent cache full")

// LatentCache holds, for every layer and every token, one row of KVLora()+Rope() float32
// values: the normed latent followed by the rotated shared key k_pe ([latent | k_pe]).
//
// Length is shared by all layers. Len() rows are committed. Forward and InjectKV write their
// n new rows at indices Len()..Len()+n-1 of one layer and attend over them without changing
// Len(); once every layer has been written the caller commits the rows with Advance(n). Rows
// that are never committed (a draft block, a batch that failed) are simply overwritten by the
// next call. Truncate drops committed rows (rejected drafts).
//
// A LatentCache is not safe for concurrent mutation; distinct layers may be written
// concurrently as long as nobody calls Advance or Truncate meanwhile.
type LatentCache struct {
	layers, capacity, kvLora, rope, width int
	n                                     int
	data                                  []float32
}

// maxCacheElems bounds a LatentCache (1 Ti values, 4 TiB): far beyond any machine, small
// enough that no size computation near it can overflow.
const maxCacheElems = 1 << 40

// LatentCacheBytes returns the bytes a LatentCache of layers x capacity rows of kvLora+rope
// float32 values occupies, or an error if a dimension is not positive (rope may be 0) or the
// size exceeds 2^40 values (an overflow, never a real cache).
func LatentCacheBytes(layers, capacity, kvLora, rope int) (int64, error) {
	if layers <= 0 || capacity <= 0 || kvLora <= 0 || rope < 0 {
		return 0, fmt.Errorf("mla: latent cache of %d layers x %d rows x (%d + %d) values: every dimension must be positive (rope >= 0)",
			layers, capacity, kvLora, rope)
	}
	width := kvLora + rope
	if kvLora > maxCacheElems || rope > maxCacheElems || width > maxCacheElems/layers || width*layers > maxCacheElems/capacity {
		return 0, fmt.Errorf("mla: latent cache of %d layers x %d rows x %d values overflows (more than 2^40 values)", layers, capacity, width)
	}
	return int64(layers*capacity*width) * 4, nil
}

// AllocLatentCache allocates a zeroed cache for layers x capacity rows of kvLora+rope values,
// or returns LatentCacheBytes' error. It does not check that the memory exists: a caller taking
// capacity from user input bounds LatentCacheBytes first.
func AllocLatentCache(layers, capacity, kvLora, rope int) (*LatentCache, error) {
	if _, err := LatentCacheBytes(layers, capacity, kvLora, rope); err != nil {
		return nil, err
	}
	return &LatentCache{
		layers: layers, capacity: capacity, kvLora: kvLora, rope: rope, width: kvLora + rope,
		data: make([]float32, layers*capacity*(kvLora+rope)),
	}, nil
}

// NewLatentCache is AllocLatentCache for dimensions that come from validated model
// hyperparameters: it panics where AllocLatentCache returns an error.
func NewLatentCache(layers, capacity, kvLora, rope int) *LatentCache {
	c, err := AllocLatentCache(layers, capacity, kvLora, rope)
	if err != nil {
		panic(err)
	}
	return c
}

// Len returns the number of committed rows (per layer).
func (c *LatentCache) Len() int { return c.n }

// Cap returns the maximum number of rows per layer.
func (c *LatentCache) Cap() int { return c.capacity }

// Layers returns the number of layers.
func (c *LatentCache) Layers() int { return c.layers }

// KVLora returns the latent width of a row.
func (c *LatentCache) KVLora() int { return c.kvLora }

// Rope returns the k_pe width of a row.
func (c *LatentCache) Rope() int { return c.rope }

// Width returns the row width KVLora()+Rope().
func (c *LatentCache) Width() int { return c.width }

// Truncate drops committed rows so that Len() == n (0 <= n <= Len()).
func (c *LatentCache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("mla: truncate latent cache to %d rows: length is %d", n, c.n)
	}
	c.n = n
	return nil
}

// Advance commits n rows already written at Len()..Len()+n-1 in every layer.
func (c *LatentCache) Advance(n int) error {
	if n < 0 {
		return fmt.Errorf("mla: advance latent cache by %d rows", n)
	}
	if n > c.capacity-c.n {
		return fmt.Errorf("%w: advance by %d rows from %d exceeds capacity %d", ErrCacheFull, n, c.n, c.capacity)
	}
	c.n += n
	return nil
}

// Reset empties the cache (Len() == 0).
func (c *LatentCache) Reset() { c.n = 0 }

// Row returns row t (0 <= t < Cap()) of layer as a slice of Width() values aliasing the cache.
// Rows at or beyond Len() hold uncommitted or stale data. It panics on an index out of range.
func (c *LatentCache) Row(layer, t int) []float32 {
	if layer < 0 || layer >= c.layers || t < 0 || t >= c.capacity {
		panic("mla: LatentCache.Row index out of range")
	}
	off := (layer*c.capacity + t) * c.width
	return c.data[off : off+c.width : off+c.width]
}

// rows returns rows [from, to) of layer as one contiguous slice.
func (c *LatentCache) rows(layer, from, to int) []float32 {
	off := layer * c.capacity * c.width
	return c.data[off+from*c.width : off+to*c.width]
}

// reserve checks that n new rows fit after Len() in layer.
func (c *LatentCache) reserve(layer, n int) error {
	if layer < 0 || layer >= c.layers {
		return fmt.Errorf("mla: layer %d out of range for a latent cache of %d layers", layer, c.layers)
	}
	if n > c.capacity-c.n {
		return fmt.Errorf("%w: %d new rows after %d exceed capacity %d", ErrCacheFull, n, c.n, c.capacity)
	}
	return nil
}
