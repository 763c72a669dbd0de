// Package report turns a parsed GGUF file into what `dspark inspect` shows: a Report with
// a stable JSON schema (documented in docs/inspect-json.md) and its rendering as text
// tables. Every string that came from the file is escaped before it reaches a terminal.
//
// It does not read tensor data and does not judge the file (packages gguf/lint and
// gguf/drafts do; a Report carries gguf/drafts' view of a draft, and the findings and loader
// verdicts only when asked).
package report

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/drafts"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/gguf/memory"
)

// Schema identifies the JSON layout; it changes only when a field changes meaning or is
// removed (adding fields keeps it).
const Schema = "dspark.inspect/v1"

// Options select what a Report contains.
type Options struct {
	FullArrays bool   // every array element (otherwise the first ArrayItems)
	ArrayItems int    // elements shown per array when not FullArrays (default 6)
	Keys       string // glob over metadata keys ("" = all)
	Tensors    string // glob over tensor names ("" = all)
	NoTensors  bool
	Check      bool // run gguf/lint and gguf/drafts' lints and include their findings
	// Data, with Check, also reads every float tensor for NaN and Inf (lint.ScanData): each
	// such tensor is a problem.
	Data   bool
	Source string // how the file was read: "file", "split", "http", "zstd-stream", ...
	// Target is the target a draft is checked against with Check (nil: none).
	Target *gguf.File
	// Loaders are judged after gguf/drafts' own (drafts.Loaders) with Check: the caller's,
	// such as dspark's runtime, which gguf/* does not import.
	Loaders []drafts.Loader
	// TargetLoaders judge a file that is not a draft (a target) with Check: each returns its
	// verdict, or false when it has nothing to say of the file.
	TargetLoaders []func(f *gguf.File) (drafts.Verdict, bool)
	// Memory, when set, adds the memory estimate (gguf/memory) of the file as a target, or,
	// for a recognized draft, of the pair with Target (ErrMemoryNeedsTarget without one).
	Memory *memory.Options
}

// ErrMemoryNeedsTarget is returned by Build for a memory estimate of a draft without its
// target: a draft's memory depends on the target it drafts for.
var ErrMemoryNeedsTarget = errors.New("a draft's memory estimate needs its target")

// Report is everything inspect shows, in JSON-ready form.
type Report struct {
	Schema      string       `json:"schema"`
	Path        string       `json:"path"`
	Source      string       `json:"source"`
	Format      Format       `json:"format"`
	Summary     Summary      `json:"summary"`
	Metadata    []Entry      `json:"metadata"`
	Tensors     *[]Tensor    `json:"tensors,omitempty"`
	InvalidUTF8 []BadString  `json:"invalid_utf8"`
	Unsupported []string     `json:"unsupported"`
	Draft       *drafts.View `json:"draft"`
	Check       *Check       `json:"check,omitempty"`
	Transfer    *Transfer    `json:"transfer,omitempty"`
	// Memory is the memory estimate (with Options.Memory).
	Memory *memory.Estimate `json:"memory,omitempty"`
}

// Format is the container-level header.
type Format struct {
	Version    uint32  `json:"version"`
	Endianness string  `json:"endianness"` // "little" or "big"
	Alignment  uint64  `json:"alignment"`
	DataOffset int64   `json:"data_offset"`
	Size       *int64  `json:"size"` // null when read from a stream
	Shards     []Shard `json:"shards"`
}

// Shard is one file of a split set.
type Shard struct {
	Path       string `json:"path"`
	Size       *int64 `json:"size"`
	DataOffset int64  `json:"data_offset"`
	Tensors    int    `json:"tensors"`
}

// Summary aggregates the tensors.
type Summary struct {
	Architecture  string     `json:"architecture"`
	KVCount       int        `json:"kv_count"`
	TensorCount   int        `json:"tensor_count"`
	Parameters    uint64     `json:"parameters"`
	TensorBytes   uint64     `json:"tensor_bytes"`
	BitsPerWeight float64    `json:"bits_per_weight"`
	ByType        []TypeStat `json:"by_type"`
}

