package calibrate

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

func testFile() *File {
	return &File{Format: Format, Version: Version, DraftSHA256: strings.Repeat("ab", 32), BlockSize: 3, Positions: 3,
		Prompts: "test", Tokens: 16, Seed: 7, Source: "test calibration",
		Calibrations: []Entry{
			{Sampling: Sampling{}, Temperatures: []float64{1.5, 0.75, 2}, Rounds: 10, HeldOutRounds: 5, ECEBefore: []float64{0.2, 0.3, 0.4}, ECEAfter: []float64{0.01, 0.02, 0.03}},
			{Sampling: Sampling{Temperature: 0.8, TopP: 0.95}, Temperatures: []float64{1.1, 1.2, 1.3}},
		}}
}

func TestFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	f := testFile()
	if err := WriteFile(path, f, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, f, false); err == nil {
		t.Error("second write without overwrite: no error")
	}
	g, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g.Source, f.Source = "", ""
	a, _ := json.Marshal(f)
	b, _ := json.Marshal(g)
	if !bytes.Equal(a, b) {
		t.Errorf("round trip changed the file:\n%s\n%s", a, b)
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	good, _ := json.Marshal(testFile())
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(good, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	temps := func(v ...any) []byte {
		return edit(func(m map[string]any) { m["calibrations"].([]any)[0].(map[string]any)["temperatures"] = v })
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"syntax", []byte(`{"format": "dspark-calibration",`), "byte"},
		{"trailing", append(append([]byte{}, good...), []byte(` {}`)...), "data after"},
		{"type", []byte(`{"format": 3}`), `field "format"`},
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), "unknown field"},
		{"format", edit(func(m map[string]any) { m["format"] = "other" }), "format"},
		{"version", edit(func(m map[string]any) { m["version"] = 9 }), "version 9"},
		{"block", edit(func(m map[string]any) { m["block_size"] = 0 }), "block_size 0"},
		{"positions", edit(func(m map[string]any) { m["positions"] = 4 }), "positions 4"},
		{"none", edit(func(m map[string]any) { m["calibrations"] = []any{} }), "no calibrations"},
		{"count", temps(1.0, 2.0), "2 temperatures, want one per draft position (positions 3)"},
		{"zero", temps(1.0, 0.0, 2.0), "temperatures[1] = 0"},
		{"negative", temps(1.0, -1.0, 2.0), "temperatures[1] = -1"},
		{"huge", temps(1.0, 1e9, 2.0), "temperatures[1] = 1e+09"},
		{"NaN", []byte(strings.Replace(string(temps(1.0, 7.25, 2.0)), "7.25", "NaN", 1)), "invalid character"},
		{"sampling", edit(func(m map[string]any) {
			m["calibrations"].([]any)[1].(map[string]any)["sampling"].(map[string]any)["top_p"] = 2.0
		}), "top-p"},
		{"duplicate", edit(func(m map[string]any) {
			c := m["calibrations"].([]any)
			m["calibrations"] = append(c, c[0])
		}), "a second calibration for greedy decoding"},
	} {
		_, err := Parse(c.data, "x.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "x.json") {
			t.Errorf("%s: error %v, want one naming x.json and containing %q", c.name, err, c.want)
		}
	}
	if _, err := Parse(good, "x.json"); err != nil {
		t.Errorf("the good file: %v", err)
	}
	// NaN cannot be written as JSON; a NaN in memory is refused by Validate.
	f := testFile()
	f.Calibrations[0].Temperatures[2] = math.NaN()
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "temperatures[2] = NaN") {
		t.Errorf("NaN temperature: %v", err)
	}
}

