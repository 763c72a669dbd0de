package safetensors

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// IndexName is the file name of a sharded checkpoint's index.
const IndexName = "model.safetensors.index.json"

// Index is a sharded checkpoint's model.safetensors.index.json.
type Index struct {
	TotalSize int64             // metadata.total_size: informational (the sum of tensor bytes per its writer), not checked
	WeightMap map[string]string // tensor name -> shard file name (in the checkpoint directory)

	path    string
	entries map[string]int64 // tensor name -> file offset of its weight_map key
}

// MaxIndexLen is the largest index file accepted (real ones are a few MB even for
// trillion-parameter models); a larger file is rejected before it is read.
const MaxIndexLen = 256 << 20

// ReadIndex reads and checks an index file.
func ReadIndex(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if st.Size() > MaxIndexLen {
		return nil, &FormatError{path, -1, "index", fmt.Sprintf("file is %d bytes, over the limit of %d", st.Size(), MaxIndexLen)}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxIndexLen+1))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if len(b) > MaxIndexLen {
		return nil, &FormatError{path, -1, "index", fmt.Sprintf("file is over the limit of %d bytes", MaxIndexLen)}
	}
	return ParseIndex(path, b)
}

// ParseIndex parses index JSON; path is used in errors. It requires a "weight_map" object of
// string values, each a plain file name (no directories), with no duplicate tensor names;
// "metadata", if present, must be an object whose "total_size", if present, is a
// non-negative integer (other metadata keys are allowed and ignored). Other top-level keys
// are errors.
func ParseIndex(path string, b []byte) (*Index, error) {
	j := newJSONReader(path, b, 0)
	if !utf8.Valid(b) {
		return nil, &FormatError{path, -1, "index", "invalid UTF-8"}
	}
	if _, err := j.expect(tBeginObj, plain("index"), "a JSON object"); err != nil {
		return nil, err
	}
	idx := &Index{path: path, entries: map[string]int64{}}
	seen := map[string]bool{}
	for j.more() {
		tok, off, err := j.next(plain("index"))
		if err != nil {
			return nil, err
		}
		key := tok.Str
		if seen[key] {
			return nil, j.errAt(off, plain(key), "duplicate key")
		}
		seen[key] = true
		switch key {
		case "metadata":
			if err := j.indexMetadata(idx); err != nil {
				return nil, err
			}
		case "weight_map":
			if idx.WeightMap, err = j.weightMap(idx.entries); err != nil {
				return nil, err
			}
		default:
			return nil, j.errAt(off, plain(key), "unknown key (want metadata, weight_map)")
		}
	}
	if _, _, err := j.next(plain("index")); err != nil {
		return nil, err
	}
	if err := j.end(plain("index")); err != nil {
		return nil, err
	}
	if idx.WeightMap == nil {
		return nil, &FormatError{path, -1, "weight_map", "missing"}
	}
	return idx, nil
}

func (j *jsonReader) indexMetadata(idx *Index) error {
	if _, err := j.expect(tBeginObj, plain("metadata"), "an object"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for j.more() {
		tok, off, err := j.next(plain("metadata"))
		if err != nil {
			return err
		}
		key := tok.Str
		f := where{kind: "metadata", name: key, named: true}
		if seen[key] {
			return j.errAt(off, f, "duplicate key")
		}
		seen[key] = true
		if key == "total_size" {
			if idx.TotalSize, err = j.nonNegInt(f); err != nil {
				return err
			}
			continue
		}
		if err := j.skipValue(f); err != nil {
			return err
		}
	}
	_, _, err := j.next(plain("metadata"))
	return err
}

// weightMap reads the weight_map object, recording the offset of each key in offs.
func (j *jsonReader) weightMap(offs map[string]int64) (map[string]string, error) {
	if _, err := j.expect(tBeginObj, plain("weight_map"), "an object"); err != nil {
		return nil, err
	}
	wm := map[string]string{}
	for j.more() {
		tok, off, err := j.next(plain("weight_map"))
		if err != nil {
			return nil, err
		}
		name := tok.Str
		f := where{kind: "weight_map", name: name, named: true}
		if _, dup := wm[name]; dup {
			return nil, j.errAt(off, f, "duplicate tensor name")
		}
		offs[name] = j.base + off
		tok, off, err = j.next(f)
		if err != nil {
			return nil, err
		}
		shard := tok.Str
		if tok.Kind != tString {
			return nil, j.errAt(off, f, "must be a shard file name, got %s", describe(tok))
		}
		if shard == "" || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`+"\x00") {
			return nil, j.errAt(off, f, "shard %q must be a plain file name in the checkpoint directory", shard)
		}
		wm[name] = shard
	}
	_, _, err := j.next(plain("weight_map"))
	return wm, err
}

// entryError is a *FormatError located at the weight_map entry of tensor name.
func (idx *Index) entryError(name, format string, args ...any) *FormatError {
	off, ok := idx.entries[name]
	if !ok {
		off = -1
	}
	return &FormatError{Path: idx.path, Offset: off, Field: where{kind: "weight_map", name: name, named: true}.String(), Msg: fmt.Sprintf(format, args...)}
}

// String summarizes the index for messages.
func (idx *Index) String() string {
	shards := map[string]bool{}
	for _, s := range idx.WeightMap {
		shards[s] = true
	}
	return fmt.Sprintf("%d tensors in %d shards, total_size %d", len(idx.WeightMap), len(shards), idx.TotalSize)
}
