package safetensors

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SingleName is the file name of an unsharded checkpoint.
const SingleName = "model.safetensors"

// Checkpoint is a checkpoint directory: one model.safetensors, or the shards listed by a
// model.safetensors.index.json. Every tensor name is unique across the checkpoint.
type Checkpoint struct {
	Dir   string
	Files []*File // sorted by path
	Index *Index  // nil for a single file

	where map[string]location
}

type location struct{ file, tensor int }

// OpenCheckpoint opens the checkpoint in dir. If dir names a .safetensors file instead, that
// file alone is the checkpoint (Dir is then its directory). With an index file, the index is checked
// against the shards and every difference is reported at once in a *CheckpointError: a
// shard that is missing or malformed, a mapped tensor absent from its shard, a tensor in a
// shard that the index does not map there, a tensor present in two shards.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	if st, err := os.Stat(dir); err == nil && st.Mode().IsRegular() && strings.HasSuffix(dir, ".safetensors") {
		f, err := Open(dir)
		if err != nil {
			return nil, err
		}
		c := &Checkpoint{Dir: filepath.Dir(dir), Files: []*File{f}}
		c.indexTensors()
		return c, nil
	}
	indexPath := filepath.Join(dir, IndexName)
	if _, err := os.Stat(indexPath); errors.Is(err, fs.ErrNotExist) {
		single := filepath.Join(dir, SingleName)
		f, err := Open(single)
		if errors.Is(err, fs.ErrNotExist) {
			msg := fmt.Sprintf("%s: no %s or %s", dir, SingleName, IndexName)
			if others, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(others) > 0 {
				for i := range others {
					others[i] = filepath.Base(others[i])
				}
				msg += fmt.Sprintf(" (found %s; a sharded checkpoint needs its index)", strings.Join(others, ", "))
			}
			return nil, errors.New("safetensors: " + msg)
		}
		if err != nil {
			return nil, err
		}
		c := &Checkpoint{Dir: dir, Files: []*File{f}}
		c.indexTensors()
		return c, nil
	}
	idx, err := ReadIndex(indexPath)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Dir: dir, Index: idx}
	var problems []error

	// Open every referenced shard, in name order.
	byShard := map[string][]string{}
	for name, shard := range idx.WeightMap {
		byShard[shard] = append(byShard[shard], name)
	}
	shards := make([]string, 0, len(byShard))
	for s := range byShard {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	opened := map[string]*File{}
	for _, s := range shards {
		p := filepath.Join(dir, s)
		f, err := Open(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				names := byShard[s]
				slices.Sort(names)
				err = idx.entryError(names[0], "the index maps %d tensor(s), this one first, to %s, but that shard is missing", len(names), s)
			}
			problems = append(problems, err)
			continue
		}
		opened[s] = f
		c.Files = append(c.Files, f)
	}

	// Mapped tensors must be in their shard.
	mapped := make([]string, 0, len(idx.WeightMap))
	for name := range idx.WeightMap {
		mapped = append(mapped, name)
	}
	slices.Sort(mapped)
	for _, name := range mapped {
		shard := idx.WeightMap[name]
		if f := opened[shard]; f != nil {
			if _, ok := f.Tensor(name); !ok {
				problems = append(problems, idx.entryError(name, "maps the tensor to %s, which does not contain it", shard))
			}
		}
	}
	// Tensors in shards must be mapped to that shard, and appear only once.
	firstSeen := map[string]string{}
	for _, s := range shards {
		f := opened[s]
		if f == nil {
			continue
		}
		for i, t := range f.Tensors {
			bad := func(format string, args ...any) error {
				return &FormatError{Path: f.Path, Offset: f.hdrOff[i], Field: tensorField(t.Name, "").String(), Msg: fmt.Sprintf(format, args...)}
			}
			if prev, dup := firstSeen[t.Name]; dup {
				problems = append(problems, bad("is also in %s", prev))
			} else {
				firstSeen[t.Name] = s
			}
			switch want, ok := idx.WeightMap[t.Name]; {
			case !ok:
				problems = append(problems, bad("is not in the index"))
			case want != s:
				problems = append(problems, bad("is mapped by the index to %s", want))
			}
		}
	}
	if len(problems) > 0 {
		c.Close()
		return nil, &CheckpointError{Dir: dir, Problems: problems}
	}
	c.indexTensors()
	return c, nil
}

func (c *Checkpoint) indexTensors() {
	c.where = map[string]location{}
	for i, f := range c.Files {
		for j, t := range f.Tensors {
			c.where[t.Name] = location{i, j}
		}
	}
}

// Names returns every tensor name of the checkpoint, sorted.
func (c *Checkpoint) Names() []string {
	names := make([]string, 0, len(c.where))
	for n := range c.where {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Tensor returns the named tensor (its File field names the shard that holds it).
func (c *Checkpoint) Tensor(name string) (*TensorInfo, bool) {
	l, ok := c.where[name]
	if !ok {
		return nil, false
	}
	return &c.Files[l.file].Tensors[l.tensor], true
}

// FileOf returns the file (shard) that holds t, or nil if t is not a tensor of c.
func (c *Checkpoint) FileOf(t *TensorInfo) *File {
	l, ok := c.where[t.Name]
	if !ok || c.Files[l.file].Path != t.File {
		return nil
	}
	return c.Files[l.file]
}

func (c *Checkpoint) fileOf(t *TensorInfo) (*File, error) {
	if f := c.FileOf(t); f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("safetensors: %s: tensor %q (in %s) is not a tensor of this checkpoint", c.Dir, t.Name, t.File)
}

// TensorData returns t's bytes from the shard that holds it, as File.TensorData does.
func (c *Checkpoint) TensorData(t *TensorInfo) ([]byte, error) {
	f, err := c.fileOf(t)
	if err != nil {
		return nil, err
	}
	return f.TensorData(t)
}

// TensorReader returns a reader of t's bytes in the shard that holds it, as
// File.TensorReader does.
func (c *Checkpoint) TensorReader(t *TensorInfo) (*io.SectionReader, error) {
	f, err := c.fileOf(t)
	if err != nil {
		return nil, err
	}
	return f.TensorReader(t)
}

// Close closes every file of the checkpoint.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.Files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// shardName is the Hugging Face shard file name for shard i (1-based) of n.
func shardName(i, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n)
}
