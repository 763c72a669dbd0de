package runtime

import "github.com/dspark-dev/dspark/runtime/kernels"

// Precision returns the activation precision the options give the kernels on this machine:
// a bf16 precision (BF16Activations, BF16AMXActivations) only when requested and run on
// hardware kernels here (kernels.Path), Q8Activations whenever requested (a contract of its
// own, not a faster rounding of f32: its portable code gives the same bits), else
// F32Activations.
func (o Options) Precision() kernels.Precision {
	if o.Activations == kernels.Q8Activations {
		return o.Activations
	}
	if o.Activations != kernels.F32Activations && kernels.Path(o.Activations).Accelerated {
		return o.Activations
	}
	return kernels.F32Activations
}

// Numerics says how a loaded model computes, for reports: the kernel path, the activation
// precision used and, when it differs, the one requested and why.
type Numerics struct {
	Kernels     string `json:"kernels"`                         // kernels.Path of the precision used
	Activations string `json:"activations"`                     // "f32", "bf16", "bf16-amx" or "q8"
	Requested   string `json:"activations_requested,omitempty"` // set when it differs from Activations
	Note        string `json:"note,omitempty"`
}

// NumericsFor describes what opt gives on this machine to a model whose matrices include
// BF16 ones (bf16) or not. Q8Activations is reported as requested (the model's binder says in
// its note which matrices it applies to: model.Binder.QuantNote).
func NumericsFor(opt Options, bf16 bool) Numerics {
	p := opt.Precision()
	if p == kernels.Q8Activations {
		path := kernels.Path(p)
		n := Numerics{Kernels: path.Name, Activations: p.String()}
		if !opt.Pack {
			n.Kernels = "portable"
		}
		n.Note = "q8 activations on block-quantized weights (llama.cpp's Q8_0/Q8_1/Q8_K activations and exact integer block dots, summed in a fixed order): less accurate than the f32 reference; F32, F16 and BF16 matrices keep f32 activations"
		if !path.Accelerated {
			n.Note += "; no q8 assembly on this path: portable code (slow)"
		}
		return n
	}
	if !bf16 {
		p = kernels.F32Activations
	}
	n := Numerics{Kernels: kernels.Path(p).Name, Activations: p.String()}
	if !opt.Pack {
		n.Kernels = "portable"
	}
	switch {
	case p == opt.Activations:
	case !bf16:
		n.Requested = opt.Activations.String()
		n.Note = "no BF16 weight matrices: bf16 activations apply to BF16 weights only"
	case opt.Activations == kernels.BF16AMXActivations:
		n.Requested = opt.Activations.String()
		n.Note = "this CPU or OS has no usable AMX-BF16 tiles (see `make test-paths`); f32 activations used"
	default:
		n.Requested = opt.Activations.String()
		n.Note = "this CPU has no fast bf16 kernels (AVX512_BF16 with the reference's results); f32 activations used"
	}
	switch p {
	case kernels.BF16Activations:
		n.Note = "bf16 activations on BF16 weights: less accurate than the f32 reference (llama.cpp's log-probs move by 0.02-0.07 this way); docs/kernels.md says where it is faster"
	case kernels.BF16AMXActivations:
		n.Note = "bf16 activations on BF16 weights, summed the AMX way: less accurate than the f32 reference (as bf16), different bits from bf16; a batch of up to 16 rows costs about one weight read"
	}
	return n
}
