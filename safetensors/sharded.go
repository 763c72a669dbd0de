package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dspark-dev/dspark/internal/atomicfile"
)

// WriteSharded writes the tensors as a checkpoint in dir, in the given order, starting a new
// shard whenever the next tensor would take the current shard's data past maxShardBytes (a
// tensor larger than the limit gets a shard of its own). Several shards are named
// model-00001-of-0000N.safetensors and come with a model.safetensors.index.json; a single
// shard is written as model.safetensors with no index. Each shard carries metadata. It
// returns the paths written, the index last. Unless overwrite is set, no file is written if
// any of them exists (or, for a single file, if an index exists); with overwrite, a stale
// index beside a single model.safetensors is removed so that it cannot shadow the new file.
func WriteSharded(dir string, metadata map[string]string, tensors []TensorSource, maxShardBytes int64, overwrite bool) ([]string, error) {
	if maxShardBytes <= 0 {
		return nil, fmt.Errorf("safetensors: %s: shard size limit must be positive, got %d", dir, maxShardBytes)
	}
	// Plan: shard boundaries by size.
	var groups [][]TensorSource
	var cur, total int64
	seen := make(map[string]bool, len(tensors))
	for i := range tensors {
		n, err := tensors[i].size()
		if err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", dir, err)
		}
		if seen[tensors[i].Name] {
			return nil, fmt.Errorf("safetensors: %s: duplicate tensor name %q", dir, tensors[i].Name)
		}
		seen[tensors[i].Name] = true
		if total > 1<<63-1-n {
			return nil, fmt.Errorf("safetensors: %s: total data size overflows", dir)
		}
		if len(groups) == 0 || (len(groups[len(groups)-1]) > 0 && cur+n > maxShardBytes) {
			groups = append(groups, nil)
			cur = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], tensors[i])
		cur += n
		total += n
	}
	if len(groups) == 0 {
		groups = [][]TensorSource{nil}
	}
	indexPath := filepath.Join(dir, IndexName)

	if len(groups) == 1 {
		p := filepath.Join(dir, SingleName)
		if !overwrite {
			if _, err := os.Lstat(indexPath); err == nil {
				return nil, fmt.Errorf("safetensors: %s: %w", indexPath, atomicfile.ErrExists)
			}
		}
		if err := WriteFile(p, metadata, groups[0], overwrite); err != nil {
			return nil, err
		}
		if err := os.Remove(indexPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("safetensors: remove stale index: %w", err)
		}
		return []string{p}, nil
	}

	paths := make([]string, len(groups))
	for i := range groups {
		paths[i] = filepath.Join(dir, shardName(i+1, len(groups)))
	}
	if !overwrite {
		for _, p := range append(paths, indexPath) {
			if _, err := os.Lstat(p); err == nil {
				return nil, fmt.Errorf("safetensors: %s: %w", p, atomicfile.ErrExists)
			}
		}
	}
	idx := indexJSON{WeightMap: map[string]string{}}
	idx.Metadata.TotalSize = total
	for i, g := range groups {
		if err := WriteFile(paths[i], metadata, g, overwrite); err != nil {
			return nil, err
		}
		for _, t := range g {
			idx.WeightMap[t.Name] = filepath.Base(paths[i])
		}
	}
	b, err := json.MarshalIndent(idx, "", "  ") // map keys come out sorted
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	af, err := atomicfile.Create(indexPath, overwrite)
	if err != nil {
		return nil, err
	}
	defer af.Abort()
	if _, err := af.Write(b); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", indexPath, atomicfile.Explain(err))
	}
	if err := af.Commit(); err != nil {
		return nil, err
	}
	return append(paths, indexPath), nil
}

// indexJSON is the layout of model.safetensors.index.json as Hugging Face writes it.
type indexJSON struct {
	Metadata struct {
		TotalSize int64 `json:"total_size"`
	} `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}
