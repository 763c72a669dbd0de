package gguf

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
	return ReadSplit(paths, func(_ int, path string) (*File, error) { return openOne(path, opts) })
}

// ReadSplit reads the shards of a split set, calling open once per shard path in order
// (paths as SplitSet returns them), and merges them with MergeShards. An error opening a
// shard names the set and the shard's number: "gguf: split set x-00001-of-00003.gguf: shard
// 2 of 3: open x-00002-of-00003.gguf: no such file or directory" (errors.Is still sees the
// cause); a malformed shard's *FormatError names that shard's file. On error every shard
// already opened is closed.
func ReadSplit(paths []string, open func(i int, path string) (*File, error)) (*File, error) {
	var shards []*File
	closeAll := func() {
		for _, s := range shards {
			s.Close()
		}
	}
	for i, p := range paths {
		s, err := open(i, p)
		if err != nil {
			closeAll()
			var fe *FormatError
			var ue *UnsupportedError
			if errors.As(err, &fe) || errors.As(err, &ue) {
				return nil, err // located in the shard's own file already
			}
			return nil, &SplitError{Set: paths[0], Shard: i, Count: len(paths), Err: err}
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

// SplitError reports a shard of a split set that could not be opened (missing, unreadable,
// or an HTTP error for a remote set).
type SplitError struct {
	Set   string // the first shard's path or URL, which names the set
	Shard int    // 0-based index of the shard that failed
	Count int    // number of shards in the set
	Err   error  // the cause, e.g. an *fs.PathError wrapping fs.ErrNotExist
}

// Error names the set, the shard and the cause.
func (e *SplitError) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), "gguf: ")
	return fmt.Sprintf("gguf: split set %s: shard %d of %d: %s", e.Set, e.Shard+1, e.Count, msg)
}

// Unwrap returns the cause.
func (e *SplitError) Unwrap() error { return e.Err }

// MergeShards combines the parsed shards of a split set (in order) into one File that owns
// them: metadata from the first shard, the tensors of all shards, each with its Shard
// index. The shards must not be closed separately afterwards. It checks the split keys:
// split.no = 0..n-1, the same split.count = n, and split.tensors.count = the total number
// of tensors, which must have unique names. Errors are *FormatError values located at the
// offending key's record in its shard.
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
		KVs: first.KVs, keys: first.keys, kvOffsets: first.kvOffsets,
		Tensors: make([]TensorInfo, 0, total), names: make(map[string]int, total),
	}
	// Numbering first, so that a shard of another set is blamed, not the count it spoils.
	for i, s := range shards {
		if err := checkSplitNumbering(s, i, len(shards), first.Path); err != nil {
			return nil, err
		}
	}
	for i, s := range shards {
		if err := checkSplitTotal(s, i, len(shards), total, first.Path); err != nil {
			return nil, err
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

// splitKey checks an integer split.* key of shard i (0-based) of n of the set named by set.
type splitKey struct {
	s        *File
	i, n     int
	set, key string
}

func (k splitKey) where() string {
	if k.i == 0 {
		return fmt.Sprintf("the first shard of a %d-file split set", k.n)
	}
	return fmt.Sprintf("shard %d of the %d-file split set %s", k.i+1, k.n, k.set)
}

// bad locates a problem at the key's record, or at the start of the metadata when the key
// is missing.
func (k splitKey) bad(format string, args ...any) error {
	e := &FormatError{Path: k.s.Path, Offset: 24, Field: k.key, Msg: fmt.Sprintf(format, args...)}
	if k.s.Version == 1 {
		e.Offset = 16
	}
	if off, ok := k.s.KeyOffset(k.key); ok {
		e.Offset, e.Field = off, fmt.Sprintf("kv[%d] %s", k.s.keys[k.key], QuoteCut(k.key, 64))
	}
	return e
}

// check compares the key's value with want; explain says why want is wanted.
func (k splitKey) check(got int64, err error, want int64, explain string) error {
	var te *TypeError
	switch {
	case errors.Is(err, ErrNoKey):
		return k.bad("missing: every shard of a split set needs it (this is %s)", k.where())
	case errors.As(err, &te):
		return k.bad("has type %s, want %s", te.Got, te.Want)
	case err != nil:
		return k.bad("%v", err)
	case got != want:
		return k.bad("is %d, but %s", got, explain)
	}
	return nil
}

// checkSplitNumbering checks split.no and split.count of shard i of n.
func checkSplitNumbering(s *File, i, n int, set string) error {
	k := splitKey{s: s, i: i, n: n, set: set, key: KeySplitNo}
	no, err := s.Uint16(KeySplitNo)
	if err := k.check(int64(no), err, int64(i), fmt.Sprintf("this is %s, so it must be %d", k.where(), i)); err != nil {
		return err
	}
	k.key = KeySplitCount
	cnt, err := s.Uint16(KeySplitCount)
	return k.check(int64(cnt), err, int64(n), fmt.Sprintf("the set named by %s has %d files", set, n))
}

// checkSplitTotal checks split.tensors.count of shard i of n against the set's total.
func checkSplitTotal(s *File, i, n, total int, set string) error {
	k := splitKey{s: s, i: i, n: n, set: set, key: KeySplitTensorsCount}
	tc, err := s.Int32(KeySplitTensorsCount)
	return k.check(int64(tc), err, int64(total), fmt.Sprintf("the %d shards hold %d tensors", n, total))
}
