package synth

import (
	"fmt"

	"github.com/dspark-dev/dspark/safetensors"
)

// The dtypes synthetic checkpoints hold.
const (
	BF16   = safetensors.BF16
	F32    = safetensors.F32
	F8E4M3 = safetensors.F8_E4M3
	I32    = safetensors.I32
	U8     = safetensors.U8
)

// dtypeBytes returns the width in bytes of one element of the dtypes synth writes.
func dtypeBytes(d safetensors.Dtype) int64 {
	switch d {
	case BF16, F32, I32, F8E4M3, U8:
		b, _ := d.Bits()
		return int64(b / 8)
	}
	panic("synth: unknown dtype " + string(d))
}

// Encoding says how a tensor's values are produced; see Generator for the random source.
type Encoding int

const (
	// Gaussian: value = Mean + Std*z, rounded to the tensor's encoding dtype (BF16 or F32).
	Gaussian Encoding = iota
	// FP8Weight: byte = F32ToF8E4M3(z * FP8Range); the dequantized weight is byte times the
	// block's weight_scale_inv.
	FP8Weight
	// FP8Scale: F32 weight_scale_inv = Std/FP8Range * (0.5 + U), U uniform on [0,1) per block,
	// so neighbouring blocks differ (a dequantizer that ignores the block index fails).
	FP8Scale
	// Copy: the bytes come from another checkpoint (the draft's embed_tokens).
	Copy
	// MXFP4Codes: U8 bytes of two uniformly random E2M1 codes (compressed-tensors
	// weight_packed: the low nibble is the even element).
	MXFP4Codes
	// E8M0Scale: U8 group exponents (compressed-tensors weight_scale, 2^(e-127)) chosen so
	// the dequantized weights have std about Std (uniform codes have rms 2.93, x 1.58 for the
	// exponent mix): 127 + round(log2(Std/4.6)), plus 1 in
	// about half the groups (so a dequantizer that ignores the group index fails).
	E8M0Scale
)

// FP8Range is the multiple of a standard normal stored in FP8 weights: |z| <= 4.17, so
// |z * 96| <= 401 stays below E4M3's maximum 448.
const FP8Range = 96

// Init says how to produce a tensor's values.
type Init struct {
	Encoding Encoding
	// Store is the dtype the values are encoded in: BF16 or F32 for Gaussian, F8_E4M3 for
	// FP8Weight, F32 for FP8Scale. Usually equal to the declared Dtype; the wrong-dtype break
	// declares another one of the same width.
	Store safetensors.Dtype
	Mean  float64
	Std   float64
	// Stream names the generator stream (defaults to the tensor name); the draft's
	// embed_tokens uses its target's "model.embed_tokens.weight" stream.
	Stream string
}

// Tensor is one entry of a synthetic checkpoint: its name, declared dtype, HF shape
// ([out, in] for Linear weights) and how its values are made.
type Tensor struct {
	Name  string
	Dtype safetensors.Dtype
	Shape []int64
	Init  Init
}

// Elements returns the product of the shape.
func (t *Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes returns the tensor's size in bytes in its declared dtype.
func (t *Tensor) Bytes() int64 { return t.Elements() * dtypeBytes(t.Dtype) }

// stream returns the generator stream name.
func (t *Tensor) stream() string {
	if t.Init.Stream != "" {
		return t.Init.Stream
	}
	return t.Name
}

// String returns "name dtype [shape]".
func (t Tensor) String() string { return fmt.Sprintf("%s %s %v", t.Name, t.Dtype, t.Shape) }

// Roster is the ordered list of a checkpoint's tensors.
type Roster []Tensor

// Params returns the total number of elements.
func (r Roster) Params() int64 {
	var n int64
	for i := range r {
		n += r[i].Elements()
	}
	return n
}

// Bytes returns the total data size in bytes (the safetensors index's total_size).
func (r Roster) Bytes() int64 {
	var n int64
	for i := range r {
		n += r[i].Bytes()
	}
	return n
}

// Find returns the index of the tensor called name, or -1.
func (r Roster) Find(name string) int {
	for i := range r {
		if r[i].Name == name {
			return i
		}
	}
	return -1
}

// bf16 returns a BF16 tensor of Gaussian values with the given mean and std.
func bf16(name string, mean, std float64, shape ...int64) Tensor {
	return Tensor{Name: name, Dtype: BF16, Shape: shape, Init: Init{Encoding: Gaussian, Store: BF16, Mean: mean, Std: std}}
}

// f32 returns an F32 tensor of Gaussian values with the given mean and std.
func f32(name string, mean, std float64, shape ...int64) Tensor {
	return Tensor{Name: name, Dtype: F32, Shape: shape, Init: Init{Encoding: Gaussian, Store: F32, Mean: mean, Std: std}}
}
