package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/report"
)

// runInspectArgs runs a fresh inspect command (flags do not leak between runs).
func runInspectArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return execFresh(t, newInspectCmd(), args...)
}

// smallDraft returns the metadata and tensors of a small dflash (MLA DSpark) draft:
// hidden 16, 2 layers, 3 tapped target layers, vocabulary 40, markov rank 8.
// dirty adds a token with control characters and one that is not UTF-8.
func smallDraft(targetLayers []int32, dirty bool) ([]gguf.KV, []gguf.TensorSpec) {
	const H, F, V, R, heads, q, kv, nope, rope, vd, L, Th = 16, 24, 40, 8, 2, 12, 20, 6, 4, 10, 2, 16
	toks := make([]string, V)
	types := make([]int32, V)
	for i := range toks {
		toks[i] = fmt.Sprintf("tok%d", i)
		types[i] = 1
	}
	if dirty {
		toks[5] = "ctl\x1b[2J\x07"
		toks[4] = "bad\xff"
	}
	p := "dflash."
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash")},
		{Key: "general.name", Value: gguf.Str("tiny  draft ")},
		{Key: p + "block_count", Value: gguf.U32(L)},
		{Key: p + "embedding_length", Value: gguf.U32(H)},
		{Key: p + "feed_forward_length", Value: gguf.U32(F)},
		{Key: p + "context_length", Value: gguf.U32(4096)},
		{Key: p + "vocab_size", Value: gguf.U32(V)},
		{Key: p + "block_size", Value: gguf.U32(7)},
		{Key: p + "sample_from_anchor", Value: gguf.Bool(true)},
		{Key: p + "target_layers", Value: gguf.I32s(targetLayers)},
		{Key: p + "target_hidden_size", Value: gguf.U32(Th)},
		{Key: p + "target_block_count", Value: gguf.U32(9)},
		{Key: p + "markov_rank", Value: gguf.U32(R)},
		{Key: p + "attention.head_count", Value: gguf.U32(heads)},
		{Key: p + "attention.head_count_kv", Value: gguf.U32(1)},
		{Key: p + "attention.q_lora_rank", Value: gguf.U32(q)},
		{Key: p + "attention.kv_lora_rank", Value: gguf.U32(kv)},
		{Key: p + "attention.key_length", Value: gguf.U32(kv + rope)},
		{Key: p + "attention.value_length", Value: gguf.U32(kv)},
		{Key: p + "attention.key_length_mla", Value: gguf.U32(nope + rope)},
		{Key: p + "attention.value_length_mla", Value: gguf.U32(vd)},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-5)},
		{Key: p + "rope.dimension_count", Value: gguf.U32(rope)},
		{Key: p + "rope.freq_base", Value: gguf.F32(50000)},
		{Key: "tokenizer.ggml.model", Value: gguf.Str("gpt2")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strs(toks)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.I32s(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.Strs([]string{"t o"})},
		{Key: "tokenizer.ggml.mask_token_id", Value: gguf.U32(V - 1)},
	}
	var ts []gguf.TensorSpec
	add := func(name string, dims ...uint64) {
		typ := gguf.TypeBF16
		if len(dims) == 1 {
			typ = gguf.TypeF32
		}
		n, _ := gguf.TensorBytes(typ, dims)
		ts = append(ts, gguf.TensorSpec{Name: name, Type: typ, Dims: dims, Data: gguf.BytesData(make([]byte, n))})
	}
	add("fc.weight", 3*Th, H)
	add("enc.output_norm.weight", H)
	add("output_norm.weight", H)
	add("markov_w1.weight", R, V)
	add("markov_w2.weight", R, V)
	add("conf_proj.weight", H+R, 1)
	add("conf_proj.bias", 1)
	for i := range L {
		b := fmt.Sprintf("blk.%d.", i)
		add(b+"attn_norm.weight", H)
		add(b+"attn_q_a.weight", H, q)
		add(b+"attn_q_a_norm.weight", q)
		add(b+"attn_q_b.weight", q, heads*(nope+rope))
		add(b+"attn_kv_a_mqa.weight", H, kv+rope)
		add(b+"attn_kv_a_norm.weight", kv)
		add(b+"attn_k_b.weight", nope, kv, heads)
		add(b+"attn_v_b.weight", kv, vd, heads)
		add(b+"attn_output.weight", heads*vd, H)
		add(b+"ffn_norm.weight", H)
		add(b+"ffn_gate.weight", H, F)
		add(b+"ffn_up.weight", H, F)
		add(b+"ffn_down.weight", F, H)
	}
	return kvs, ts
}