func TestCheck(t *testing.T) {
	f := testFile()
	f.CopySHA256 = strings.Repeat("cd", 32)
	d := Draft{Path: "d.gguf", SHA256: f.DraftSHA256, BlockSize: 3, MaxDrafts: 3}
	if err := f.Check(d); err != nil {
		t.Fatal(err)
	}
	d.SHA256 = f.CopySHA256 // the GGUF copy with the keys is the same draft
	if err := f.Check(d); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d    Draft
		want string
	}{
		{Draft{Path: "d.gguf", SHA256: strings.Repeat("00", 32), BlockSize: 3, MaxDrafts: 3}, "fitted for another draft"},
		{Draft{Path: "d.gguf", SHA256: f.DraftSHA256, BlockSize: 4, MaxDrafts: 3}, "block size 3"},
		{Draft{Path: "d.gguf", SHA256: f.DraftSHA256, BlockSize: 3, MaxDrafts: 2}, "proposes 2"},
	} {
		if err := f.Check(c.d); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "d.gguf") {
			t.Errorf("%+v: %v, want an error containing %q", c.d, err, c.want)
		}
	}
	// A calibration read from the draft's own keys is not checked by digest.
	if err := f.Check(Draft{Path: "d.gguf", BlockSize: 3, MaxDrafts: 3}); err != nil {
		t.Error(err)
	}
}

func TestSelect(t *testing.T) {
	f := testFile()
	f.Calibrations = append(f.Calibrations, Entry{Sampling: Sampling{Temperature: 1.2}, Temperatures: []float64{1, 1, 1}})
	for _, c := range []struct {
		s     Sampling
		want  Sampling
		exact bool
	}{
		{Sampling{}, Sampling{}, true},
		{Sampling{Temperature: 0.8, TopP: 0.95}, Sampling{Temperature: 0.8, TopP: 0.95}, true},
		{Sampling{Temperature: 0.8}, Sampling{Temperature: 0.8, TopP: 0.95}, false},
		{Sampling{Temperature: 1.1}, Sampling{Temperature: 1.2}, false},
		{Sampling{Temperature: 0.1}, Sampling{Temperature: 0.8, TopP: 0.95}, false}, // sampled stays sampled
	} {
		e, exact := f.Select(c.s)
		if e.Sampling != c.want || exact != c.exact {
			t.Errorf("Select(%+v) = %+v (exact %v), want %+v (%v)", c.s, e.Sampling, exact, c.want, c.exact)
		}
	}
	g := testFile()
	g.Calibrations = g.Calibrations[1:] // sampled only: greedy takes it
	if e, exact := g.Select(Sampling{}); exact || e.Sampling.Temperature != 0.8 {
		t.Errorf("greedy from a sampled-only file: %+v", e.Sampling)
	}
}

