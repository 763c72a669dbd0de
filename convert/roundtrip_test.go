package convert

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/safetensors"
)

// refDecode decodes stored GGUF bytes of type t to float64, written from the ggml
// definitions independently of internal/dtype: Q8_0 blocks are an f16 scale d then 32 int8
// q, each value d*q; F16 and BF16 are IEEE half and the top half of a float32.
func refDecode(t *testing.T, typ gguf.GGMLType, b []byte) []float64 {
	t.Helper()
	var out []float64
	switch typ {
	case gguf.TypeQ8_0:
		for blk := 0; blk+34 <= len(b); blk += 34 {
			d := float64(float16.Frombits(binary.LittleEndian.Uint16(b[blk:])).Float32())
			for _, q := range b[blk+2 : blk+34] {
				out = append(out, d*float64(int8(q)))
			}
		}
	case gguf.TypeF16:
		for i := 0; i+2 <= len(b); i += 2 {
			out = append(out, float64(float16.Frombits(binary.LittleEndian.Uint16(b[i:])).Float32()))
		}
	case gguf.TypeBF16:
		for i := 0; i+2 <= len(b); i += 2 {
			out = append(out, float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[i:]))<<16)))
		}
	default:
		t.Fatalf("no reference decoder for %s", typ)
	}
	return out
}

// refSource decodes a BF16 checkpoint tensor to float64.
func refSource(t *testing.T, ck *safetensors.Checkpoint, name string) []float64 {
	t.Helper()
	ti, ok := ck.Tensor(name)
	if !ok || ti.Dtype != safetensors.BF16 {
		t.Fatalf("source %s: %v %v (want a BF16 tensor)", name, ti, ok)
	}
	b, err := ck.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(b)/2)
	for i := range out {
		out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
	}
	return out
}

// TestRoundTripFromStoredBytes is the independent check of the round-trip figures: every
// tensor Write reports is re-read from the written file, decoded with the reference above,
// and compared with the checkpoint's values decoded independently; RMSE, max error and the
// source RMS must agree (max exactly, sums to rounding). Every lossy tensor must be
// reported and no exact one. By default the Markov and confidence heads stay BF16.
func TestRoundTripFromStoredBytes(t *testing.T) {
	for _, heads := range []Heads{0, AllHeads} {
		p, out := convertTo(t, baseDraft(t), Options{OutType: Q8_0, QuantizeHeads: heads})
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ck, err := safetensors.OpenCheckpoint(baseDraft(t))
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()

		reported := map[string]RoundTrip{}
		for _, r := range p.RoundTrips {
			reported[r.Tensor] = r
		}
		quantized := 0
		for i := range p.Tensors {
			pt := &p.Tensors[i]
			r, ok := reported[pt.Name]
			if pt.SrcDtype != safetensors.BF16 {
				t.Fatalf("%s: source %s; the test expects a BF16 draft", pt.Name, pt.SrcDtype)
			}
			// From BF16, F32 and BF16 hold every value exactly; Q8_0 and F16 may not.
			if want := pt.Type == gguf.TypeQ8_0 || pt.Type == gguf.TypeF16; ok != want {
				t.Errorf("heads %v: %s (%s from %s): reported %v, want %v", heads, pt.Name, pt.Type, pt.SrcDtype, ok, want)
			}
			if h := headOf(pt.Name); h != 0 {
				want := gguf.TypeBF16
				switch {
				case heads&h != 0 && pt.Dims[0]%32 == 0:
					want = gguf.TypeQ8_0
				case heads&h != 0:
					want = gguf.TypeF16 // rows not a multiple of the Q8_0 block (the tiny draft's rank 8)
				}
				if pt.Type != want {
					t.Errorf("heads %v: %s stored %s, want %s", heads, pt.Name, pt.Type, want)
				}
			}
			if !ok || pt.Xform != Copy || len(pt.Sources) != 1 {
				continue // the kv_b halves are gathered: their element order is not the source's
			}
			if pt.Type == gguf.TypeQ8_0 {
				quantized++
			}
			ti, _ := f.Tensor(pt.Name)
			stored, err := f.TensorData(ti)
			if err != nil {
				t.Fatal(err)
			}
			got, src := refDecode(t, pt.Type, stored), refSource(t, ck, pt.Sources[0])
			if len(got) != len(src) || int64(len(src)) != r.Elements {
				t.Fatalf("%s: %d stored, %d source, %d reported elements", pt.Name, len(got), len(src), r.Elements)
			}
			var sumSq, srcSq, maxAbs float64
			for k := range src {
				d := math.Abs(got[k] - src[k])
				sumSq += d * d
				srcSq += src[k] * src[k]
				maxAbs = math.Max(maxAbs, d)
			}
			rmse, srms := math.Sqrt(sumSq/float64(len(src))), math.Sqrt(srcSq/float64(len(src)))
			if r.MaxAbs != maxAbs || math.Abs(r.RMSE-rmse) > 1e-12*rmse || math.Abs(r.SourceRMS-srms) > 1e-12*srms {
				t.Errorf("%s: reported RMSE %g max %g source RMS %g; from the stored bytes %g, %g, %g", pt.Name, r.RMSE, r.MaxAbs, r.SourceRMS, rmse, maxAbs, srms)
			}
			if pt.Type == gguf.TypeQ8_0 && (rmse == 0 || r.Relative() > 0.01) {
				t.Errorf("%s: Q8_0 relative RMSE %g, want in (0, 1 %%]", pt.Name, r.Relative())
			}
		}
		if quantized < 10 {
			t.Errorf("heads %v: only %d Q8_0 tensors checked against their bytes, want at least 10", heads, quantized)
		}
	}
}