func writeDraft(t *testing.T, dir, name string, layers []int32, dirty bool) string {
	t.Helper()
	kvs, ts := smallDraft(layers, dirty)
	p := filepath.Join(dir, name)
	if err := gguf.WriteFile(p, kvs, ts, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInspectTables(t *testing.T) {
	p := writeDraft(t, t.TempDir(), "d.gguf", []int32{2, 5, 9}, true)
	out, err := runInspectArgs(t, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"GGUF version", "little-endian", "dflash", "BF16", "F32",
		"dflash.target_layers", "[]i32", "[2, 5, 9]",
		`"tiny  draft "`,                                   // strings quoted, spaces kept
		"tokenizer.ggml.tokens", "[]str", `"ctl\x1b[2J\a"`, // control characters escaped
		"blk.1.attn_k_b.weight", "{6, 20, 2}",
		"Invalid UTF-8", `key "tokenizer.ggml.tokens"[4]: bytes 626164ff`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("raw control characters reached the output")
	}
	if strings.Contains(out, "tok10") {
		t.Errorf("arrays are not cut to their first items")
	}
}

func TestInspectFilters(t *testing.T) {
	p := writeDraft(t, t.TempDir(), "d.gguf", []int32{2, 5, 9}, false)
	out, err := runInspectArgs(t, "--keys", "tokenizer.*", "--tensors", "blk.1.*", "--group", "--data-offset", p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "dflash.block_count") || !strings.Contains(out, "tokenizer.ggml.model") {
		t.Errorf("--keys filter wrong")
	}
	if strings.Contains(out, "blk.0.") || strings.Contains(out, "fc.weight") || !strings.Contains(out, "blk.1: 13 tensors") {
		t.Errorf("--tensors/--group wrong:\n%s", out)
	}
	out, err = runInspectArgs(t, "--no-tensors", "--full-arrays", p)
	if err != nil || strings.Contains(out, "attn_norm") || !strings.Contains(out, "tok39") {
		t.Errorf("--no-tensors --full-arrays wrong (%v)", err)
	}
	if _, err := runInspectArgs(t, "--keys", "[", p); !errors.As(err, new(usageError)) {
		t.Errorf("bad glob: %v, want a usage error", err)
	}
	if _, err := runInspectArgs(t); !errors.As(err, new(usageError)) {
		t.Errorf("no argument: %v", err)
	}
}

func TestInspectJSON(t *testing.T) {
	p := writeDraft(t, t.TempDir(), "d.gguf", []int32{2, 5, 9}, true)
	out, err := runInspectArgs(t, "--json", "--check", p)
	if !errors.As(err, new(exitCodeError)) { // the token that is not UTF-8 fails the check
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != report.Schema || r.Format.Version != 3 || r.Format.Endianness != "little" || r.Summary.TensorCount != 33 ||
		r.Tensors == nil || len(*r.Tensors) != 33 || r.Check == nil || r.Check.Passed || len(r.Check.Problems) != 1 || len(r.InvalidUTF8) != 1 {
		t.Fatalf("report %+v", r)
	}
	// Values keep their types: u32 numbers, i32 arrays, strings, truncated arrays.
	var raw struct {
		Metadata []map[string]any `json:"metadata"`
	}
	json.Unmarshal([]byte(out), &raw)
	byKey := map[string]map[string]any{}
	for _, e := range raw.Metadata {
		byKey[e["key"].(string)] = e
	}
	if e := byKey["dflash.block_count"]; e["type"] != "u32" || e["value"] != 2.0 {
		t.Errorf("block_count entry %v", e)
	}
	if e := byKey["tokenizer.ggml.tokens"]; e["type"] != "arr" || e["elem_type"] != "str" || e["count"] != 40.0 || e["truncated"] != true || len(e["value"].([]any)) != 6 {
		t.Errorf("tokens entry %v", e)
	}
	if e := byKey["dflash.attention.layer_norm_rms_epsilon"]; e["type"] != "f32" || e["value"] != 1e-05 {
		t.Errorf("epsilon entry %v", e)
	}
}

// TestInspectCheckModelCard: the model card's metadata (seven target layers 3..9 for an
// fc that takes 3 layers' worth of inputs here, 5 in the real file) must fail --check
// with exit status 1 and an explanation.
func TestInspectCheckModelCard(t *testing.T) {
	p := writeDraft(t, t.TempDir(), "card.gguf", []int32{3, 4, 5, 6, 7, 8, 9}, false)
	out, err := runInspectArgs(t, "--check", "--no-tensors", p)
	var ee exitCodeError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("err = %v, want exit code 1", err)
	}
	for _, want := range []string{"Check (dflash rules): 1 problem", "lists 7 target layers", "takes 48 = 3 x 16", "wrong target layers"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rootCmd.SetOut(io.Discard)
	defer rootCmd.SetOut(nil)
	if code := execute([]string{"inspect", "--check", "--no-tensors", p}); code != exitFailure {
		t.Errorf("process exit code %d, want 1", code)
	}
	good := writeDraft(t, t.TempDir(), "good.gguf", []int32{2, 5, 9}, false)
	if code := execute([]string{"inspect", "--check", "--no-tensors", good}); code != exitOK {
		t.Errorf("valid file: exit code %d", code)
	}
}

func TestInspectSplitAndCompressed(t *testing.T) {
	dir := t.TempDir()
	kvs, ts := smallDraft([]int32{2, 5, 9}, false)
	paths, err := gguf.WriteSplit(filepath.Join(dir, "s.gguf"), kvs, ts, 0, 10, gguf.WriteOptions{})
	if err != nil || len(paths) != 4 {
		t.Fatalf("%v %v", paths, err)
	}
	out, err := runInspectArgs(t, "--check", paths[0])
	if err != nil || !strings.Contains(out, "split set") || !strings.Contains(out, "blk.1.ffn_down.weight") || !strings.Contains(out, "Check (dflash rules): passed") {
		t.Errorf("split: %v\n%s", err, out)
	}
	single := writeDraft(t, dir, "c.gguf", []int32{2, 5, 9}, false)
	raw, _ := os.ReadFile(single)
	var zbuf, gbuf bytes.Buffer
	zw, _ := zstd.NewWriter(&zbuf)
	zw.Write(raw)
	zw.Close()
	gw := gzip.NewWriter(&gbuf)
	gw.Write(raw)
	gw.Close()
	os.WriteFile(single+".zst", zbuf.Bytes(), 0o644)
	os.WriteFile(single+".gz", gbuf.Bytes(), 0o644)
	for _, p := range []string{single + ".zst", single + ".gz"} {
		out, err := runInspectArgs(t, "--check", p)
		if err != nil || !strings.Contains(out, "stream") || !strings.Contains(out, "unknown (read as a stream)") || !strings.Contains(out, "passed") {
			t.Errorf("%s: %v\n%s", p, err, out)
		}
	}
	bad := filepath.Join(dir, "bad.gguf.zst")
	os.WriteFile(bad, []byte("not zstd"), 0o644)
	if _, err := runInspectArgs(t, bad); err == nil {
		t.Errorf("corrupt .zst accepted")
	}
}

// TestInspectHTTP serves a file whose tensor data is far larger than its header and
// checks that inspect reads it with range requests, fetching little more than the header.
func TestInspectHTTP(t *testing.T) {
	dir := t.TempDir()
	kvs, ts := smallDraft([]int32{2, 5, 9}, false)
	big := make([]byte, 8<<20) // an 8 MB tensor the inspector must not download
	ts = append(ts, gguf.TensorSpec{Name: "token_embd.weight", Type: gguf.TypeI8, Dims: []uint64{1 << 20, 8}, Data: gguf.BytesData(big)})
	p := filepath.Join(dir, "remote.gguf")
	if err := gguf.WriteFile(p, kvs, ts, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "remote.gguf", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	out, err := runInspectArgs(t, "--json", srv.URL+"/remote.gguf")
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Format.Size == nil || *r.Format.Size != int64(len(data)) || r.Summary.TensorCount != 34 || r.Transfer == nil {
		t.Fatalf("report %+v", r)
	}
	if r.Transfer.Bytes > 256<<10 || r.Transfer.Bytes < r.Format.DataOffset {
		t.Errorf("fetched %d bytes of a %d-byte file (header %d)", r.Transfer.Bytes, len(data), r.Format.DataOffset)
	}
}

// Hand-built files from gguf/testdata: a big-endian file, a tensor of an unknown ggml
// type (shown with everything else; --check fails), and a malformed file (located error).
func TestInspectOddFiles(t *testing.T) {
	td := filepath.Join("..", "..", "gguf", "testdata")
	out, err := runInspectArgs(t, filepath.Join(td, "big_endian.gguf"))
	if err != nil || !strings.Contains(out, "big-endian (every number, tensor data included)") || !strings.Contains(out, "16909060") {
		t.Errorf("big-endian: %v\n%s", err, out)
	}
	unknown := filepath.Join(td, "err_unknown_type.gguf")
	out, err = runInspectArgs(t, unknown)
	if err != nil || !strings.Contains(out, "type(99)") || !strings.Contains(out, "Unsupported (1)") {
		t.Errorf("unknown type: %v\n%s", err, out)
	}
	if _, err := runInspectArgs(t, "--check", unknown); !errors.As(err, new(exitCodeError)) {
		t.Errorf("--check on an unknown type: %v", err)
	}
	_, err = runInspectArgs(t, filepath.Join(td, "err_bool.gguf"))
	var fe *gguf.FormatError
	if !errors.As(err, &fe) || fe.Offset != 37 || !strings.Contains(err.Error(), "err_bool.gguf") {
		t.Errorf("malformed file: %v", err)
	}
	if _, err := runInspectArgs(t, filepath.Join(td, "no-such-file.gguf")); err == nil {
		t.Errorf("missing file accepted")
	}
}

// TestInspectHTTPSplit reads a split set over HTTP given the first shard's URL.
func TestInspectHTTPSplit(t *testing.T) {
	dir := t.TempDir()
	kvs, ts := smallDraft([]int32{2, 5, 9}, false)
	paths, err := gguf.WriteSplit(filepath.Join(dir, "s.gguf"), kvs, ts, 0, 12, gguf.WriteOptions{})
	if err != nil || len(paths) != 3 {
		t.Fatal(paths, err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	out, err := runInspectArgs(t, "--check", "--no-tensors", srv.URL+"/"+filepath.Base(paths[0]))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"split set over http range requests", "shards          │ 3", "Check (dflash rules): passed", "HTTP range requests"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestInspectStdinAndMisnamed: "-" reads a GGUF from standard input; a GGUF named .gguf.gz
// is an error that names the file and says what was expected (regression: a bare "gzip:
// invalid header").
func TestInspectStdinAndMisnamed(t *testing.T) {
	dir := t.TempDir()
	p := writeDraft(t, dir, "d.gguf", []int32{2, 5, 9}, false)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := newInspectCmd()
	cmd.SetIn(bytes.NewReader(raw))
	out, err := execFresh(t, cmd, "--check", "--no-tensors", "-")
	if err != nil || !strings.Contains(out, "stream") || !strings.Contains(out, "Check (dflash rules): passed") {
		t.Errorf("stdin: %v\n%s", err, out)
	}
	gz := filepath.Join(dir, "d.gguf.gz")
	os.WriteFile(gz, raw, 0o644)
	_, err = runInspectArgs(t, gz)
	want := "gguf: " + gz + `: offset 0: gzip header: not gzip data: the file starts with 47 47 55 46, want 1f 8b; it is an uncompressed GGUF (starts with "GGUF"): drop the .gz from its name`
	if err == nil || err.Error() != want {
		t.Errorf("misnamed .gz: %v\nwant %s", err, want)
	}
}
