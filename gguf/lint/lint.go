// Package lint checks a parsed GGUF file for consistency with what its architecture's
// loader (llama.cpp, and dspark's runtime) will demand: keys present with the exact types
// llama.cpp reads, every tensor the architecture claims present with the shape the
// metadata implies and no others, and cross-key relations (vocabulary sizes, token ids,
// layer indices). It lists every problem it finds rather than stopping at the first.
//
// It is for `dspark inspect --check` and `dspark convert --verify`. It does not read
// tensor data (no NaN scans, no numeric checks) and knows only the architectures
// registered here (dflash and deepseek2); other files get the generic checks only.
package lint

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
)

// Problem is one inconsistency found by Check.
type Problem struct {
	Subject string // the key or tensor concerned, or "" for the file as a whole
	Msg     string
}

// String formats the problem as "subject: message".
func (p Problem) String() string {
	if p.Subject == "" {
		return p.Msg
	}
	return p.Subject + ": " + p.Msg
}

// rules are the architecture-specific checks, by general.architecture.
var rules = map[string]func(c *checker){
	"dflash":    checkDFlash,
	"deepseek2": checkDeepseek2,
}

// Architectures returns the architectures with specific rules, sorted.
func Architectures() []string {
	var out []string
	for k := range rules {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Supported reports whether arch has architecture-specific rules.
func Supported(arch string) bool { _, ok := rules[arch]; return ok }

// Check returns every problem found in f: generic ones (architecture key, llama.cpp's
// strict data layout, invalid UTF-8, tokenizer arrays and ids) and, for a known
// architecture, its key and tensor schema. An empty result means the file passed.
func Check(f *gguf.File) []Problem {
	c := &checker{f: f, expected: map[string]expectation{}}
	c.generic()
	arch := f.Architecture()
	if r, ok := rules[arch]; ok {
		r(c)
		c.finishTensors()
	}
	return c.probs
}

type checker struct {
	f        *gguf.File
	probs    []Problem
	expected map[string]expectation
	order    []string
}

func (c *checker) add(subject, format string, args ...any) {
	c.probs = append(c.probs, Problem{Subject: subject, Msg: fmt.Sprintf(format, args...)})
}

// dim is an expected dimension; unknown (metadata missing) dims are negative.
type dim = int64

const unknown dim = -1

type expectation struct {
	dims     []dim
	why      string // how the dims follow from the metadata
	optional bool
}

// expect declares a tensor the architecture claims, with the dims the metadata implies.
func (c *checker) expect(name, why string, dims ...dim) { c.declare(name, why, false, dims) }

// allow declares an optional tensor.
func (c *checker) allow(name, why string, dims ...dim) { c.declare(name, why, true, dims) }

func (c *checker) declare(name, why string, optional bool, dims []dim) {
	if _, dup := c.expected[name]; !dup {
		c.order = append(c.order, name)
	}
	c.expected[name] = expectation{dims: dims, why: why, optional: optional}
}

func fmtDims[T int64 | uint64](d []T) string {
	s := make([]string, len(d))
	for i, x := range d {
		if int64(x) < 0 {
			s[i] = "?"
		} else {
			s[i] = fmt.Sprint(x)
		}
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// finishTensors compares the declared tensor set with the file's.
func (c *checker) finishTensors() {
	arch := c.f.Architecture()
	for _, name := range c.order {
		e := c.expected[name]
		t, ok := c.f.Tensor(name)
		if !ok {
			if !e.optional {
				c.add(name, "missing (%s requires it)", arch)
			}
			continue
		}
		if !matches(t.Dims, e.dims) {
			c.add(name, "has dims %s, the metadata implies %s (%s)", fmtDims(t.Dims), fmtDims(e.dims), e.why)
		}
	}
	var extra []string
	for i := range c.f.Tensors {
		if _, ok := c.expected[c.f.Tensors[i].Name]; !ok {
			extra = append(extra, c.f.Tensors[i].Name)
		}
	}
	for _, name := range extra {
		c.add(name, "not a %s tensor for this metadata (llama.cpp refuses files with unclaimed tensors: \"wrong number of tensors\")", arch)
	}
	required := 0
	for _, e := range c.expected {
		if !e.optional {
			required++
		}
	}
	if n := len(c.f.Tensors); n < required || len(extra) > 0 {
		c.add("", "%d tensors, the metadata implies %d required ones (plus optional ones present)", n, required)
	}
}

func matches(got []uint64, want []dim) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if w >= 0 && uint64(w) != got[i] {
			return false
		}
	}
	return true
}

// key fetches key with the exact type llama.cpp reads. A missing required key or a
// wrong type is a problem; ok is false when the value is unusable.
func (c *checker) key(key string, want gguf.ValueType, elem gguf.ValueType, required bool) (gguf.Value, bool) {
	v, ok := c.f.Lookup(key)
	if !ok {
		if required {
			c.add(key, "missing (required)")
		}
		return v, false
	}
	wantName := want.String()
	if want == gguf.ValueArray {
		wantName = "[]" + elem.String()
	}
	if v.Type() != want || want == gguf.ValueArray && v.ElemType() != elem {
		c.add(key, "has type %s, llama.cpp reads %s", v.TypeName(), wantName)
		return v, false
	}
	return v, true
}

// u32 returns a u32 key as a dim (unknown when absent or mistyped).
// A mistyped integer (reported once) still gives its value, so that one wrong type does
// not cascade into shape problems.
func (c *checker) u32(key string, required bool) dim {
	v, ok := c.key(key, gguf.ValueUint32, 0, required)
	if !ok {
		var x int64 = -1
		switch n := v.Any().(type) {
		case uint8:
			x = int64(n)
		case uint16:
			x = int64(n)
		case uint64:
			x = int64(min(n, math.MaxUint32+1))
		case int8:
			x = int64(n)
		case int16:
			x = int64(n)
		case int32:
			x = int64(n)
		case int64:
			x = n
		}
		if x < 0 || x > math.MaxUint32 {
			return unknown
		}
		return x
	}
	return dim(v.Any().(uint32))
}

// layers returns n when known, else the number of blk.N. blocks the tensors name.
func (c *checker) layers(n dim) int {
	if n >= 0 {
		return int(n)
	}
	max := -1
	for i := range c.f.Tensors {
		var k int
		if _, err := fmt.Sscanf(c.f.Tensors[i].Name, "blk.%d.", &k); err == nil && k > max && k < 1<<16 {
			max = k
		}
	}
	return max + 1
}

func (c *checker) f32(key string, required bool) {
	c.key(key, gguf.ValueFloat32, 0, required)
}

func (c *checker) boolKey(key string, required bool) {
	c.key(key, gguf.ValueBool, 0, required)
}

func (c *checker) str(key string, required bool) (string, bool) {
	v, ok := c.key(key, gguf.ValueString, 0, required)
	if !ok {
		return "", false
	}
	return v.Any().(string), true
}

// hasTensorSuffix reports whether some tensor name ends with suffix.
func (c *checker) hasTensorSuffix(suffix string) bool {
	for i := range c.f.Tensors {
		if strings.HasSuffix(c.f.Tensors[i].Name, suffix) {
			return true
		}
	}
	return false
}

// mul multiplies dims, unknown if any is unknown.
func mul(ds ...dim) dim {
	p := dim(1)
	for _, d := range ds {
		if d < 0 {
			return unknown
		}
		p *= d
	}
	return p
}

func add(ds ...dim) dim {
	s := dim(0)
	for _, d := range ds {
		if d < 0 {
			return unknown
		}
		s += d
	}
	return s
}

func sub(a, b dim) dim {
	if a < 0 || b < 0 || a < b {
		return unknown
	}
	return a - b
}
