package convert

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/synth"
)

// lintCheck is dspark inspect --check's lint, run on every converted file.
func lintCheck(f *gguf.File) []string {
	var out []string
	for _, pr := range lint.Check(f) {
		out = append(out, pr.String())
	}
	return out
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenKey is one metadata key as recorded in a golden file. Arrays are recorded by their
// length, the sha256 of their full rendering, and their first items.
type goldenKey struct {
	Key    string `json:"key"`
	Type   string `json:"type"`
	Value  string `json:"value"`
	Len    int    `json:"len,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

type goldenTensor struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Dims   []uint64 `json:"dims"`
	SHA256 string   `json:"sha256"`
}

type golden struct {
	Keys    []goldenKey    `json:"keys"`
	Tensors []goldenTensor `json:"tensors"`
}

// goldenOf records every key and every tensor (with the sha256 of its bytes) of a file.
func goldenOf(t *testing.T, path string) *golden {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := &golden{}
	for _, kv := range f.KVs {
		k := goldenKey{Key: kv.Key, Type: kv.Value.TypeName(), Value: kv.Value.Format(8, 80)}
		if kv.Value.Type() == gguf.ValueArray {
			sum := sha256.Sum256([]byte(kv.Value.Format(-1, -1)))
			k.Len, k.SHA256 = kv.Value.Len(), hex.EncodeToString(sum[:])
		}
		g.Keys = append(g.Keys, k)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		g.Tensors = append(g.Tensors, goldenTensor{ti.Name, ti.Type.String(), ti.Dims, hex.EncodeToString(sum[:])})
	}
	return g
}

// TestGolden converts tiny synthetic checkpoints of every supported variant and compares
// every key, every tensor's name/type/dims and the sha256 of its bytes with
// testdata/golden/<case>.json (go test -run TestGolden -update rewrites them). Each output
// must also pass Verify (bytes re-derived from the source, keys against the plan).
func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t testing.TB) string
		opt  Options
	}{
		{"target-k2-auto", baseTarget, Options{}},
		{"target-noqlora-tied", func(t testing.TB) string {
			return targetFixture(t, "target-noqlora-tied", synth.TargetOptions{Seed: 3, NoQLoRA: true, Tied: true}, "")
		}, Options{}},
		{"target-dense-f16", func(t testing.TB) string {
			return targetFixture(t, "target-dense", synth.TargetOptions{Seed: 4, Dense: true}, "")
		}, Options{OutType: F16}},
		{"target-fp8", func(t testing.TB) string {
			return targetFixture(t, "target-fp8", synth.TargetOptions{Seed: 5, FP8: true, FP8Block: 16}, "")
		}, Options{}},
		{"target-group-q8_0", func(t testing.TB) string {
			return targetFixture(t, "target-group", synth.TargetOptions{Seed: 6, GroupRouting: true}, "")
		}, Options{OutType: Q8_0}},
		{"qwen3", baseQwen3, Options{}},
		{"qwen3-tied-q8_0", func(t testing.TB) string {
			return qwen3Fixture(t, "qwen3-tied-golden", synth.Qwen3Options{Seed: 8, Tied: true})
		}, Options{OutType: Q8_0}},
		{"qwen35", baseQwen35, Options{}},
		{"qwen35moe-mtp-wrapper-q8_0", qwen35MoEWrapped, Options{OutType: Q8_0}},
		{"draft-dspark", baseDraft, Options{}},
		{"draft-dflash-names-keep-embd", func(t testing.TB) string {
			return draftFixture(t, "draft-dflash", synth.DraftOptions{Seed: 7, TargetDir: baseTarget(t), DFlashNames: true}, "")
		}, Options{KeepEmbeddings: true}},
		{"draft-no-target-f32", baseDraft, Options{OutType: F32}},
		{"draft-gqa-dspark", gqaDraft, Options{}},
		{"draft-gqa-dspark-keep-tables", gqaDraft, Options{KeepEmbeddings: true}},
		{"draft-gqa-dflash-zlab", gqaDFlash, Options{}},
		{"draft-gqa-causal-mqa-dspark-names-f16", gqaOddDims, Options{OutType: F16}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			opt := c.opt
			if c.name != "draft-no-target-f32" && filepath.Base(dir)[:5] == "draft" {
				opt.Target = baseTarget(t)
			}
			p, out := convertTo(t, dir, opt)
			rep, err := p.Verify(out, lintCheck)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatal(rep.Verdict())
			}
			got := goldenOf(t, out)
			b, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			path := filepath.Join("testdata", "golden", c.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
			}
			if !bytes.Equal(want, b) {
				var w golden
				if err := json.Unmarshal(want, &w); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				diffGolden(t, &w, got)
				t.Fatalf("%s differs from the converted file (see above)", path)
			}
		})
	}
}

func diffGolden(t *testing.T, want, got *golden) {
	wk := map[string]goldenKey{}
	for _, k := range want.Keys {
		wk[k.Key] = k
	}
	for _, k := range got.Keys {
		if w, ok := wk[k.Key]; !ok {
			t.Errorf("key %s is new", k.Key)
		} else if w != k {
			t.Errorf("key %s: got %+v, want %+v", k.Key, k, w)
		}
		delete(wk, k.Key)
	}
	for k := range wk {
		t.Errorf("key %s is missing", k)
	}
	if len(want.Tensors) != len(got.Tensors) {
		t.Errorf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for i := range min(len(want.Tensors), len(got.Tensors)) {
		w, g := want.Tensors[i], got.Tensors[i]
		if w.Name != g.Name || w.Type != g.Type || w.SHA256 != g.SHA256 || len(w.Dims) != len(g.Dims) {
			t.Errorf("tensor %d: got %+v, want %+v", i, g, w)
		}
	}
}
