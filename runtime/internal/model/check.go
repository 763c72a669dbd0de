package model

import (
	"fmt"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// CheckTensors reports the first tensor a Binder over v would refuse, from the tensor infos
// alone (no data is read): a required tensor missing, dims other than the metadata implies,
// a type the kernels do not run, a 1-D tensor not stored as F32, a declared tensor the
// runtime does not run, or a tensor the declaration does not claim.
func CheckTensors(f *gguf.File, v *schema.Values) error {
	if err := UnsupportedTypes(f); err != nil {
		return err
	}
	claimed := map[string]schema.Instance{}
	for _, in := range v.Instances() {
		claimed[in.Name] = in
		t, ok := f.Tensor(in.Name)
		if !ok {
			if in.Required {
				return fmt.Errorf("missing tensor %s (the %s declaration requires it)", in.Name, v.Schema().Name)
			}
			continue
		}
		if !schema.DimsMatch(t.Dims, in.Dims) {
			return fmt.Errorf("tensor %s has dims %v, the metadata implies %v (%s)", in.Name, t.Dims, in.Dims, in.Decl.Why)
		}
		if in.Decl.NotRun != "" {
			return fmt.Errorf("tensor %s is not run by dspark's runtime: %s", in.Name, in.Decl.NotRun)
		}
		if len(in.Dims) == 1 && t.Type != gguf.TypeF32 {
			return fmt.Errorf("tensor %s has type %v, want F32 (1-D tensors are stored as F32)", t.Name, t.Type)
		}
		if _, ok := kernelType(t.Type); !ok {
			return typeNotRun(t.Name, t.Type)
		}
	}
	for i := range f.Tensors {
		if name := f.Tensors[i].Name; !hasInstance(claimed, name) {
			return fmt.Errorf("tensor %s is not part of the %s schema for this metadata", name, v.Schema().Name)
		}
	}
	if f.BigEndian && len(f.Tensors) > 0 {
		return fmt.Errorf("big-endian GGUF files cannot be run (tensor data is big-endian)")
	}
	return nil
}

// UnsupportedTypes returns one error naming every matrix (a tensor of two or more dims) of f
// whose type the runtime does not run, with its type (IQ1/IQ2/IQ3 codebooks, TQ*, ...), and
// the types it runs; nil when there is none. It reads the tensor infos alone.
func UnsupportedTypes(f *gguf.File) error {
	var bad []string
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if len(t.Dims) < 2 {
			continue
		}
		if _, ok := kernelType(t.Type); !ok {
			bad = append(bad, fmt.Sprintf("%s (%v)", t.Name, t.Type))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	noun := "tensors have types"
	if len(bad) == 1 {
		noun = "tensor has a type"
	}
	return fmt.Errorf("%d %s the runtime does not run: %s; it runs %s", len(bad), noun, strings.Join(bad, ", "), runTypes())
}

// typeNotRun is the error for a tensor whose type the runtime does not run (the binder's and
// CheckTensors' alike), listing the types it runs.
func typeNotRun(name string, t gguf.GGMLType) error {
	return fmt.Errorf("tensor %s has type %v: the runtime runs %s", name, t, runTypes())
}

// runTypes lists the weight types the runtime runs (those kernelType maps), for messages.
func runTypes() string {
	var names []string
	for t := gguf.GGMLType(0); t < 64; t++ {
		if _, ok := kernelType(t); ok {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ", ")
}

func hasInstance(m map[string]schema.Instance, name string) bool { _, ok := m[name]; return ok }
