package convert

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
)

// The transforms of the Kimi hybrids (llama.cpp's conversion/kimi_k3.py, kimi_linear.py).
var (
	// ConvReshape keeps a KDA short-convolution weight's elements: HF [d_inner, 1, c]
	// becomes ggml {c, 1, d_inner, 1} (the kernel tap varies fastest in both).
	ConvReshape Transform = convT{}
	// NegExp writes -exp(A_log) of the first n_h entries (K3's A_log is longer than its
	// head count), in F32.
	NegExp Transform = negExpT{}
	// ResScore fuses an attention-residual pair: <x>_res_norm.weight (the rule's source) times
	// <x>_res_proj.weight ([1, n_embd]) element by element, in F32.
	ResScore Transform = resT{}
	// StackMXFP4 stacks compressed-tensors MXFP4 experts (weight_packed with its
	// weight_scale, the rule's source the packed one) as ggml MXFP4, bytes repacked.
	StackMXFP4 Transform = mxfp4T{}
)

type convT struct{ copyT }

func (convT) String() string { return "reshape conv" }
func (convT) formats(shape []int64, _ dims, _ layerPlan) []srcFormat {
	return []srcFormat{{shape: shape, anyFloat: true}}
}
func (convT) dims(shape []int64, _ dims, _ layerPlan) []uint64 {
	return []uint64{uint64(shape[len(shape)-1]), 1, uint64(shape[0]), 1}
}

// floatAt decodes element i of a BF16, F16 or F32 source.
func floatAt(s *srcData, i int64) float32 {
	switch s.t.Dtype {
	case safetensors.BF16:
		return dtype.BF16ToF32(binary.LittleEndian.Uint16(s.data[2*i:]))
	case safetensors.F16:
		return dtype.F16ToF32(binary.LittleEndian.Uint16(s.data[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(s.data[4*i:]))
}

type negExpT struct{}

func (negExpT) String() string { return "-exp(A_log[:n_head])" }
func (negExpT) sources(src string, layer int64, _ layerPlan) []string {
	return []string{subst(src, layer, 0)}
}

// dims: kimi-k3 {n_h}; kimi-linear keeps its padded HF shape [1, 1, n_h, 1] reversed.
func (negExpT) dims(shape []int64, d dims, _ layerPlan) []uint64 {
	if len(shape) == 1 {
		return []uint64{uint64(d["heads"])}
	}
	return reverse(shape)
}
func (negExpT) formats(shape []int64, _ dims, _ layerPlan) []srcFormat {
	return []srcFormat{{shape: shape, anyFloat: true}} // F32 in the released checkpoints
}
func (negExpT) perExpert() bool                             { return false }
func (negExpT) outDtype() safetensors.Dtype                 { return safetensors.F32 }
func (negExpT) view(*producer, int64, int64) ([]byte, bool) { return nil, false }
func (negExpT) releaseChunk(*producer, int64, int64)        {}
func (negExpT) read(p *producer, dst []byte, start, n int64) {
	for k := int64(0); k < n; k++ {
		v := float32(-math.Exp(float64(floatAt(p.srcs[0], start+k))))
		binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(v))
	}
}

type resT struct{}

func (resT) String() string { return "res_norm x res_proj" }
func (resT) sources(src string, layer int64, _ layerPlan) []string {
	n := subst(src, layer, 0)
	return []string{n, strings.TrimSuffix(n, "_norm.weight") + "_proj.weight"}
}
func (resT) formats(shape []int64, _ dims, _ layerPlan) []srcFormat {
	return []srcFormat{{shape: shape}, {shape: []int64{1, shape[0]}}}
}
func (resT) dims(shape []int64, _ dims, _ layerPlan) []uint64 { return reverse(shape) }
func (resT) perExpert() bool                                  { return false }
func (resT) outDtype() safetensors.Dtype                      { return safetensors.F32 }
func (resT) view(*producer, int64, int64) ([]byte, bool)      { return nil, false }
func (resT) releaseChunk(*producer, int64, int64)             {}
func (resT) read(p *producer, dst []byte, start, n int64) {
	for k := int64(0); k < n; k++ {
		v := floatAt(p.srcs[0], start+k) * floatAt(p.srcs[1], start+k)
		binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(v))
	}
}

type mxfp4T struct{}

func (mxfp4T) String() string { return "stack experts, MXFP4 repacked" }

// sources are each expert's weight_packed then its weight_scale.
func (mxfp4T) sources(src string, layer int64, lp layerPlan) []string {
	out := make([]string, 0, 2*lp.experts)
	for x := int64(0); x < lp.experts; x++ {
		p := subst(src, layer, x)
		out = append(out, p, strings.TrimSuffix(p, "_packed")+"_scale")
	}
	return out
}

// formats: the rule's shape is one expert's logical [rows, cols]; the packed codes are
// [rows, cols/2] bytes, the exponents [rows, cols/32].
func (mxfp4T) formats(shape []int64, _ dims, lp layerPlan) []srcFormat {
	out := make([]srcFormat, 0, 2*lp.experts)
	for range lp.experts {
		out = append(out, srcFormat{shape: []int64{shape[0], shape[1] / 2}, dtype: safetensors.U8},
			srcFormat{shape: []int64{shape[0], shape[1] / mxfp4Group}, dtype: safetensors.U8})
	}
	return out
}
func (mxfp4T) dims(shape []int64, _ dims, lp layerPlan) []uint64 {
	return append(reverse(shape), uint64(lp.experts))
}
func (mxfp4T) perExpert() bool                             { return true }
func (mxfp4T) outType() gguf.GGMLType                      { return gguf.TypeMXFP4 }
func (mxfp4T) view(*producer, int64, int64) ([]byte, bool) { return nil, false }
func (mxfp4T) read(*producer, []byte, int64, int64) {
	panic("convert: MXFP4 experts are encoded, not read")
}
func (mxfp4T) releaseChunk(p *producer, start, n int64) {}

// encode repacks the groups of output elements [start, start+n) (multiples of 32: rows
// are whole groups), expert by expert.
func (mxfp4T) encode(p *producer, dst []byte, start, n int64) {
	per := int64(len(p.srcs[1].data)) // groups per expert
	g, end := start/mxfp4Group, (start+n)/mxfp4Group
	for g < end {
		e, off := g/per, g%per
		k := min(end-g, per-off)
		packed, scale := p.srcs[2*e].data, p.srcs[2*e+1].data
		// One run of k whole groups: repacked as one row of k*32 columns.
		if err := repackMXFP4(dst[:k*mxfp4Block], packed[off*mxfp4Group/2:(off+k)*mxfp4Group/2], scale[off:off+k], 1, k*mxfp4Group, p.srcs[2*e].t.Name); err != nil {
			panic("convert: " + err.Error()) // sizes were checked when planning
		}
		dst, g = dst[k*mxfp4Block:], g+k
	}
}
