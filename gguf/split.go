package gguf

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
)

// The gguf-split metadata keys.
const (
	KeySplitNo           = "split.no"            // u16, 0-based index of the shard
	KeySplitCount        = "split.count"         // u16, number of shards
	KeySplitTensorsCount = "split.tensors.count" // i32, tensors in the whole set
)

var splitName = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// SplitPath returns the name of shard i (0-based) of n for prefix, gguf-split style:
// "<prefix>-00001-of-00003.gguf".
func SplitPath(prefix string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, n)
}

// SplitSet returns the names of every shard when name (a path or URL) names the first
// shard of a gguf-split set of more than one file ("x-00001-of-00003.gguf").
func SplitSet(name string) ([]string, bool) { return splitPaths(name) }

func splitPaths(path string) ([]string, bool) {
	m := splitName.FindStringSubmatch(filepath.Base(path))
	if m == nil || m[2] != "00001" {
		return nil, false
	}
	n, _ := strconv.Atoi(m[3])
	if n < 2 {
		return nil, false
	}
	prefix := path[:len(path)-len(filepath.Base(path))] + m[1]
	paths := make([]string, n)
	for i := range paths {
		paths[i] = SplitPath(prefix, i, n)
	}
	return paths, true
}

func openSplit(paths []string, opts []Option) (*File, error) {
	var shards []*File
	closeAll := func() {
		for _, s := range shards {
			s.Close()
		}
	}
	for _, p := range paths {
		s, err := openOne(p, opts)
		if err != nil {
			closeAll()
			return nil, err
		}
		shards = append(shards, s)
	}
	f, err := MergeShards(shards)
	if err != nil {
		closeAll()
		return nil, err
	}
	return f, nil
}

// MergeShards combines the parsed shards of a split set (in order) into one File that owns
// them: metadata from the first shard, the tensors of all shards, each with its Shard
// index. The shards must not be closed separately afterwards. It checks the split keys: split.no = 0..n-1, the same split.count = n, and
// split.tensors.count = the total number of tensors, which must have unique names.
func MergeShards(shards []*File) (*File, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("gguf: no shards")
	}
	first := shards[0]
	total := 0
	for _, s := range shards {
		total += len(s.Tensors)
	}
	f := &File{
		Path: first.Path, Version: first.Version, BigEndian: first.BigEndian,
		Alignment: first.Alignment, DataOffset: first.DataOffset,
		KVs: first.KVs, keys: first.keys,
		Tensors: make([]TensorInfo, 0, total), names: make(map[string]int, total),
	}
	for i, s := range shards {
		bad := func(key, format string, args ...any) error {
			v, _ := s.Lookup(key)
			return &FormatError{Path: s.Path, Offset: v.Offset(), Field: key, Msg: fmt.Sprintf(format, args...)}
		}
		no, err := s.Uint16(KeySplitNo)
		if err != nil {
			return nil, bad(KeySplitNo, "shard %d of a split set: %v", i+1, err)
		}
		if int(no) != i {
			return nil, bad(KeySplitNo, "is %d, want %d (shard %d of %d)", no, i, i+1, len(shards))
		}
		cnt, err := s.Uint16(KeySplitCount)
		if err != nil || int(cnt) != len(shards) {
			return nil, bad(KeySplitCount, "is %d (%v), want %d", cnt, err, len(shards))
		}
		tc, err := s.Int32(KeySplitTensorsCount)
		if err != nil || int(tc) != total {
			return nil, bad(KeySplitTensorsCount, "is %d (%v), the set holds %d tensors", tc, err, total)
		}
		if s.BigEndian != first.BigEndian {
			return nil, &FormatError{Path: s.Path, Offset: 4, Field: "version", Msg: "byte order differs from the first shard"}
		}
		for _, t := range s.Tensors {
			if j, dup := f.names[t.Name]; dup {
				return nil, &FormatError{Path: s.Path, Offset: t.InfoOffset, Field: "tensor " + QuoteCut(t.Name, -1),
					Msg: fmt.Sprintf("duplicate tensor name (also in shard %d)", f.Tensors[j].Shard+1)}
			}
			t.Shard = i
			f.names[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
		}
		f.Shards = append(f.Shards, Shard{Path: s.Path, Size: s.Size, DataOffset: s.DataOffset, Tensors: len(s.Tensors)})
		f.sources = append(f.sources, s.sources...)
		f.Unsupported = append(f.Unsupported, s.Unsupported...)
		if f.Size >= 0 && s.Size >= 0 {
			f.Size += s.Size
		} else {
			f.Size = -1
		}
	}
	return f, nil
}
