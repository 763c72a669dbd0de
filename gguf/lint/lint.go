// Package lint checks a parsed GGUF file against the declaration of its architecture
// (package gguf/schema): keys present with the exact types llama.cpp reads, required only
// where the tensor shapes cannot tell; every tensor the declaration claims present with the
// dims the metadata implies and no others; the declaration's cross-key rules. On top of the
// declarations it runs the few checks that need code: llama.cpp's strict data layout, valid
// UTF-8, 1-D tensors stored as F32, and the tensor count. It lists every problem it finds
// rather than stopping at the first.
//
// It is for `dspark inspect --check` and `dspark convert --verify`. Lint does not read
// tensor data; ScanData, separately (inspect --check --data), reads every byte of the float
// tensors for NaN and Inf. Files of an architecture without a
// declaration get the general.* and tokenizer.* checks only.
package lint

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// Problem is one inconsistency found by Check.
type Problem = schema.Problem

// Architectures returns the architectures with declarations, sorted.
func Architectures() []string {
	var out []string
	for _, s := range schema.All() {
		if !slices.Contains(out, s.Arch) {
			out = append(out, s.Arch)
		}
	}
	slices.Sort(out)
	return out
}

// Supported reports whether arch has a declaration.
func Supported(arch string) bool { return len(schema.ByArch(arch)) > 0 }

// Rules returns the name of the declaration f is checked against ("generic" when its
// architecture has none).
func Rules(f *gguf.File) string {
	if s := schema.For(schema.FileSource(f)); s != nil {
		return s.Name
	}
	return "generic"
}

// Check returns every problem found in f. An empty result means the file passed.
func Check(f *gguf.File) []Problem { return CheckAs(f, schema.For(schema.FileSource(f))) }

// CheckAs is Check against a given declaration; nil checks the layout and the general.* and
// tokenizer.* keys only (for a file whose schema gguf/schema does not declare, such as
// upstream's DSV4 dflash path, which shares the dflash architecture).
func CheckAs(f *gguf.File, decl *schema.Schema) []Problem {
	c := &checker{f: f}
	c.layout()
	src := schema.FileSource(f)
	s := decl
	if s == nil {
		s = schema.Common
	}
	vals, probs := s.Resolve(src)
	c.probs = append(c.probs, probs...)
	c.probs = append(c.probs, vals.Violations()...)
	if decl != nil {
		if vals.TooManyLayers() {
			return c.probs // reported by block_count's range; nothing sensible to expand
		}
		c.tensors(vals)
		c.normTypes(vals)
	}
	return c.probs
}

type checker struct {
	f     *gguf.File
	probs []Problem
}

func (c *checker) add(subject, format string, args ...any) {
	c.probs = append(c.probs, Problem{Subject: subject, Msg: fmt.Sprintf(format, args...)})
}

// layout reports what the reader tolerated but llama.cpp would not: misaligned or
// overlapping data, invalid UTF-8, unsupported tensor types.
func (c *checker) layout() {
	f := c.f
	for _, err := range f.CheckLayout() {
		var fe *gguf.FormatError
		if errors.As(err, &fe) {
			c.add(fe.Field, "%s (at offset %d)", fe.Msg, fe.Offset)
		} else {
			c.add("", "%v", err)
		}
	}
	for _, bad := range f.InvalidUTF8() {
		c.add(bad.Where, "is not valid UTF-8 (bytes %x)", bad.Bytes)
	}
	for _, u := range f.Unsupported {
		c.add("", "%v", u)
	}
}

// tensors compares the declared tensors with the file's.
func (c *checker) tensors(vals *schema.Values) {
	arch := c.f.Architecture()
	claimed := map[string]bool{}
	reportedAlt := map[string]bool{}
	required := 0
	for _, in := range vals.Instances() {
		claimed[in.Name] = true
		if in.Required {
			required++
		}
		t, ok := c.f.Tensor(in.Name)
		if !ok {
			if in.Required {
				c.add(in.Name, "missing (%s requires it)", arch)
			}
			continue
		}
		if _, both := c.f.Tensor(in.Alt); both && in.Alt != "" && !reportedAlt[in.Alt] {
			reportedAlt[in.Alt] = true
			c.add(in.Alt, "present together with %s (a file has one form or the other, never both)", in.Name)
		}
		if !vals.Suppressed(in.Decl.Name) && !schema.DimsMatch(t.Dims, in.Dims) {
			c.add(in.Name, "has dims %s, the metadata implies %s (%s)", fmtDims(t.Dims), fmtDims(in.Dims), in.Decl.Why)
		}
	}
	extra := 0
	for i := range c.f.Tensors {
		if name := c.f.Tensors[i].Name; !claimed[name] {
			extra++
			c.add(name, "not a %s tensor for this metadata (llama.cpp refuses files with unclaimed tensors: \"wrong number of tensors\")", arch)
		}
	}
	if n := len(c.f.Tensors); n < required || extra > 0 {
		c.add("", "%d tensors, the metadata implies %d required ones (plus optional ones present)", n, required)
	}
}

// normTypes reports 1-D tensors (norms, biases) not stored as F32, llama.cpp's convention. A
// tensor declared as a matrix whose trailing dims are 1 is stored 1-D by ggml's writers
// (llama-quantize's output of a {H, 1} head) and keeps its matrix type: it is not reported.
func (c *checker) normTypes(vals *schema.Values) {
	declared := map[string]int{}
	for _, in := range vals.Instances() {
		declared[in.Name] = len(in.Dims)
	}
	for i := range c.f.Tensors {
		t := &c.f.Tensors[i]
		if rank, ok := declared[t.Name]; ok && rank > 1 {
			continue
		}
		if len(t.Dims) == 1 && t.Type != gguf.TypeF32 {
			c.add(t.Name, "is %s; 1-D tensors (norms, biases) are F32 by llama.cpp's convention", t.Type)
		}
	}
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
