package convert

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
)

// RoundTrip is the error of one tensor whose stored values can differ from its source's
// (Q8_0, or F16/BF16 from another type): Write decodes the bytes it stores back to float and
// compares them, element by element, with the source values it encoded (the checkpoint's
// values, FP8 weights dequantized).
type RoundTrip struct {
	Tensor    string            // GGUF tensor name
	Type      gguf.GGMLType     // stored type
	Source    safetensors.Dtype // the checkpoint's dtype
	Elements  int64
	RMSE      float64 // sqrt(mean((stored - source)^2)); +Inf if a finite value overflowed
	MaxAbs    float64 // max |stored - source|
	SourceRMS float64 // sqrt(mean(source^2)), the scale RMSE is measured against
}

// Relative returns RMSE / SourceRMS (0 for an all-zero source stored exactly).
func (r RoundTrip) Relative() float64 {
	if r.SourceRMS == 0 {
		if r.RMSE == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return r.RMSE / r.SourceRMS
}

// MarshalJSON writes the fields of docs/convert.md ("round_trip" entries); infinities and
// NaN are the strings "+Inf", "-Inf", "NaN", as in inspect's JSON.
func (r RoundTrip) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Tensor    string    `json:"tensor"`
		Type      string    `json:"type"`
		Source    string    `json:"source_dtype"`
		Elements  int64     `json:"elements"`
		RMSE      jsonFloat `json:"rmse"`
		MaxAbs    jsonFloat `json:"max_abs_error"`
		SourceRMS jsonFloat `json:"source_rms"`
		Relative  jsonFloat `json:"relative_rmse"`
	}{r.Tensor, r.Type.String(), string(r.Source), r.Elements, jsonFloat(r.RMSE), jsonFloat(r.MaxAbs), jsonFloat(r.SourceRMS), jsonFloat(r.Relative())})
}

// jsonFloat is a float64 that JSON-encodes non-finite values as strings.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	switch {
	case math.IsNaN(x):
		return []byte(`"NaN"`), nil
	case math.IsInf(x, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(x, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
}

// lossy reports whether storing elements of dtype d as t can change their values: every
// conversion except to the same encoding and to F32 (which holds BF16, F16 and the float32
// of a dequantized FP8 weight exactly).
func lossy(d safetensors.Dtype, t gguf.GGMLType) bool {
	return !sameEncoding(d, t) && t != gguf.TypeF32
}

// errStat accumulates the round-trip error of one chunk.
type errStat struct {
	sumSq, srcSq, maxAbs float64
	n                    int64
}

// measure decodes out (n stored elements of type t, just encoded from e.f32) and adds the
// differences from the source values to s.
func (e *encoder) measure(s *errStat, t gguf.GGMLType, out []byte) {
	src := e.f32
	if cap(e.back) < len(src) {
		e.back = make([]float32, len(src))
	}
	back := e.back[:len(src)]
	switch t {
	case gguf.TypeQ8_0:
		dtype.DequantizeQ8_0(back, out)
	case gguf.TypeF16:
		dtype.DecodeF16(back, out)
	case gguf.TypeBF16:
		dtype.DecodeBF16(back, out)
	default:
		q, ok := dtype.QuantOf(uint32(t))
		if !ok {
			panic("convert: round-trip error of type " + t.String())
		}
		dtype.Dequantize(q, back, out)
	}
	// Fast path: plain float64 sums in locals. A non-finite source or stored value (NaN,
	// an infinity kept, or an overflow to infinity) makes a sum non-finite; then the chunk is
	// measured again with the careful rules below.
	// Four independent partial sums (in a fixed order, so the figures are reproducible)
	// keep the loop from waiting on one float add chain.
	var sq, ss, mx [4]float64
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s4, b4 := src[i:i+4:i+4], back[i:i+4:i+4]
		for k := range 4 {
			sx := float64(s4[k])
			d := float64(b4[k]) - sx
			sq[k] += d * d
			ss[k] += sx * sx
			if d < 0 {
				d = -d
			}
			if d > mx[k] {
				mx[k] = d
			}
		}
	}
	for ; i < len(src); i++ {
		sx := float64(src[i])
		d := float64(back[i]) - sx
		sq[0] += d * d
		ss[0] += sx * sx
		if d < 0 {
			d = -d
		}
		if d > mx[0] {
			mx[0] = d
		}
	}
	sumSq := (sq[0] + sq[1]) + (sq[2] + sq[3])
	srcSq := (ss[0] + ss[1]) + (ss[2] + ss[3])
	maxAbs := mx[0] // NaN cannot occur here: a NaN difference makes sumSq NaN
	for _, m := range mx[1:] {
		if m > maxAbs {
			maxAbs = m
		}
	}
	if math.IsNaN(sumSq) || math.IsInf(sumSq, 0) || math.IsInf(srcSq, 0) {
		sumSq, srcSq, maxAbs = 0, 0, 0
		for i, x := range src {
			sx, bx := float64(x), float64(back[i])
			d := 0.0
			if bx != sx && !(math.IsNaN(sx) && math.IsNaN(bx)) {
				d = math.Abs(bx - sx) // +Inf for an overflow, NaN for a NaN stored from a number
			}
			sumSq += d * d
			srcSq += sx * sx
			if d > maxAbs || math.IsNaN(d) {
				maxAbs = d
			}
		}
	}
	s.sumSq += sumSq
	s.srcSq += srcSq
	if maxAbs > s.maxAbs || math.IsNaN(maxAbs) {
		s.maxAbs = maxAbs
	}
	s.n += int64(len(src))
}

// roundTrip sums the chunk statistics of tensor t, in chunk order (so the figures do not
// depend on which worker finished first).
func roundTrip(t *PlanTensor, chunks []errStat) RoundTrip {
	var s errStat
	for _, c := range chunks {
		s.sumSq += c.sumSq
		s.srcSq += c.srcSq
		s.n += c.n
		if c.maxAbs > s.maxAbs || math.IsNaN(c.maxAbs) {
			s.maxAbs = c.maxAbs
		}
	}
	r := RoundTrip{Tensor: t.Name, Type: t.Type, Source: t.SrcDtype, Elements: s.n, MaxAbs: s.maxAbs}
	if s.n > 0 {
		r.RMSE = math.Sqrt(s.sumSq / float64(s.n))
		r.SourceRMS = math.Sqrt(s.srcSq / float64(s.n))
	}
	return r
}
