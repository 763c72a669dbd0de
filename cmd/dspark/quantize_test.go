package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

var quantFixtures = filepath.Join("..", "..", "runtime", "qwen3", "testdata", "quant")

func runQuantizeArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return execFresh(t, newQuantizeCmd(), args...)
}

// TestQuantizeLlamaCompat: `dspark quantize --llama-compat` writes llama-quantize's file
// byte for byte (the whole file) for every committed fixture mix.
func TestQuantizeLlamaCompat(t *testing.T) {
	in := filepath.Join(quantFixtures, "input-f32.gguf")
	dir := t.TempDir()
	for _, mix := range []string{"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4_MOE"} {
		out := filepath.Join(dir, mix+".gguf")
		if msg, err := runQuantizeArgs(t, "--llama-compat", "-q", in, out, strings.ToLower(mix)); err != nil {
			t.Fatalf("%s: %v\n%s", mix, err, msg)
		}
		got, _ := os.ReadFile(out)
		want, err := os.ReadFile(filepath.Join(quantFixtures, mix+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: output differs from llama-quantize's (%d vs %d bytes)", mix, len(got), len(want))
		}
	}
}

// TestQuantizeDraftAware quantizes the tiny converted dflash draft to Q4_K_M: by default
// fc and the Markov head stay at Q8_0 or better and dspark.quantize.* records it; with
// --llama-compat they follow llama-quantize's mix; a --tensor-type wins; nothing is dropped.
func TestQuantizeDraftAware(t *testing.T) {
	_, draft := convertedPair(t)
	dir := t.TempDir()
	src, err := gguf.Open(draft)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	open := func(args ...string) *gguf.File {
		t.Helper()
		out := filepath.Join(dir, "out.gguf")
		msg, err := runQuantizeArgs(t, append([]string{"--force", "-q", "--json", draft, out, "Q4_K_M"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, msg)
		}
		var js quantizeJSON
		if err := json.Unmarshal([]byte(msg), &js); err != nil {
			t.Fatalf("--json: %v\n%s", err, msg)
		}
		if len(js.Tensors) != len(src.Tensors) {
			t.Errorf("--json lists %d tensors, the draft has %d", len(js.Tensors), len(src.Tensors))
		}
		for _, tj := range js.Tensors {
			// A block type loses something; BF16 -> F16 of these small values loses nothing.
			lossy := tj.To != "F16" && tj.To != "F32" && tj.To != "BF16"
			if tj.Converted && (tj.RelRMSE == nil || *tj.RelRMSE < 0 || lossy && *tj.RelRMSE == 0 || *tj.RelRMSE > 0.1) {
				t.Errorf("%s: rel_rmse %v", tj.Name, ptrStr(tj.RelRMSE))
			}
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if len(f.Tensors) != len(src.Tensors) {
			t.Errorf("%v: %d tensors written of %d", args, len(f.Tensors), len(src.Tensors))
		}
		for _, st := range src.Tensors {
			if _, ok := f.Tensor(st.Name); !ok {
				t.Errorf("%v: %s dropped", args, st.Name)
			}
		}
		return f
	}
	typeOf := func(f *gguf.File, name string) gguf.GGMLType {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return ti.Type
	}
	bitsOf := func(ty gguf.GGMLType) float64 { return float64(8*ty.TypeSize()) / float64(ty.BlockSize()) }
	sensitive := []string{"fc.weight", "markov_w1.weight", "markov_w2.weight"}

	aware := open()
	for _, n := range sensitive {
		if ty := typeOf(aware, n); bitsOf(ty) < 8 {
			t.Errorf("draft-aware: %s is %v, below Q8_0", n, ty)
		}
	}
	if ft, _ := aware.Uint32("general.file_type"); ft != 15 {
		t.Errorf("general.file_type %d, want 15 (Q4_K_M)", ft)
	}
	if changed, err := aware.Strings("dspark.quantize.changed"); err != nil || !strings.Contains(strings.Join(changed, " "), "fc.weight=") {
		t.Errorf("dspark.quantize.changed = %q (%v), want fc.weight recorded", changed, err)
	}

	compat := open("--llama-compat")
	if ty := typeOf(compat, "fc.weight"); bitsOf(ty) >= 8 {
		t.Errorf("llama-compat: fc.weight is %v; llama-quantize's Q4_K_M gives it the default type or its fallback", ty)
	}
	if _, ok := compat.Lookup("dspark.quantize.file_type"); ok {
		t.Error("llama-compat output has dspark.quantize.* keys")
	}

	user := open("--tensor-type", "^fc\\.weight$=q4_0")
	if ty := typeOf(user, "fc.weight"); ty != gguf.TypeQ4_0 {
		t.Errorf("--tensor-type fc=q4_0: fc.weight is %v", ty)
	}
}

// TestQuantizeUsageErrors: bad TYPE, flags and arguments exit 2 naming what is wrong, and
// write nothing.
func TestQuantizeUsageErrors(t *testing.T) {
	in := filepath.Join(quantFixtures, "input-f32.gguf")
	out := filepath.Join(t.TempDir(), "o.gguf")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{in, out, "Q7_K"}, "TYPE"},
		{[]string{in, out}, "3 argument"},
		{[]string{"--tensor-type", "fc", in, out, "Q4_0"}, "--tensor-type"},
		{[]string{"--tensor-type", "fc=Q9", in, out, "Q4_0"}, "--tensor-type"},
		{[]string{"--tensor-type", "(=q8_0", in, out, "Q4_0"}, "--tensor-type"},
		{[]string{"--output-tensor-type", "iq2_xxs", in, out, "Q4_0"}, "--output-tensor-type"},
		{[]string{"--threads", "0", in, out, "Q4_0"}, "--threads"},
		{[]string{"--bogus", in, out, "Q4_0"}, "--bogus"},
		{[]string{in, in, "Q4_0"}, "OUT.gguf"},
	} {
		msg, err := runQuantizeArgs(t, c.args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v (%s), want a usage error naming %s", c.args, err, msg, c.says)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: wrote %s", c.args, out)
		}
	}
}

