package convert

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
)

// Value returns the metadata value with its exact GGUF type (Check must have passed).
func (m Meta) Value() gguf.Value {
	switch m.Kind {
	case KindU32:
		return gguf.U32(uint32(m.Val.(int64)))
	case KindU16:
		return gguf.U16(uint16(m.Val.(int64)))
	case KindI32:
		return gguf.I32(int32(m.Val.(int64)))
	case KindF32:
		return gguf.F32(float32(m.Val.(float64)))
	case KindBool:
		return gguf.Bool(m.Val.(bool))
	case KindStr:
		return gguf.Str(m.Val.(string))
	case KindI32s:
		v := m.Val.([]int64)
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return gguf.I32s(out)
	case KindF32s:
		return gguf.F32s(m.Val.([]float32))
	case KindStrs:
		return gguf.Strs(m.Val.([]string))
	}
	panic(fmt.Sprintf("convert: metadata %s has unknown kind %d", m.Key, m.Kind))
}

// KVs returns the plan's metadata as GGUF key/value pairs.
func (p *Plan) KVs() []gguf.KV {
	out := make([]gguf.KV, len(p.Meta))
	for i, m := range p.Meta {
		out[i] = gguf.KV{Key: m.Key, Value: m.Value()}
	}
	return out
}

// specs returns the tensor specs (without data callbacks) of the given tensor indices.
func (p *Plan) specs(idx []int) []gguf.TensorSpec {
	out := make([]gguf.TensorSpec, len(idx))
	for i, k := range idx {
		t := &p.Tensors[k]
		out[i] = gguf.TensorSpec{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	return out
}