// TypeStat is the share of one ggml type.
type TypeStat struct {
	Type     string `json:"type"`
	Tensors  int    `json:"tensors"`
	Elements uint64 `json:"elements"`
	Bytes    uint64 `json:"bytes"`
}

// Entry is one metadata key/value.
type Entry struct {
	Index     int    `json:"index"`
	Key       string `json:"key"`
	Type      string `json:"type"`                // value type: u8 i8 u16 i16 u32 i32 f32 bool str arr u64 i64 f64
	ElemType  string `json:"elem_type,omitempty"` // arrays only
	Count     int    `json:"count"`               // array length; 1 for scalars
	Value     any    `json:"value"`
	Truncated bool   `json:"truncated,omitempty"` // value holds only the first items
	value     gguf.Value
}

// Tensor is one tensor info.
type Tensor struct {
	Index     int      `json:"index"`
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	TypeID    uint32   `json:"type_id"`
	Dims      []uint64 `json:"dims"` // ggml order, dims[0] innermost
	Elements  uint64   `json:"elements"`
	Bytes     uint64   `json:"bytes"`  // 0 when the type is unsupported
	Offset    uint64   `json:"offset"` // relative to the data section of its shard
	AbsOffset int64    `json:"abs_offset"`
	Shard     int      `json:"shard"`
}

// BadString is a string from the file that is not valid UTF-8 (shown with U+FFFD in
// place of the bad bytes elsewhere; here exactly, in hex).
type BadString struct {
	Where string `json:"where"`
	Hex   string `json:"hex"`
}

// Check is the result of gguf/lint and gguf/drafts' lints, with the loader verdicts.
type Check struct {
	Passed bool `json:"passed"`
	// Rules is the architecture whose declaration ran, the recognized draft schema when
	// gguf/schema does not declare it, or "generic".
	Rules    string    `json:"rules"`
	Problems []Problem `json:"problems"`
	// Warnings do not fail the check: the file loads, but somewhere not as meant.
	Warnings []Problem        `json:"warnings"`
	Loaders  []drafts.Verdict `json:"loaders"`
	// Target is the path of the target the draft was checked against ("" = none).
	Target string `json:"target,omitempty"`
	// Pair is the draft's taps read against the target's blocks: the kind of each tapped
	// layer (recurrent, attention, nextn for hybrids) and whether the main pass serves it.
	Pair *drafts.Pair `json:"pair,omitempty"`
}

// Problem is one lint finding.
type Problem struct {
	Subject string `json:"subject"`
	Message string `json:"message"`
	// File is set when the finding is about another file than the report's (the target).
	File string `json:"file,omitempty"`
	// Offset is the byte offset of the subject's key or tensor info record (absent when the
	// subject is the file as a whole or is missing from it).
	Offset *int64 `json:"offset,omitempty"`
}

// Transfer reports what reading a remote file cost.
type Transfer struct {
	Requests int64 `json:"requests"`
	Bytes    int64 `json:"bytes"`
}

// ValidateGlob reports a malformed glob pattern.
func ValidateGlob(pattern string) error {
	_, err := path.Match(pattern, "")
	return err
}

func match(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(pattern, s)
	return ok
}

