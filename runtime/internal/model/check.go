package model

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// CheckTensors reports the first tensor a Binder over v would refuse, from the tensor infos
// alone (no data is read): a required tensor missing, dims other than the metadata implies,
// a type the kernels do not run, a 1-D tensor not stored as F32, a declared tensor the
// runtime does not run, or a tensor the declaration does not claim.
func CheckTensors(f *gguf.File, v *schema.Values) error {
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
		if !dimsMatch(t.Dims, in.Dims) {
			return fmt.Errorf("tensor %s has dims %v, the metadata implies %v (%s)", in.Name, t.Dims, in.Dims, in.Decl.Why)
		}
		if in.Decl.NotRun != "" {
			return fmt.Errorf("tensor %s is not run by dspark's runtime: %s", in.Name, in.Decl.NotRun)
		}
		if len(t.Dims) == 1 && t.Type != gguf.TypeF32 {
			return fmt.Errorf("tensor %s has type %v, want F32 (1-D tensors are stored as F32)", t.Name, t.Type)
		}
		if _, ok := kernelType(t.Type); !ok {
			return fmt.Errorf("tensor %s has type %v: the kernels run F32, F16, BF16 and Q8_0 weights", t.Name, t.Type)
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

func hasInstance(m map[string]schema.Instance, name string) bool { _, ok := m[name]; return ok }

func dimsMatch(got []uint64, want []int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if w < 0 || uint64(w) != got[i] {
			return false
		}
	}
	return true
}
