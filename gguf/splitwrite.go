package gguf

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// WriteSplit writes kvs and tensors as a gguf-split set next to path ("x.gguf" becomes
// "x-00001-of-0000N.gguf", ...): a new shard starts before a tensor that would take a
// shard's padded data past maxBytes or its tensor count past maxTensors (<= 0: no
// limit; a tensor larger than maxBytes gets a shard of its own). The first shard carries
// every key, each shard split.no (u16, 0-based), split.count (u16) and
// split.tensors.count (i32), as llama.cpp's gguf-split writes them. Each shard is written
// atomically; on error the shards already written are removed. It returns the paths.
func WriteSplit(path string, kvs []KV, tensors []TensorSpec, maxBytes int64, maxTensors int, opt WriteOptions) ([]string, error) {
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, "split.") {
			return nil, fmt.Errorf("gguf: write split: key %q is reserved for the split writer", kv.Key)
		}
	}
	align, kvs, err := resolveAlignment(kvs, opt.Alignment)
	if err != nil {
		return nil, err
	}
	if len(tensors) > math.MaxInt32 {
		return nil, fmt.Errorf("gguf: write split: %d tensors exceed split.tensors.count", len(tensors))
	}
	seen := make(map[string]bool, len(tensors))
	for _, t := range tensors {
		if seen[t.Name] {
			return nil, fmt.Errorf("gguf: write split: duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
	}
	// Group tensors into shards.
	var groups [][]TensorSpec
	var cur []TensorSpec
	var curBytes uint64
	for _, t := range tensors {
		size, err := TensorBytes(t.Type, t.Dims)
		if err != nil {
			return nil, fmt.Errorf("gguf: write split: tensor %q: %w", t.Name, err)
		}
		padded := alignUp(size, align)
		full := len(cur) > 0 && (maxTensors > 0 && len(cur) >= maxTensors ||
			maxBytes > 0 && curBytes+padded > uint64(maxBytes))
		if full {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, t)
		curBytes += padded
	}
	if len(cur) > 0 || len(groups) == 0 {
		groups = append(groups, cur)
	}
	if len(groups) > math.MaxUint16 {
		return nil, fmt.Errorf("gguf: write split: %d shards exceed split.count", len(groups))
	}
	prefix := strings.TrimSuffix(path, ".gguf")
	n := len(groups)
	var paths []string
	var layouts []*Layout
	for i, g := range groups {
		var skv []KV
		if i == 0 {
			skv = append(skv, kvs...)
		} else if align != DefaultAlignment {
			skv = append(skv, KV{"general.alignment", U32(uint32(align))})
		}
		skv = append(skv,
			KV{KeySplitNo, U16(uint16(i))},
			KV{KeySplitCount, U16(uint16(n))},
			KV{KeySplitTensorsCount, I32(int32(len(tensors)))})
		l, err := NewLayout(skv, g, align)
		if err != nil {
			return nil, err
		}
		layouts = append(layouts, l)
		paths = append(paths, SplitPath(prefix, i, n))
	}
	for i, l := range layouts {
		if err := writeLayoutFile(paths[i], l, groups[i], opt.Overwrite); err != nil {
			for _, p := range paths[:i] {
				os.Remove(p)
			}
			return nil, err
		}
	}
	return paths, nil
}