// Build makes the report of f.
func Build(f *gguf.File, opt Options) (*Report, error) {
	for _, g := range []string{opt.Keys, opt.Tensors} {
		if err := ValidateGlob(g); err != nil {
			return nil, fmt.Errorf("bad glob %q: %w", g, err)
		}
	}
	if opt.ArrayItems <= 0 {
		opt.ArrayItems = 6
	}
	r := &Report{Schema: Schema, Path: f.Path, Source: opt.Source, InvalidUTF8: []BadString{}, Unsupported: []string{}}
	r.Format = Format{Version: f.Version, Endianness: "little", Alignment: f.Alignment, DataOffset: f.DataOffset, Size: sizePtr(f.Size)}
	if f.BigEndian {
		r.Format.Endianness = "big"
	}
	for _, s := range f.Shards {
		r.Format.Shards = append(r.Format.Shards, Shard{Path: s.Path, Size: sizePtr(s.Size), DataOffset: s.DataOffset, Tensors: s.Tensors})
	}
	r.Summary = summarize(f)
	for i, kv := range f.KVs {
		if !match(opt.Keys, kv.Key) {
			continue
		}
		e, err := entry(i, kv, opt)
		if err != nil {
			return nil, err
		}
		r.Metadata = append(r.Metadata, e)
	}
	if r.Metadata == nil {
		r.Metadata = []Entry{}
	}
	if !opt.NoTensors {
		ts := []Tensor{}
		for i := range f.Tensors {
			t := &f.Tensors[i]
			if !match(opt.Tensors, t.Name) {
				continue
			}
			ts = append(ts, Tensor{Index: i, Name: t.Name, Type: t.Type.String(), TypeID: uint32(t.Type), Dims: slices.Clone(t.Dims),
				Elements: t.Elements(), Bytes: t.Size, Offset: t.Offset, AbsOffset: t.AbsOffset, Shard: t.Shard})
		}
		r.Tensors = &ts
	}
	// Every key, string value and name is checked; array elements only as far as they
	// are shown, unless the whole file is being checked (a vocabulary costs ~10 ms).
	within := opt.ArrayItems
	if opt.FullArrays || opt.Check {
		within = -1
	}
	bads := f.InvalidUTF8Within(within)
	if within < 0 {
		bads = f.InvalidUTF8() // shared with lint
	}
	for _, bad := range bads {
		r.InvalidUTF8 = append(r.InvalidUTF8, BadString{Where: bad.Where, Hex: fmt.Sprintf("%x", bad.Bytes)})
	}
	for _, u := range f.Unsupported {
		r.Unsupported = append(r.Unsupported, u.Error())
	}
	r.Draft = drafts.Recognize(f)
	if opt.Memory != nil {
		var err error
		switch {
		case r.Draft.Recognized && opt.Target == nil:
			return nil, fmt.Errorf("%s: %w", f.Path, ErrMemoryNeedsTarget)
		case r.Draft.Recognized:
			r.Memory, err = memory.Pair(opt.Target, f, *opt.Memory)
		default:
			r.Memory, err = memory.Target(f, *opt.Memory)
		}
		if err != nil {
			return nil, err
		}
	}
	if opt.Check {
		c := &Check{Rules: drafts.Rules(f, r.Draft), Problems: []Problem{}, Warnings: []Problem{}, Loaders: []drafts.Verdict{}}
		if opt.Target != nil {
			c.Target = opt.Target.Path
			c.Pair = drafts.PairOf(r.Draft, opt.Target)
		}
		for _, p := range drafts.Check(f, r.Draft, opt.Target) {
			q := Problem{Subject: p.Subject, Message: p.Msg}
			if p.File != f.Path {
				q.File = p.File
			}
			if p.Offset >= 0 {
				q.Offset = &p.Offset
			}
			if p.Warning {
				c.Warnings = append(c.Warnings, q)
			} else {
				c.Problems = append(c.Problems, q)
			}
		}
		if opt.Data {
			bad, err := lint.ScanData(f)
			if err != nil {
				return nil, err
			}
			for _, b := range bad {
				q := Problem{Subject: b.Tensor, Message: b.Message()}
				if t, ok := f.Tensor(b.Tensor); ok {
					q.Offset = &t.InfoOffset
				}
				c.Problems = append(c.Problems, q)
			}
		}
		if r.Draft.Recognized {
			c.Loaders = drafts.Verdicts(f, r.Draft, opt.Loaders...)
		} else {
			for _, l := range opt.TargetLoaders {
				if v, ok := l(f); ok {
					c.Loaders = append(c.Loaders, v)
				}
			}
		}
		c.Passed = len(c.Problems) == 0
		r.Check = c
	}
	return r, nil
}

