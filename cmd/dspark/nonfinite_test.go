package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// poison names how a tensor's every value is replaced.
type poison string

const (
	poisonNaN poison = "nan"
	poisonInf poison = "inf"
)

// poisonGGUF copies the GGUF src to dst with every value of tensor name replaced by NaN or
// +Inf, in the tensor's own type (F32, F16, BF16 bits; a Q8_0 tensor gets the value as its
// block scales).
func poisonGGUF(t *testing.T, src, dst, name string, p poison) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := float32(math.NaN())
	if p == poisonInf {
		v = float32(math.Inf(1))
	}
	found := false
	var specs []gguf.TensorSpec
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Name == name {
			found = true
			data = append([]byte(nil), data...)
			switch ti.Type {
			case gguf.TypeF32:
				for j := 0; j+4 <= len(data); j += 4 {
					binary.LittleEndian.PutUint32(data[j:], math.Float32bits(v))
				}
			case gguf.TypeF16:
				for j := 0; j+2 <= len(data); j += 2 {
					binary.LittleEndian.PutUint16(data[j:], dtype.F32ToF16(v))
				}
			case gguf.TypeBF16:
				for j := 0; j+2 <= len(data); j += 2 {
					binary.LittleEndian.PutUint16(data[j:], dtype.F32ToBF16(v))
				}
			case gguf.TypeQ8_0:
				for j := 0; j+dtype.Q8_0BlockBytes <= len(data); j += dtype.Q8_0BlockBytes {
					binary.LittleEndian.PutUint16(data[j:], dtype.F32ToF16(v))
					for k := 2; k < dtype.Q8_0BlockBytes; k++ {
						data[j+k] = 1
					}
				}
			default:
				t.Fatalf("%s: poisonGGUF: type %v", name, ti.Type)
			}
		}
		specs = append(specs, gguf.TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: gguf.BytesData(data)})
	}
	if !found {
		t.Fatalf("%s has no tensor %s", src, name)
	}
	if err := gguf.WriteFile(dst, f.KVs, specs, gguf.WriteOptions{Alignment: f.Alignment}); err != nil {
		t.Fatal(err)
	}
}

var gqaOnce struct {
	sync.Once
	target, draft string
	err           error
}

