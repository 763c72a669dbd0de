package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// TestSmallInputErrors: the smaller cases of issue 40, each driven through the root command.
func TestSmallInputErrors(t *testing.T) {
	target, draft := convertedPair(t)
	dir := t.TempDir()
	tgt := filepath.Join(dir, "tgt")
	if err := synthTiny(tgt, filepath.Join(dir, "drf")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
		not  string
	}{
		{[]string{"convert", tgt, "--threads", "0", "--dry-run"}, 2, "--threads 0: must be in [1, ", ""},
		{[]string{"convert", filepath.Join(tgt, "config.json"), "--dry-run"}, 2, "is a file: convert takes the checkpoint directory", "not a directory"},
		{[]string{"run", "--draft-only", "--draft", draft, "--target", target}, 2, "--target does not apply to a draft-only run", "--n"},
		{[]string{"run", "--target", target, "--tokens", "5", "--seed", "abc"}, 2, `--seed "abc": not an unsigned integer`, "strconv"},
		{[]string{"run", "--target", target, "--tokens", "5", "--temp", "x"}, 2, `--temp "x": not a number`, "strconv"},
	} {
		out, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) || (c.not != "" && strings.Contains(out, c.not)) {
			t.Errorf("%v: exit %d, want %d saying %q\n%s", c.args, code, c.code, c.want, out)
		}
	}

	// run says when it stopped at the end-of-sequence token: make the first greedy token the
	// target's eos.
	stdout, _, code := runRoot(t, "run", "--target", target, "--tokens", "5,6", "-n", "3", "--json")
	var rep runReport
	decodeJSON(t, stdout, &rep)
	if code != 0 || len(rep.Tokens) != 3 || rep.StoppedAtEOS != nil {
		t.Fatalf("plain run: exit %d %+v", code, rep)
	}
	eosT := filepath.Join(dir, "eos.gguf")
	rewriteGGUF(t, target, eosT, func(kvs *[]gguf.KV) { setKV(kvs, "tokenizer.ggml.eos_token_id", gguf.U32(uint32(rep.Tokens[1]))) })
	out, code := runCLI(t, "run", "--target", eosT, "--tokens", "5,6", "-n", "10")
	if code != 0 || !strings.Contains(out, "stopped at the end-of-sequence token "+strconv.Itoa(rep.Tokens[1])+" after 2 of the 10 tokens") {
		t.Errorf("eos: exit %d\n%s", code, out)
	}

	// A calibration with a null temperature is an error naming it, not a 0.
	cal := filepath.Join(dir, "c.json")
	if out, code := runCLI(t, "calibrate", "--target", target, "--draft", draft, "-n", "4", "-o", cal); code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(cal)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"temperatures": \[\s*[0-9.e+-]+`)
	if !re.Match(b) {
		t.Fatalf("no temperatures in\n%s", b)
	}
	nul := filepath.Join(dir, "null.json")
	if err := os.WriteFile(nul, re.ReplaceAll(b, []byte(`"temperatures": [ null`)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = runCLI(t, "run", "--target", target, "--draft", draft, "--tokens", "5", "--calibration", nul)
	if code != 1 || !strings.Contains(out, "temperatures[0] is null") {
		t.Errorf("null temperature: exit %d\n%s", code, out)
	}
}

// TestInspectTargetIsADraft: inspect --check --target D with D a draft says D is not a target.
func TestInspectTargetIsADraft(t *testing.T) {
	_, draft := convertedPair(t)
	out, code := runCLI(t, "inspect", "--check", "--target", draft, draft)
	if code != 1 || !strings.Contains(out, "a draft (") || !strings.Contains(out, "not a target") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// TestInspectHugeCounts: a header whose counts cannot fit says how many bytes are left after
// the counts, not "bytes of the file".
func TestInspectHugeCounts(t *testing.T) {
	b := []byte("GGUF")
	b = append(b, 3, 0, 0, 0)         // version 3
	b = append(b, make([]byte, 8)...) // 0 tensors
	b = append(b, 45, 0, 0, 0, 0, 0, 0, 0)
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "inspect", path)
	if code != 1 || !strings.Contains(out, "45 key/value pairs (at least 14 bytes each) cannot fit in the 0 bytes left after the header counts") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// TestConvertBadDataOffsets: safetensors data_offsets past the end of the file or reversed
// are reported as what they are, not as a hole.
func TestConvertBadDataOffsets(t *testing.T) {
	dir := t.TempDir()
	tgt := filepath.Join(dir, "tgt")
	if err := synthTiny(tgt, filepath.Join(dir, "drf")); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(tgt, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ offsets, want string }{
		{"[100,104]", "[100, 104] runs past the end of the data section"},
		{"[4,0]", "[4, 0] ends before it begins"},
	} {
		ck := filepath.Join(dir, "ck"+strings.Trim(c.offsets, "[]"))
		if err := os.MkdirAll(ck, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ck, "config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		hdr := `{"w":{"dtype":"U8","shape":[4],"data_offsets":` + c.offsets + `}}`
		b := append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...)
		if err := os.WriteFile(filepath.Join(ck, "model.safetensors"), append(b, 1, 2, 3, 4), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runCLI(t, "convert", ck, "--dry-run")
		if code != 1 || !strings.Contains(out, c.want) || strings.Contains(out, "hole") {
			t.Errorf("%s: exit %d\n%s", c.offsets, code, out)
		}
	}
}

// TestCalibrationErrorsLocated: a calibration side file cut in half names the byte where it
// ends, and a bad dspark.calibration.* key of a GGUF copy is named.
func TestCalibrationErrorsLocated(t *testing.T) {
	target, draft := convertedPair(t)
	dir := t.TempDir()
	cal, cg := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.gguf")
	if out, code := runCLI(t, "calibrate", "--target", target, "--draft", draft, "-n", "4", "-o", cal, "--write-gguf", cg); code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(cal)
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "half.json")
	if err := os.WriteFile(half, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "run", "--target", target, "--draft", draft, "--tokens", "5", "--calibration", half)
	if want := "byte " + strconv.Itoa(len(b)/2) + ": the file ends in the middle"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("half a side file: exit %d, want %q\n%s", code, want, out)
	}
	bad := filepath.Join(dir, "bad.gguf")
	rewriteGGUF(t, cg, bad, func(kvs *[]gguf.KV) { setKV(kvs, "dspark.calibration.0.temperatures", gguf.F64s([]float64{1})) })
	out, code = runCLI(t, "run", "--target", target, "--draft", bad, "--tokens", "5")
	if code != 1 || !strings.Contains(out, "key dspark.calibration.0.temperatures: 1 temperatures") {
		t.Errorf("bad calibration key: exit %d\n%s", code, out)
	}
}

// TestConvertConfigBlockSize: an unreasonable block_size in a draft's config.json names the
// config field, not the GGUF key it would become.
func TestConvertConfigBlockSize(t *testing.T) {
	dir := t.TempDir()
	tgt, drf := filepath.Join(dir, "tgt"), filepath.Join(dir, "drf")
	if err := synthTiny(tgt, drf); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(drf, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"block_size":\s*[0-9]+`)
	if !re.Match(b) {
		t.Fatalf("no block_size in\n%s", b)
	}
	if err := os.WriteFile(p, re.ReplaceAll(b, []byte(`"block_size": 1000000000000`)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "convert", drf, "--target", tgt, "--dry-run")
	if code != 1 || !strings.Contains(out, "block_size 1000000000000 is outside 1..64") || strings.Contains(out, "dflash.block_size") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// TestConvertNoRoutedExperts: n_routed_experts 0 in a MoE checkpoint's config is one line
// about the field, not a line per expert tensor.
func TestConvertNoRoutedExperts(t *testing.T) {
	dir := t.TempDir()
	tgt := filepath.Join(dir, "tgt")
	if err := synthTiny(tgt, filepath.Join(dir, "drf")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(tgt, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"n_routed_experts":\s*[0-9]+`)
	if !re.Match(b) {
		t.Fatalf("no n_routed_experts in\n%s", b)
	}
	if err := os.WriteFile(p, re.ReplaceAll(b, []byte(`"n_routed_experts": 0`)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "convert", tgt, "--dry-run")
	if code != 1 || !strings.Contains(out, "n_routed_experts is 0 or absent, but the checkpoint holds") || strings.Count(out, "\n") > 4 {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// TestInspectStdinCorruptCount: a corrupt huge kv_count on standard input is a corrupt count,
// not "unsupported ... decompress or copy it to a file".
func TestInspectStdinCorruptCount(t *testing.T) {
	hdr := []byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\x00\x00")
	rootCmd.SetIn(io.MultiReader(bytes.NewReader(hdr), io.LimitReader(zeros{}, 1<<30)))
	defer rootCmd.SetIn(nil)
	out, code := runCLI(t, "inspect", "-")
	if code != 1 || !strings.Contains(out, "kv_count: 281474976710655 key/value pairs") || !strings.Contains(out, "a corrupt count") || strings.Contains(out, "decompress") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
