package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/memory"
	"github.com/dspark-dev/dspark/internal/draftfixture"
)

func build(t *testing.T, kvs []gguf.KV, ts []gguf.TensorSpec, opt Options) (*Report, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, ts, 0); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), gguf.Name("m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Build(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return r, js
}

func TestJSONValues(t *testing.T) {
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("x")},
		{Key: "nan", Value: gguf.F32(float32(math.NaN()))},
		{Key: "inf", Value: gguf.F64(math.Inf(-1))},
		{Key: "big", Value: gguf.U64(math.MaxUint64)},
		{Key: "f32s", Value: gguf.F32s([]float32{0.1, float32(math.Inf(1))})},
		{Key: "bytes", Value: gguf.U8s([]uint8{1, 255})},
		{Key: "long", Value: gguf.I32s([]int32{1, 2, 3, 4, 5, 6, 7, 8})},
	}
	ts := []gguf.TensorSpec{{Name: "w", Type: gguf.TypeQ8_0, Dims: []uint64{64, 2}, Data: gguf.BytesData(make([]byte, 136))},
		{Name: "b", Type: gguf.TypeF32, Dims: []uint64{2}, Data: gguf.BytesData(make([]byte, 8))}}
	r, js := build(t, kvs, ts, Options{Source: "file"})
	s := string(js)
	for _, want := range []string{
		`"key":"nan","type":"f32","count":1,"value":"NaN"`,
		`"key":"inf","type":"f64","count":1,"value":"-Inf"`,
		`"value":18446744073709551615`,
		`"value":[0.1,"+Inf"]`, // f32 shortest form, not 0.10000000149011612
		`"value":[1,255]`,      // not base64
		`"count":8,"value":[1,2,3,4,5,6],"truncated":true`,
		`"dims":[64,2]`, `"type":"Q8_0","type_id":8`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON lacks %s\n%s", want, s)
		}
	}
	// 128 Q8_0 elements in 136 bytes + 2 F32 in 8: (136+8)*8/130 bits per weight.
	if want := math.Round(144*8/130.0*1e4) / 1e4; r.Summary.BitsPerWeight != want || r.Summary.Parameters != 130 {
		t.Errorf("bpw %v params %d, want %v 130", r.Summary.BitsPerWeight, r.Summary.Parameters, want)
	}
	if r.Summary.ByType[0].Type != "Q8_0" || r.Summary.ByType[0].Bytes != 136 {
		t.Errorf("by type %+v", r.Summary.ByType)
	}
	_, full := build(t, kvs, ts, Options{FullArrays: true})
	if !strings.Contains(string(full), `"value":[1,2,3,4,5,6,7,8]}`) {
		t.Errorf("--full-arrays did not give the whole array")
	}
}

// TestSchemaDocumented checks that every JSON field a report can contain is documented in
// docs/inspect-json.md, so the document cannot fall behind the code.
func TestSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/inspect-json.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_0-9]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	for _, m := range regexp.MustCompile("`\\{([a-z_, ]+)\\}`").FindAllStringSubmatch(string(doc), -1) {
		for _, k := range strings.Split(m[1], ",") {
			documented[strings.TrimSpace(k)] = true
		}
	}
	kvs := []gguf.KV{{Key: "general.architecture", Value: gguf.Str("x")}, {Key: "a", Value: gguf.Strs([]string{"\xff"})}}
	ts := []gguf.TensorSpec{{Name: "w", Type: gguf.TypeF32, Dims: []uint64{2}, Data: gguf.BytesData(make([]byte, 8))}}
	r, _ := build(t, kvs, ts, Options{Check: true})
	r.Transfer = &Transfer{}
	r.Unsupported = []string{"x"}
	off := int64(1)
	r.Check.Problems = append(r.Check.Problems, Problem{Subject: "s", Message: "m", File: "t", Offset: &off})
	js, _ := json.Marshal(r)
	// A recognized draft (every field of the draft view, the loader verdicts, warnings).
	df, err := draftfixture.Upstream(true).Parse()
	if err != nil {
		t.Fatal(err)
	}
	tf, err := draftfixture.Target().Parse()
	if err != nil {
		t.Fatal(err)
	}
	dr, err := Build(df, Options{Check: true, Target: tf, Memory: &memory.Options{Ctx: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if !dr.Draft.Recognized || len(dr.Check.Loaders) == 0 || len(dr.Check.Warnings) == 0 || dr.Check.Pair == nil || dr.Memory == nil {
		t.Fatalf("draft report: %+v", dr.Check)
	}
	djs, _ := json.Marshal(dr)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !documented[k] {
					t.Errorf("JSON field %q is not documented in docs/inspect-json.md", k)
				}
				if k != "value" {
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, b := range [][]byte{js, djs} {
		var v any
		json.Unmarshal(b, &v)
		walk(v)
	}
	if len(documented) < 40 {
		t.Errorf("only %d documented fields found; the doc's tables changed shape", len(documented))
	}
}

func TestSafeAndNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"blk.0.attn_q.weight": "blk.0.attn_q.weight",
		"a\x1b[31mb":          `"a\x1b[31mb"`,
		"tab\there":           `"tab\there"`,
		"\xff":                `"\xff"`,
		"你好":                  "你好",
	} {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %s, want %s", in, got, want)
		}
	}
	if Commas(0) != "0" || Commas(999) != "999" || Commas(1000) != "1,000" || Commas(3562312961) != "3,562,312,961" {
		t.Errorf("Commas wrong")
	}
	if HumanBytes(7124633450) != "6.64 GiB" || HumanBytes(512) != "512 B" || HumanCount(3562312961) != "3.56 B" {
		t.Errorf("human units wrong: %s %s %s", HumanBytes(7124633450), HumanBytes(512), HumanCount(3562312961))
	}
	if err := ValidateGlob("["); err == nil {
		t.Errorf("bad glob accepted")
	}
}

func TestTextEscapes(t *testing.T) {
	kvs := []gguf.KV{{Key: "general.architecture", Value: gguf.Str("x")}, {Key: "evil\x1b]0;title\x07", Value: gguf.Str("\x1b[2J")}}
	ts := []gguf.TensorSpec{{Name: "t\r", Type: gguf.TypeF32, Dims: []uint64{1}, Data: gguf.BytesData(make([]byte, 4))}}
	r, _ := build(t, kvs, ts, Options{Check: true})
	var out bytes.Buffer
	if err := r.WriteText(&out, TextOptions{Group: true}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\r") {
		t.Errorf("control characters reached the terminal:\n%q", out.String())
	}
	for _, want := range []string{`"evil\x1b]0;title\a"`, `"\x1b[2J"`, `"t\r"`, "(global): 1 tensors", "Check (generic rules): passed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
}