// convertedGQAPair synthesizes and converts a tiny deepseek2 target and a GQA DSpark draft
// (Markov and confidence heads), once per test binary.
func convertedGQAPair(t *testing.T) (target, draft string) {
	t.Helper()
	p := &gqaOnce
	p.Do(func() {
		dir := filepath.Join(testDir, "gqapair")
		tgt, drf := filepath.Join(dir, "tgt"), filepath.Join(dir, "drf")
		p.target, p.draft = filepath.Join(dir, "t.gguf"), filepath.Join(dir, "d.gguf")
		for _, args := range [][]string{
			{"synth", "--kind", "target", "--preset", "tiny", "--seed", "1", "--out", tgt, "--quiet"},
			{"synth", "--kind", "dspark", "--backbone", "gqa", "--preset", "tiny", "--seed", "2", "--target", tgt, "--out", drf, "--quiet"},
			{"convert", tgt, "-o", p.target, "--quiet"},
			{"convert", drf, "--target", tgt, "-o", p.draft, "--quiet"},
		} {
			if out, code := runCLI(t, args...); code != 0 {
				p.err = fmt.Errorf("%v: exit %d\n%s", args, code, out)
				return
			}
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.target, p.draft
}

// TestRunNonFiniteWeights: a well-formed pair whose draft or target tensor is all NaN (or
// +Inf) never panics and never turns NaN into a token: run fails with exit 1, naming the
// file, and where the diagnostic re-run finds it the layer and operation, in every mode.
func TestRunNonFiniteWeights(t *testing.T) {
	mlaT, mlaD := convertedPair(t)
	gqaT, gqaD := convertedGQAPair(t)
	dir := t.TempDir()
	type tc struct {
		backbone string
		draft    bool   // poison the draft (else the target)
		tensor   string // the tensor poisoned
		p        poison
		want     []string // in the error, besides the file's name
	}
	cases := []tc{
		{"mla", true, "fc.weight", poisonNaN, []string{"context projection", "fc.weight"}},
		{"mla", true, "fc.weight", poisonInf, []string{"context projection", "fc.weight"}},
		{"mla", true, "markov_w2.weight", poisonNaN, []string{"Markov", "markov_w2.weight"}},
		{"mla", true, "output_norm.weight", poisonNaN, []string{"output norm", "output_norm.weight"}},
		{"mla", true, "conf_proj.weight", poisonNaN, []string{"confidence head", "conf_proj.weight"}},
		{"mla", true, "blk.0.attn_q_a.weight", poisonNaN, []string{"layer 0, MLA attention", "blk.0.attn_q_a"}},
		{"gqa", true, "fc.weight", poisonNaN, []string{"context projection", "fc.weight"}},
		{"gqa", true, "markov_w2.weight", poisonNaN, []string{"Markov", "markov_w2.weight"}},
		{"gqa", true, "output_norm.weight", poisonNaN, []string{"output norm", "output_norm.weight"}},
		{"gqa", true, "conf_proj.weight", poisonNaN, []string{"confidence head", "conf_proj.weight"}},
		{"gqa", true, "blk.0.attn_q.weight", poisonNaN, []string{"layer 0, attention", "blk.0.attn_q"}},
		{"mla", false, "token_embd.weight", poisonNaN, []string{"token embedding", "token_embd.weight"}},
		{"mla", false, "output.weight", poisonInf, []string{"output head", "output.weight"}},
		{"mla", false, "blk.1.ffn_down_exps.weight", poisonNaN, []string{"layer 1, MoE feed-forward", "ffn_down_exps"}},
	}
	for _, c := range cases {
		target, draft := mlaT, mlaD
		if c.backbone == "gqa" {
			target, draft = gqaT, gqaD
		}
		bad := filepath.Join(dir, fmt.Sprintf("%s-%s-%s-%s.gguf", c.backbone, map[bool]string{true: "d", false: "t"}[c.draft], c.tensor, c.p))
		if c.draft {
			poisonGGUF(t, draft, bad, c.tensor, c.p)
			draft = bad
		} else {
			poisonGGUF(t, target, bad, c.tensor, c.p)
			target = bad
		}
		modes := [][]string{
			{"--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "12"},
			{"--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "12", "--json"},
			{"--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "12", "--temp", "0.8", "--seed", "3"},
		}
		if c.draft && c.tensor != "conf_proj.weight" && c.tensor != "markov_w2.weight" {
			// --draft-only times the block with a stand-in head; conf_proj and markov_w2
			// run there too, but the first check that fails is the same.
			modes = append(modes, []string{"--draft-only", "--draft", draft})
		}
		if !c.draft {
			modes = append(modes, []string{"--target", target, "--tokens", "5,6,7", "-n", "12"})
		}
		for _, args := range modes {
			name := fmt.Sprintf("%s %s %s %v", c.backbone, c.tensor, c.p, args[len(args)-2:])
			stdout, stderr, code := runRoot(t, append([]string{"run"}, args...)...)
			if code != 1 {
				t.Errorf("%s: exit %d, want 1\n%s%s", name, code, stdout, stderr)
				continue
			}
			if !strings.Contains(stderr, filepath.Base(bad)) {
				t.Errorf("%s: the error does not name the file %s:\n%s", name, bad, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s: the error does not say %q:\n%s", name, w, stderr)
				}
			}
			if !c.draft && args[len(args)-2] == "-n" && !strings.Contains(strings.Join(args, " "), "--draft") && strings.Contains(stderr, "speculative") {
				t.Errorf("%s: target-only mode says speculative:\n%s", name, stderr)
			}
			t.Logf("%s: %s", name, strings.TrimSpace(stderr))
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "out of range") {
				t.Errorf("%s: %s", name, stderr)
			}
		}
	}
}

// TestInspectCheckData: --check --data reads every float tensor and names each one holding
// NaN or Inf with the byte offset of its first bad value (F32, F16, BF16 and Q8_0 scales);
// --check alone reads headers only and passes such a file; --data without --check is a usage
// error.
func TestInspectCheckData(t *testing.T) {
	dir := t.TempDir()
	f32 := make([]byte, 4*8)
	binary.LittleEndian.PutUint32(f32[4*5:], math.Float32bits(float32(math.Inf(-1))))
	f16 := make([]byte, 2*8)
	binary.LittleEndian.PutUint16(f16[2*3:], dtype.F32ToF16(float32(math.NaN())))
	binary.LittleEndian.PutUint16(f16[2*6:], dtype.F32ToF16(float32(math.Inf(1))))
	bf16 := make([]byte, 2*8)
	binary.LittleEndian.PutUint16(bf16[2*7:], dtype.F32ToBF16(float32(math.NaN())))
	q8 := make([]byte, 2*dtype.Q8_0BlockBytes)
	binary.LittleEndian.PutUint16(q8[dtype.Q8_0BlockBytes:], dtype.F32ToF16(float32(math.Inf(1))))
	clean := make([]byte, 4*8)
	specs := []gguf.TensorSpec{
		{Name: "a.f32", Type: gguf.TypeF32, Dims: []uint64{8}, Data: gguf.BytesData(f32)},
		{Name: "b.f16", Type: gguf.TypeF16, Dims: []uint64{8}, Data: gguf.BytesData(f16)},
		{Name: "c.clean", Type: gguf.TypeF32, Dims: []uint64{8}, Data: gguf.BytesData(clean)},
		{Name: "d.bf16", Type: gguf.TypeBF16, Dims: []uint64{8}, Data: gguf.BytesData(bf16)},
		{Name: "e.q8", Type: gguf.TypeQ8_0, Dims: []uint64{64}, Data: gguf.BytesData(q8)},
	}
	path := filepath.Join(dir, "x.gguf")
	if err := gguf.WriteFile(path, []gguf.KV{{Key: "general.architecture", Value: gguf.Str("x")}}, specs, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	abs := map[string]int64{}
	for _, ti := range f.Tensors {
		abs[ti.Name] = ti.AbsOffset
	}
	f.Close()
	// Where each tensor's first bad value is, from how the bytes above were written.
	want := map[string]int64{"a.f32": abs["a.f32"] + 4*5, "b.f16": abs["b.f16"] + 2*3, "d.bf16": abs["d.bf16"] + 2*7, "e.q8": abs["e.q8"] + dtype.Q8_0BlockBytes}
	out, code := runCLI(t, "inspect", "--check", "--data", "--json", path)
	if code != 1 {
		t.Fatalf("--check --data: exit %d\n%s", code, out)
	}
	var rep struct {
		Check struct {
			Problems []struct{ Subject, Message string }
		}
	}
	decodeJSON(t, out[:strings.LastIndex(out, "}")+1], &rep)
	got := map[string]string{}
	for _, p := range rep.Check.Problems {
		if strings.Contains(p.Message, "non-finite") {
			got[p.Subject] = p.Message
		}
	}
	if len(got) != len(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	for name, off := range want {
		if !strings.Contains(got[name], fmt.Sprintf("byte offset %d", off)) {
			t.Errorf("%s: %q, want byte offset %d", name, got[name], off)
		}
	}
	if !strings.Contains(got["b.f16"], "2 non-finite values") || !strings.Contains(got["e.q8"], "1 non-finite Q8_0 block scales") {
		t.Errorf("counts: %v", got)
	}
	if out, code := runCLI(t, "inspect", "--data", path); code != 2 || !strings.Contains(out, "--data") {
		t.Errorf("--data without --check: exit %d\n%s", code, out)
	}

	// A real draft with a NaN fc.weight: --check passes (headers only), --check --data names it.
	_, draft := convertedPair(t)
	bad := filepath.Join(dir, "fc-nan.gguf")
	poisonGGUF(t, draft, bad, "fc.weight", poisonNaN)
	if out, code := runCLI(t, "inspect", "--check", bad); code != 0 {
		t.Fatalf("--check of a NaN fc.weight: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, "inspect", "--check", "--data", bad)
	if code != 1 || !strings.Contains(out, "fc.weight") || !strings.Contains(out, "non-finite values") {
		t.Fatalf("--check --data of a NaN fc.weight: exit %d\n%s", code, out)
	}
}