func sizePtr(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}

func summarize(f *gguf.File) Summary {
	s := Summary{Architecture: f.Architecture(), KVCount: len(f.KVs), TensorCount: len(f.Tensors)}
	byType := map[gguf.GGMLType]*TypeStat{}
	var order []gguf.GGMLType
	var knownElems uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		n := t.Elements()
		s.Parameters += n
		s.TensorBytes += t.Size
		if t.Supported {
			knownElems += n
		}
		st, ok := byType[t.Type]
		if !ok {
			st = &TypeStat{Type: t.Type.String()}
			byType[t.Type] = st
			order = append(order, t.Type)
		}
		st.Tensors++
		st.Elements += n
		st.Bytes += t.Size
	}
	if knownElems > 0 {
		s.BitsPerWeight = math.Round(float64(s.TensorBytes)*8/float64(knownElems)*1e4) / 1e4
	}
	slices.SortStableFunc(order, func(a, b gguf.GGMLType) int {
		if x, y := byType[a].Bytes, byType[b].Bytes; x != y {
			if x > y {
				return -1
			}
			return 1
		}
		return 0
	})
	s.ByType = []TypeStat{}
	for _, t := range order {
		s.ByType = append(s.ByType, *byType[t])
	}
	return s
}

func entry(i int, kv gguf.KV, opt Options) (Entry, error) {
	v := kv.Value
	e := Entry{Index: i, Key: kv.Key, Type: v.Type().String(), Count: 1, value: v}
	if v.Type() != gguf.ValueArray {
		e.Value = jsonScalar(v)
		return e, nil
	}
	e.ElemType = v.ElemType().String()
	e.Count = v.Len()
	n := v.Len()
	if !opt.FullArrays && n > opt.ArrayItems {
		n, e.Truncated = opt.ArrayItems, true
	}
	x, err := v.Head(n)
	if err != nil {
		return e, fmt.Errorf("key %s: %w", Safe(kv.Key), err)
	}
	e.Value = jsonArray(x, opt)
	return e, nil
}

// jsonScalar maps a scalar to JSON: numbers as numbers (f32 keeps 32-bit shortest
// formatting), non-finite floats as the strings "NaN", "+Inf", "-Inf".
func jsonScalar(v gguf.Value) any {
	x := v.Any()
	switch f := x.(type) {
	case float32:
		return jsonFloat(float64(f), f)
	case float64:
		return jsonFloat(f, f)
	case string:
		return f // encoding/json writes U+FFFD for invalid bytes; listed in invalid_utf8
	}
	return x
}

func jsonFloat(f float64, orig any) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return orig
}

func jsonArray(x any, opt Options) any {
	switch s := x.(type) {
	case []float32:
		out := make([]any, len(s))
		for i, f := range s {
			out[i] = jsonFloat(float64(f), f)
		}
		return out
	case []float64:
		out := make([]any, len(s))
		for i, f := range s {
			out[i] = jsonFloat(f, f)
		}
		return out
	case []uint8: // encoding/json would write base64
		out := make([]uint16, len(s))
		for i, b := range s {
			out[i] = uint16(b)
		}
		return out
	case []gguf.Value:
		out := make([]any, len(s))
		for i, v := range s {
			inner, err := v.Load()
			if err != nil {
				out[i] = nil
				continue
			}
			out[i] = jsonArray(inner, opt)
		}
		return out
	}
	return x
}

// Safe returns s as is when it is valid UTF-8 made of printable characters, else quoted
// with escapes, so names from a file cannot move the cursor or change colors.
func Safe(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