// TestQuantizeRefusesRequantize: an already-quantized input fails (exit 1) naming the
// tensor and leaves no output; --allow-requantize goes through.
func TestQuantizeRefusesRequantize(t *testing.T) {
	in := filepath.Join(quantFixtures, "Q4_0.gguf")
	out := filepath.Join(t.TempDir(), "o.gguf")
	_, err := runQuantizeArgs(t, "-q", in, out, "Q8_0")
	var ue usageError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "is already Q") {
		t.Fatalf("got %v, want a failure naming the quantized tensor", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("an output was written")
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
	if msg, err := runQuantizeArgs(t, "-q", "--allow-requantize", in, out, "Q8_0"); err != nil {
		t.Fatalf("--allow-requantize: %v\n%s", err, msg)
	}
}

func ptrStr(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmtFloat(*p)
}

func fmtFloat(v float64) string { b, _ := json.Marshal(v); return string(b) }

// TestQuantizeExitCodes runs quantize as main does: a usage error exits 2 naming the flag,
// a refused input exits 1, and a run after a --tensor-type run starts from no overrides.
func TestQuantizeExitCodes(t *testing.T) {
	in := filepath.Join(quantFixtures, "input-f32.gguf")
	dir := t.TempDir()
	out := filepath.Join(dir, "o.gguf")
	if _, stderr, code := runRoot(t, "quantize", "--tensor-type", "fc=q3", in, out, "Q4_0"); code != exitUsage || !strings.Contains(stderr, "--tensor-type") {
		t.Errorf("bad --tensor-type: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runRoot(t, "quantize", "-q", filepath.Join(quantFixtures, "Q8_0.gguf"), out, "Q4_0"); code != exitFailure || !strings.Contains(stderr, "already Q8_0") {
		t.Errorf("requantize: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runRoot(t, "quantize", "-q", "--tensor-type", "ffn_up=q8_0", in, out, "Q4_0"); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := runRoot(t, "quantize", "-q", "--force", "--llama-compat", in, out, "Q4_0")
	if code != exitOK || strings.Contains(stdout, "--tensor-type") {
		t.Fatalf("second run: exit %d, an override leaked?\n%s%s", code, stdout, stderr)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(filepath.Join(quantFixtures, "Q4_0.gguf"))
	if !bytes.Equal(got, want) {
		t.Error("second run differs from llama-quantize's Q4_0")
	}
}

// TestQuantizeConvertOutType: `convert --outtype Q4_K_M` (convert and quantize in one pass)
// writes every tensor with the type and bytes `dspark quantize` gives the BF16 conversion
// of the same checkpoint, for the tiny target (deepseek2, MoE) and its dflash draft.
func TestQuantizeConvertOutType(t *testing.T) {
	target, draft := convertedPair(t)
	dir := t.TempDir()
	pair := filepath.Join(testDir, "pair")
	for _, c := range []struct {
		gguf string
		args []string
	}{
		{target, []string{filepath.Join(pair, "tgt")}},
		{draft, []string{filepath.Join(pair, "drf"), "--target", filepath.Join(pair, "tgt")}},
	} {
		for _, mix := range []string{"Q4_K_M", "MXFP4_MOE", "IQ4_XS"} {
			one := filepath.Join(dir, "one-"+mix+".gguf")
			two := filepath.Join(dir, "two-"+mix+".gguf")
			if out, err := runConvertArgs(t, append(c.args, "-o", one, "--outtype", mix, "--quiet", "--force")...); err != nil {
				t.Fatalf("convert --outtype %s: %v\n%s", mix, err, out)
			}
			if out, err := runQuantizeArgs(t, "-q", "--force", c.gguf, two, mix); err != nil {
				t.Fatalf("quantize %s: %v\n%s", mix, err, out)
			}
			a, err := gguf.Open(one)
			if err != nil {
				t.Fatal(err)
			}
			b, err := gguf.Open(two)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Tensors) != len(b.Tensors) {
				t.Errorf("%s: %d tensors vs %d", mix, len(a.Tensors), len(b.Tensors))
			}
			quantized := 0
			for i := range a.Tensors {
				ta := &a.Tensors[i]
				tb, ok := b.Tensor(ta.Name)
				if !ok {
					t.Errorf("%s: %s missing from quantize's output", mix, ta.Name)
					continue
				}
				da, _ := a.TensorData(ta)
				db, _ := b.TensorData(tb)
				if ta.Type != tb.Type || !bytes.Equal(da, db) {
					t.Errorf("%s %s: convert wrote %v, quantize %v (bytes equal: %v)", mix, ta.Name, ta.Type, tb.Type, bytes.Equal(da, db))
				}
				if ta.Type.BlockSize() > 1 && ta.Type != gguf.TypeQ8_0 {
					quantized++
				}
			}
			if ft, _ := a.Uint32("general.file_type"); ft == 0 || mixFileType(mix) != ft {
				t.Errorf("%s: general.file_type %d", mix, ft)
			}
			if quantized == 0 && !(mix == "MXFP4_MOE" && c.gguf == draft) { // the draft has no experts
				t.Errorf("%s: no tensor of a block type below Q8_0", mix)
			}
			a.Close()
			b.Close()
		}
	}
}

func mixFileType(mix string) uint32 {
	return map[string]uint32{"Q4_K_M": 15, "MXFP4_MOE": 38, "IQ4_XS": 30}[mix]
}

// TestQuantizeDraftRuns: the draft-aware Q8_0 quantization of the tiny draft (dims kept as
// written, heads Q8_0) loads and decodes against its target, and speculative output equals
// plain decoding, as for any draft.
func TestQuantizeDraftRuns(t *testing.T) {
	target, draft := convertedPair(t)
	out := filepath.Join(t.TempDir(), "d-q8.gguf")
	if msg, err := runQuantizeArgs(t, "-q", draft, out, "Q8_0"); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	spec, stderr, code := runRoot(t, "run", "--target", target, "--draft", out, "--tokens", "5,6,7", "-n", "12", "--json")
	if code != exitOK {
		t.Fatalf("run with the quantized draft: exit %d\n%s", code, stderr)
	}
	plain, stderr, code := runRoot(t, "run", "--target", target, "--tokens", "5,6,7", "-n", "12", "--json")
	if code != exitOK {
		t.Fatalf("plain run: exit %d\n%s", code, stderr)
	}
	var a, b runReport
	decodeJSON(t, spec, &a)
	decodeJSON(t, plain, &b)
	if fmt.Sprint(a.Tokens) != fmt.Sprint(b.Tokens) || len(a.Tokens) == 0 {
		t.Errorf("speculative %v, plain %v", a.Tokens, b.Tokens)
	}
}

// TestQuantizeLlamaCompatDraftRuns: llama-quantize (and --llama-compat) writes a {H, 1} head
// such as the confidence head's conf_proj as {H}, as ggml drops trailing 1s; dspark's lint and
// runtime compare dims as llama.cpp's loader does, so that draft checks clean and runs, with
// output equal to plain decoding.
func TestQuantizeLlamaCompatDraftRuns(t *testing.T) {
	target, draft := convertedPair(t)
	out := filepath.Join(t.TempDir(), "d-compat.gguf")
	if msg, err := runQuantizeArgs(t, "-q", "--llama-compat", draft, out, "Q4_K_M"); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := ""
	for _, ti := range f.Tensors {
		if strings.Contains(ti.Name, "conf_proj") && len(ti.Dims) == 1 {
			trimmed = ti.Name
		}
	}
	f.Close()
	if trimmed == "" {
		t.Fatal("no 1-D conf_proj in the llama-compat draft: the test needs the trimmed form")
	}
	if stdout, stderr, code := runRoot(t, "inspect", "--check", "--target", target, out); code != exitOK {
		t.Fatalf("inspect --check of the llama-compat draft (%s trimmed): exit %d\n%s%s", trimmed, code, stdout, stderr)
	}
	spec, stderr, code := runRoot(t, "run", "--target", target, "--draft", out, "--tokens", "5,6,7", "-n", "12", "--json")
	if code != exitOK {
		t.Fatalf("run with the llama-compat draft: exit %d\n%s", code, stderr)
	}
	plain, stderr, code := runRoot(t, "run", "--target", target, "--tokens", "5,6,7", "-n", "12", "--json")
	if code != exitOK {
		t.Fatalf("plain run: exit %d\n%s", code, stderr)
	}
	var a, b runReport
	decodeJSON(t, spec, &a)
	decodeJSON(t, plain, &b)
	if fmt.Sprint(a.Tokens) != fmt.Sprint(b.Tokens) || len(a.Tokens) == 0 {
		t.Errorf("speculative %v, plain %v", a.Tokens, b.Tokens)
	}
}

// TestRunQ8QuantizedTarget: a Q4_K_M target (dspark quantize of the tiny converted target)
// with a Q8_0 draft runs with --activations q8: the report names q8 and the quantized types,
// and greedy speculative output equals plain decoding with the same activations. (The tiny
// model's widths are not multiples of 256, so the mix falls back to Q5_0 and Q8_0 as
// llama-quantize's does; runtime's TestGreedyParityQuantizedTarget covers every type.)
func TestRunQ8QuantizedTarget(t *testing.T) {
	target, draft := convertedPair(t)
	dir := t.TempDir()
	qt, qd := filepath.Join(dir, "t-q4km.gguf"), filepath.Join(dir, "d-q8.gguf")
	if msg, err := runQuantizeArgs(t, "-q", target, qt, "Q4_K_M"); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	if msg, err := runQuantizeArgs(t, "-q", draft, qd, "Q8_0"); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	out, errOut, code := runRoot(t, "run", "--target", qt, "--draft", qd, "--tokens", "5,6,7", "-n", "12", "--json", "--activations", "q8")
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var rep runReport
	decodeJSON(t, out, &rep)
	if rep.Numerics.Activations != "q8" || rep.MatchesPlain == nil || !*rep.MatchesPlain || len(rep.Tokens) == 0 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(rep.Numerics.Note, "q8 activations") {
		t.Errorf("note %q does not say how the quantized matrices ran", rep.Numerics.Note)
	}
	t.Logf("numerics: %+v", rep.Numerics)
	table, code := runCLI(t, "run", "--target", qt, "--tokens", "3", "-n", "2", "--activations", "q8")
	if code != exitOK || !strings.Contains(table, "activations q8") {
		t.Fatalf("table: exit %d:\n%s", code, table)
	}
}
