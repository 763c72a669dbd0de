package qwen3

import "fmt"

// maxCacheElems bounds a KV cache (2^40 values, 4 TiB): far beyond any machine, small
// enough that no size computation near it can overflow.
const maxCacheElems = 1 << 40

// cacheBytes is the size of a cache of layers x capacity positions of width key values and
// width value values, float32.
func cacheBytes(layers, capacity, width int) (int64, error) {
	if layers <= 0 || capacity <= 0 || width <= 0 {
		return 0, fmt.Errorf("KV cache of %d layers x %d positions x %d values: every dimension must be positive", layers, capacity, width)
	}
	if width > maxCacheElems/2/layers || 2*width*layers > maxCacheElems/capacity {
		return 0, fmt.Errorf("KV cache of %d layers x %d positions x 2 x %d values overflows (more than 2^40 values)", layers, capacity, width)
	}
	return int64(2*layers*capacity*width) * 4, nil
}

// kvCache holds, for every layer and position, the normed and rotated keys and the values
// of the key/value heads (width = heads x head size each). Len() positions are committed;
// a forward writes its rows at Len().. of each layer, attends over them, and commits them
// with advance once every layer is done, so a failed forward leaves no trace.
type kvCache struct {
	layers, capacity, width int
	n                       int
	k, v                    []float32 // [layer][position][width]
}

func newCache(layers, capacity, width int) (*kvCache, error) {
	if _, err := cacheBytes(layers, capacity, width); err != nil {
		return nil, err
	}
	return &kvCache{layers: layers, capacity: capacity, width: width,
		k: make([]float32, layers*capacity*width), v: make([]float32, layers*capacity*width)}, nil
}

// rows returns the keys and values of layer from position 0 to end (exclusive).
func (c *kvCache) rows(layer, end int) (k, v []float32) {
	base := layer * c.capacity * c.width
	return c.k[base : base+end*c.width], c.v[base : base+end*c.width]
}

// slot returns the key and value rows of position pos of layer.
func (c *kvCache) slot(layer, pos int) (k, v []float32) {
	o := (layer*c.capacity + pos) * c.width
	return c.k[o : o+c.width], c.v[o : o+c.width]
}

func (c *kvCache) truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("truncate to %d: the cache holds %d positions", n, c.n)
	}
	c.n = n
	return nil
}
