package convert

import "github.com/dspark-dev/dspark/gguf"

// KVs returns the plan's metadata as GGUF key/value pairs.
func (p *Plan) KVs() []gguf.KV { return p.Meta }

// specs returns the tensor specs (without data callbacks) of the given tensor indices.
func (p *Plan) specs(idx []int) []gguf.TensorSpec {
	out := make([]gguf.TensorSpec, len(idx))
	for i, k := range idx {
		t := &p.Tensors[k]
		out[i] = gguf.TensorSpec{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	return out
}
