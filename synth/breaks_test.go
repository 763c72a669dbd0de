package synth

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/safetensors"
)

// checkpointOf writes a tiny target or draft with the break and returns its dir.
func checkpointOf(t *testing.T, kind, brk string) string {
	t.Helper()
	dir := filepath.Join(tempDir(t), kind)
	var err error
	if kind == "target" {
		_, err = Target(dir, TargetOptions{Preset: Tiny, Seed: 1}, WriteOptions{Break: brk})
	} else {
		_, err = Draft(dir, DraftOptions{Preset: Tiny, Seed: 1}, WriteOptions{Break: brk})
	}
	if err != nil {
		t.Fatalf("%s %s: %v", kind, brk, err)
	}
	return dir
}

func open(t *testing.T, dir string) *safetensors.Checkpoint {
	t.Helper()
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func jsonFile(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBreaks(t *testing.T) {
	for _, kind := range []string{"target", "dspark"} {
		prefix := ""
		if kind == "target" {
			prefix = "model."
		}
		t.Run(kind+"/"+BreakMissingTensor, func(t *testing.T) {
			ck := open(t, checkpointOf(t, kind, BreakMissingTensor))
			if _, ok := ck.Tensor(prefix + "layers.1.self_attn.kv_a_layernorm.weight"); ok {
				t.Fatal("tensor still present")
			}
			if _, ok := ck.Tensor(prefix + "layers.0.self_attn.kv_a_layernorm.weight"); !ok {
				t.Fatal("the layer-0 twin is gone too")
			}
		})
		t.Run(kind+"/"+BreakExtraTensor, func(t *testing.T) {
			ck := open(t, checkpointOf(t, kind, BreakExtraTensor))
			ti, ok := ck.Tensor(prefix + "layers.0.mlp.extra_proj.weight")
			if !ok || !slices.Equal(ti.Shape, []int64{8, 64}) {
				t.Fatalf("extra tensor %v", ti)
			}
		})
		t.Run(kind+"/"+BreakWrongShape, func(t *testing.T) {
			ck := open(t, checkpointOf(t, kind, BreakWrongShape))
			ti, _ := ck.Tensor(prefix + "layers.0.self_attn.kv_b_proj.weight")
			if ti == nil || !slices.Equal(ti.Shape, []int64{24, 112}) { // config says [4*(16+12), 24]
				t.Fatalf("kv_b_proj %v, want transposed [24 112]", ti)
			}
			ti, _ = ck.Tensor(prefix + "layers.1.self_attn.kv_b_proj.weight")
			if !slices.Equal(ti.Shape, []int64{112, 24}) {
				t.Fatalf("layer 1 kv_b_proj %v changed too", ti.Shape)
			}
		})
		t.Run(kind+"/"+BreakWrongDtype, func(t *testing.T) {
			ck := open(t, checkpointOf(t, kind, BreakWrongDtype))
			ti, _ := ck.Tensor(prefix + "layers.0.input_layernorm.weight")
			if ti == nil || ti.Dtype != "I32" || !slices.Equal(ti.Shape, []int64{64}) {
				t.Fatalf("input_layernorm %v, want I32 [64]", ti)
			}
		})
		t.Run(kind+"/"+BreakConfigRoster, func(t *testing.T) {
			dir := checkpointOf(t, kind, BreakConfigRoster)
			ck := open(t, dir)
			maxLayer := -1
			for _, n := range ck.Names() {
				var l int
				if i := strings.Index(n, "layers."); i >= 0 {
					rest := n[i+len("layers."):]
					for l = 0; rest[0] >= '0' && rest[0] <= '9'; rest = rest[1:] {
						l = l*10 + int(rest[0]-'0')
					}
					maxLayer = max(maxLayer, l)
				}
			}
			cfgLayers := int(jsonFile(t, filepath.Join(dir, "config.json"))["num_hidden_layers"].(float64))
			if cfgLayers != maxLayer+2 {
				t.Fatalf("config says %d layers, weights hold %d", cfgLayers, maxLayer+1)
			}
		})
		t.Run(kind+"/"+BreakTruncatedShard, func(t *testing.T) {
			dir := checkpointOf(t, kind, BreakTruncatedShard)
			if _, err := safetensors.OpenCheckpoint(dir); err == nil {
				t.Fatal("truncated checkpoint opens")
			}
			shards, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
			if len(shards) < 2 {
				t.Fatalf("shards %v", shards)
			}
			slices.Sort(shards)
			for i, s := range shards {
				_, err := safetensors.Open(s)
				if (err != nil) != (i == len(shards)-1) {
					t.Errorf("shard %s: open error %v (only the last must fail)", s, err)
				}
			}
		})
		t.Run(kind+"/"+BreakIndexMissingShard, func(t *testing.T) {
			dir := checkpointOf(t, kind, BreakIndexMissingShard)
			if _, err := safetensors.OpenCheckpoint(dir); err == nil {
				t.Fatal("checkpoint with a missing shard opens")
			}
			idx := jsonFile(t, filepath.Join(dir, "model.safetensors.index.json"))
			missing := 0
			seen := map[string]bool{}
			for _, f := range idx["weight_map"].(map[string]any) {
				if seen[f.(string)] {
					continue
				}
				seen[f.(string)] = true
				if _, err := os.Stat(filepath.Join(dir, f.(string))); err != nil {
					missing++
				}
			}
			if missing != 1 || len(seen) < 2 {
				t.Fatalf("%d of %d shards missing, want 1", missing, len(seen))
			}
		})
	}
}

func TestVocabMismatchTarget(t *testing.T) {
	dir := checkpointOf(t, "target", BreakVocabMismatch)
	vocab := int(jsonFile(t, filepath.Join(dir, "config.json"))["vocab_size"].(float64))
	ck := open(t, dir)
	ti, _ := ck.Tensor("model.embed_tokens.weight")
	ranks, added := readTokenizer(t, dir)
	tokSize := len(ranks)
	for id := range added {
		tokSize = max(tokSize, id+1)
	}
	rows := int(ti.Shape[0])
	if vocab != 1024 || rows != 1024+64 || tokSize != 1024+32 {
		t.Fatalf("vocab_size %d, embedding rows %d, tokenizer size %d; want 1024, 1088, 1056", vocab, rows, tokSize)
	}
}

func TestVocabMismatchDraft(t *testing.T) {
	dir := checkpointOf(t, "dspark", BreakVocabMismatch)
	cfg := jsonFile(t, filepath.Join(dir, "config.json"))
	ck := open(t, dir)
	ti, _ := ck.Tensor("embed_tokens.weight")
	mk, _ := ck.Tensor("markov_head.markov_w2.weight")
	if cfg["vocab_size"].(float64) != 1088 || cfg["draft_vocab_size"].(float64) != 1088 || ti.Shape[0] != 1024 || mk.Shape[0] != 1024 {
		t.Fatalf("config vocab %v, embedding rows %d, markov rows %d", cfg["vocab_size"], ti.Shape[0], mk.Shape[0])
	}
}

func TestShardBreakNeedsShards(t *testing.T) {
	// A shard size that would give a single shard is lowered to a third of the data, so the
	// break still has shards to break.
	dir := tempDir(t)
	res, err := Draft(dir, DraftOptions{Preset: Tiny, Seed: 1}, WriteOptions{Break: BreakTruncatedShard, ShardSize: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) < 4 { // >= 2 shards, index, config.json
		t.Fatalf("files %v", res.Files)
	}
}