// TestRoundTripOverflow: a value beyond F16's range stores as infinity; the error says so
// (and JSON spells it as inspect does), instead of hiding it in a finite mean.
func TestRoundTripOverflow(t *testing.T) {
	var e encoder
	src := make([]byte, 4*32)
	for i := range 32 {
		binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(float32(i)))
	}
	binary.LittleEndian.PutUint32(src[4*5:], math.Float32bits(1e6))
	out := make([]byte, 2*32)
	e.encode(out, gguf.TypeF16, src, safetensors.F32)
	var s errStat
	e.measure(&s, gguf.TypeF16, out)
	r := roundTrip(&PlanTensor{Name: "w", Type: gguf.TypeF16, SrcDtype: safetensors.F32}, []errStat{s})
	if !math.IsInf(r.MaxAbs, 1) || !math.IsInf(r.RMSE, 1) || r.Elements != 32 {
		t.Fatalf("overflow: %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"rmse":"+Inf"`) || !strings.Contains(string(b), `"max_abs_error":"+Inf"`) {
		t.Errorf("JSON %s, %v", b, err)
	}
	// Exactly representable values: zero error.
	binary.LittleEndian.PutUint32(src[4*5:], math.Float32bits(0.5))
	e.encode(out, gguf.TypeF16, src, safetensors.F32)
	s = errStat{}
	e.measure(&s, gguf.TypeF16, out)
	if s.maxAbs != 0 || s.sumSq != 0 {
		t.Errorf("exact values: %+v", s)
	}
}

func TestParseHeads(t *testing.T) {
	for in, want := range map[string]Heads{"": 0, "none": 0, "markov": HeadMarkov, "confidence,markov": AllHeads, "all": AllHeads, " Markov , confidence ": AllHeads} {
		if got, err := ParseHeads(in); err != nil || got != want {
			t.Errorf("ParseHeads(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseHeads("markov,lm_head"); err == nil || !strings.Contains(err.Error(), `"lm_head"`) {
		t.Errorf("unknown head: %v", err)
	}
	if AllHeads.String() != "markov,confidence" || Heads(0).String() != "none" {
		t.Errorf("String: %s %s", AllHeads, Heads(0))
	}
}