// writeTestGGUF writes a small GGUF with a few keys and tensors of distinct bytes.
func writeTestGGUF(t *testing.T, path string, extra ...gguf.KV) *gguf.File {
	t.Helper()
	kvs := append([]gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash")},
		{Key: "dflash.block_size", Value: gguf.U32(3)},
		{Key: "general.alignment", Value: gguf.U32(64)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strs([]string{"a", "b", "c"})},
	}, extra...)
	a := make([]byte, 4*6)
	b := make([]byte, 2*10)
	for i := range a {
		a[i] = byte(i*7 + 1)
	}
	for i := range b {
		b[i] = byte(255 - i)
	}
	tensors := []gguf.TensorSpec{
		{Name: "fc.weight", Type: gguf.TypeF32, Dims: []uint64{3, 2}, Data: gguf.BytesData(a)},
		{Name: "conf_proj.weight", Type: gguf.TypeF16, Dims: []uint64{10}, Data: gguf.BytesData(b)},
	}
	if err := gguf.WriteFile(path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestGGUFCopy(t *testing.T) {
	dir := t.TempDir()
	src := writeTestGGUF(t, filepath.Join(dir, "d.gguf"))
	if _, ok, err := FromGGUF(src); ok || err != nil {
		t.Fatalf("a draft without calibration: ok %v, err %v", ok, err)
	}
	f := testFile()
	dst := filepath.Join(dir, "d.calibrated.gguf")
	if err := WriteGGUF(src, dst, f, false); err != nil {
		t.Fatal(err)
	}
	c, err := gguf.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Every key of the source, in order and equal, then ours; every tensor byte for byte.
	for i, kv := range src.KVs {
		if c.KVs[i].Key != kv.Key || !gguf.Equal(c.KVs[i].Value, kv.Value) {
			t.Errorf("key %d: %s = %v, want %s = %v", i, c.KVs[i].Key, c.KVs[i].Value, kv.Key, kv.Value)
		}
	}
	if c.Alignment != 64 || len(c.Tensors) != len(src.Tensors) {
		t.Fatalf("alignment %d, %d tensors", c.Alignment, len(c.Tensors))
	}
	for i := range src.Tensors {
		a, _ := src.TensorData(&src.Tensors[i])
		b, _ := c.TensorData(&c.Tensors[i])
		if !bytes.Equal(a, b) || c.Tensors[i].Name != src.Tensors[i].Name || c.Tensors[i].Type != src.Tensors[i].Type {
			t.Errorf("tensor %s differs in the copy", src.Tensors[i].Name)
		}
	}
	got, ok, err := FromGGUF(c)
	if !ok || err != nil {
		t.Fatalf("FromGGUF: ok %v, %v", ok, err)
	}
	for i, e := range f.Calibrations {
		g := got.Calibrations[i]
		if g.Sampling != e.Sampling || !equalFloats(g.Temperatures, e.Temperatures) || !equalFloats(g.ECEAfter, e.ECEAfter) ||
			g.Rounds != e.Rounds || g.HeldOutRounds != e.HeldOutRounds {
			t.Errorf("entry %d: %+v, want %+v", i, g, e)
		}
	}
	if got.DraftSHA256 != f.DraftSHA256 || got.BlockSize != 3 || got.Positions != 3 {
		t.Errorf("read back %+v", got)
	}
	// Writing again from the copy replaces the keys instead of adding a second set.
	f2 := testFile()
	f2.Calibrations = f2.Calibrations[:1]
	dst2 := filepath.Join(dir, "again.gguf")
	if err := WriteGGUF(c, dst2, f2, false); err != nil {
		t.Fatal(err)
	}
	c2, err := gguf.Open(dst2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, _, err := FromGGUF(c2); err != nil || len(got.Calibrations) != 1 {
		t.Errorf("rewritten copy: %v, %+v", err, got)
	}
	if len(c2.KVs) != len(src.KVs)+len(f2.Keys()) {
		t.Errorf("rewritten copy has %d keys, want %d", len(c2.KVs), len(src.KVs)+len(f2.Keys()))
	}
	// No overwrite without asking.
	if err := WriteGGUF(src, dst, f, false); err == nil {
		t.Error("overwrote an existing copy")
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

func TestFromGGUFRefusesBadKeys(t *testing.T) {
	dir := t.TempDir()
	good := testFile().Keys()
	replace := func(key string, v gguf.Value) []gguf.KV {
		out := make([]gguf.KV, 0, len(good))
		for _, kv := range good {
			if kv.Key == KeyPrefix+key {
				kv.Value = v
			}
			out = append(out, kv)
		}
		return out
	}
	drop := func(key string) []gguf.KV {
		var out []gguf.KV
		for _, kv := range good {
			if kv.Key != KeyPrefix+key {
				out = append(out, kv)
			}
		}
		return out
	}
	for i, c := range []struct {
		name string
		kvs  []gguf.KV
		want string
	}{
		{"NaN", replace("0.temperatures", gguf.F64s([]float64{1, math.NaN(), 1})), "element 1 (byte"},
		{"zero", replace("0.temperatures", gguf.F64s([]float64{1, 1, 0})), "element 2"},
		{"count", replace("0.temperatures", gguf.F64s([]float64{1, 1})), "2 temperatures"},
		{"type", replace("0.temperatures", gguf.F32s([]float32{1, 1, 1})), "has type []f32"},
		{"missing", drop("1.temperatures"), "1.temperatures"},
		{"version", replace("version", gguf.U32(7)), "version 7"},
		{"orphan", drop("version"), "not a calibration dspark wrote"},
		{"many", replace("count", gguf.U32(1000)), "at most 64"},
	} {
		path := filepath.Join(dir, c.name+".gguf")
		g := writeTestGGUF(t, path, c.kvs...)
		_, _, err := FromGGUF(g)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%d %s: %v, want an error naming %s and containing %q", i, c.name, err, path, c.want)
		}
	}
}

func TestFileSHA256(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("abc"), 0o644)
	os.WriteFile(b, []byte(""), 0o644)
	// SHA-256("abc"), a published test vector.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got, err := FileSHA256(a, b); err != nil || got != want {
		t.Errorf("FileSHA256 = %s, %v; want %s", got, err, want)
	}
	if _, err := FileSHA256(filepath.Join(dir, "none")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestDiagram(t *testing.T) {
	trueT := []float64{1.7, 1.4, 2.2}
	held := synthetic(4, 3000, trueT, 2.2, 1.2)
	d := &Diagram{Title: "reliability of the survival predictions (held-out prompts)", Sections: []Section{
		{"greedy decoding", Evaluate(held, Fit(held, 3, Grid()))},
		{"temperature 0.8", Evaluate(held, []float64{1.5, 1.5, 1.5})},
	}}
	var svg bytes.Buffer
	if err := d.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML with a circle per non-empty bin and the panels' titles.
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	circles, texts := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "circle":
				circles++
			case "text":
				texts++
			}
		}
	}
	want := 2 // the legend
	ps, _ := d.panels()
	for _, p := range ps {
		for _, bs := range [][]Bin{p.before, p.after} {
			for _, b := range bs {
				if b.Count > 0 {
					want++
				}
			}
		}
	}
	if circles != want || texts < 2*4*(len(trueT)+1) || !strings.Contains(svg.String(), "position 2") || !strings.Contains(svg.String(), "temperature 0.8") {
		t.Errorf("SVG has %d circles (want %d) and %d texts", circles, want, texts)
	}
	var pb bytes.Buffer
	if err := d.WritePNG(&pb); err != nil {
		t.Fatal(err)
	}
	pngBytes := bytes.Clone(pb.Bytes())
	img, err := png.Decode(&pb)
	if err != nil {
		t.Fatal(err)
	}
	w, h := d.size()
	if img.Bounds().Dx() != int(w) || img.Bounds().Dy() != int(h) {
		t.Errorf("PNG is %v, want %vx%v", img.Bounds(), w, h)
	}
	// Both series are drawn: pixels of the before and the after colour exist.
	var red, blue int
	for y := 0; y < img.Bounds().Dy(); y++ {
		for x := 0; x < img.Bounds().Dx(); x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			switch {
			case r>>8 == uint32(colBefore.R) && g>>8 == uint32(colBefore.G) && b>>8 == uint32(colBefore.B):
				red++
			case r>>8 == uint32(colAfter.R) && g>>8 == uint32(colAfter.G) && b>>8 == uint32(colAfter.B):
				blue++
			}
		}
	}
	if red < 50 || blue < 50 {
		t.Errorf("PNG has %d pixels of the before colour and %d of the after colour", red, blue)
	}
	if os.Getenv("DSPARK_WRITE_DIAGRAM") != "" {
		os.WriteFile("/tmp/diagram.png", pngBytes, 0o644)
		os.WriteFile("/tmp/diagram.svg", svg.Bytes(), 0o644)
	}
}

func FuzzParse(f *testing.F) {
	good, _ := json.Marshal(testFile())
	f.Add(good)
	f.Add([]byte(`{"format":"dspark-calibration","version":1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if c.Validate() != nil {
			t.Fatal("Parse accepted a file Validate refuses")
		}
		for _, e := range c.Calibrations {
			for _, temp := range e.Temperatures {
				if !(temp > 0) || math.IsInf(temp, 0) {
					t.Fatalf("accepted temperature %v", temp)
				}
			}
		}
	})
}
