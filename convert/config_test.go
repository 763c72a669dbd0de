package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// k3Config is the K3 DSpark config.json of dspark-k3.md section 2 (DSpark schema).
const k3Config = `{
  "architectures": ["K3DSparkModel"], "model_type": "k3_dspark",
  "hidden_size": 7168, "intermediate_size": 14336, "num_hidden_layers": 5,
  "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
  "mla_use_nope": false, "mla_use_output_gate": false,
  "vocab_size": 163840, "draft_vocab_size": 163840, "rms_norm_eps": 1e-5,
  "max_position_embeddings": 1048576, "rope_theta": 50000,
  "rope_parameters": {"rope_type": "yarn", "factor": 32, "original_max_position_embeddings": 32768,
    "rope_theta": 50000, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
  "num_target_layers": 5, "target_hidden_size": 7168, "target_num_hidden_layers": 93,
  "target_layer_ids": [2, 23, 47, 71, 89], "block_size": 7,
  "mask_token_id": 163837, "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839,
  "markov_rank": 256, "markov_head_type": "vanilla",
  "enable_confidence_head": true, "confidence_head_with_markov": true,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16"
}`

// k3Read is what readDFlash makes of a config: the spec and the planned keys.
type k3Read struct {
	*archSpec
	meta []gguf.KV
}

func readK3(t *testing.T, js string) k3Read {
	t.Helper()
	c, err := ParseConfig("config.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	kv := newKeyValues(dflashArch.Schema)
	spec, err := readDFlash(c, &roster{byName: map[string]SrcTensor{}}, Options{}, kv)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := kv.kvs()
	if err != nil {
		t.Fatal(err)
	}
	return k3Read{spec, meta}
}

// metaMap renders keys as "type value" ("u32 5", "[]i32 [3, 24]", `str "yarn"`).
func metaMap(ms []gguf.KV) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		out[m.Key] = m.Value.TypeName() + " " + m.Value.String()
	}
	return out
}

// TestK3Metadata checks every dflash key of dspark-k3.md section 3 with its exact type.
func TestK3Metadata(t *testing.T) {
	got := metaMap(readK3(t, k3Config).meta)
	want := map[string]string{
		"dflash.block_count": "u32 5", "dflash.embedding_length": "u32 7168", "dflash.feed_forward_length": "u32 14336",
		"dflash.context_length": "u32 1048576", "dflash.vocab_size": "u32 163840", "dflash.block_size": "u32 7",
		"dflash.sample_from_anchor": "bool true", "dflash.target_layers": "[]i32 [3, 24, 48, 72, 90]",
		"dflash.target_hidden_size": "u32 7168", "dflash.target_block_count": "u32 93", "dflash.markov_rank": "u32 256",
		"dflash.attention.head_count": "u32 64", "dflash.attention.head_count_kv": "u32 1",
		"dflash.attention.q_lora_rank": "u32 1536", "dflash.attention.kv_lora_rank": "u32 512",
		"dflash.attention.key_length": "u32 576", "dflash.attention.value_length": "u32 512",
		"dflash.attention.key_length_mla": "u32 192", "dflash.attention.value_length_mla": "u32 128",
		"dflash.attention.layer_norm_rms_epsilon": "f32 1e-05", "dflash.attention.causal": "bool false",
		"dflash.rope.dimension_count": "u32 64", "dflash.rope.freq_base": "f32 50000",
		"dflash.rope.scaling.type": `str "yarn"`, "dflash.rope.scaling.factor": "f32 32",
		"dflash.rope.scaling.original_context_length": "u32 32768",
		"dflash.rope.scaling.yarn_beta_fast":          "f32 32", "dflash.rope.scaling.yarn_beta_slow": "f32 1",
		"dflash.rope.scaling.yarn_log_multiplier": "f32 0.1", "tokenizer.ggml.mask_token_id": "u32 163837",
	}
	if !reflect.DeepEqual(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected key %s = %s", k, got[k])
			}
		}
	}
}

// TestK3Roster expands the dflash rules at the real K3 shapes: 72 tensors, 2,387,907,841
// parameters written, 68 source tensors expected (embed_tokens dropped).
func TestK3Roster(t *testing.T) {
	spec := readK3(t, k3Config)
	exp, err := expand(dflashArch, spec.dims, spec.features, spec.layers)
	if err != nil {
		t.Fatal(err)
	}
	var written, params, srcElems int64
	srcs := map[string]int64{}
	for _, e := range exp {
		n := int64(1)
		for _, d := range e.shape {
			n *= d
		}
		srcs[e.srcs[0]] = n
		if e.dst == "" {
			continue
		}
		written++
		m := int64(1)
		for _, d := range e.dims {
			m *= int64(d)
		}
		params += m
	}
	for _, n := range srcs {
		srcElems += n
	}
	if written != 72 || params != 2_387_907_841 || len(srcs) != 68 || srcElems != 3_562_312_961 {
		t.Errorf("72 tensors / 2,387,907,841 params / 68 sources / 3,562,312,961 elements expected, got %d / %d / %d / %d", written, params, len(srcs), srcElems)
	}
}

// TestSchemaDrift: the DFlash layout (YaRN under rope_scaling, block_size / mask_token_id /
// target_layer_ids inside dflash_config) gives exactly the same metadata as the DSpark one.
func TestSchemaDrift(t *testing.T) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(k3Config), &raw); err != nil {
		t.Fatal(err)
	}
	rp := raw["rope_parameters"].(map[string]any)
	delete(raw, "rope_parameters")
	rp["type"] = rp["rope_type"]
	delete(rp, "rope_type")
	delete(rp, "rope_theta")
	raw["rope_scaling"] = rp
	dc := map[string]any{}
	for _, k := range []string{"block_size", "mask_token_id", "target_layer_ids"} {
		dc[k] = raw[k]
		delete(raw, k)
	}
	raw["dflash_config"] = dc
	b, _ := json.Marshal(raw)
	a := metaMap(readK3(t, k3Config).meta)
	d := metaMap(readK3(t, string(b)).meta)
	if !reflect.DeepEqual(a, d) {
		t.Errorf("drifted schema gives different metadata:\n%v\n%v", a, d)
	}
	// rope_theta only inside rope_parameters (transformers 5).
	noTop := strings.Replace(k3Config, `"rope_theta": 50000,`, "", 1)
	if got := metaMap(readK3(t, noTop).meta)["dflash.rope.freq_base"]; got != "f32 50000" {
		t.Errorf("freq_base from rope_parameters.rope_theta: %s", got)
	}
}

// TestConfigErrors: problems are listed all at once, each naming its field.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     []string
	}{
		{"missing-and-mistyped", `"hidden_size": 7168, "intermediate_size": 14336,`, `"intermediate_size": "big",`,
			[]string{"missing integer field hidden_size", `field intermediate_size: want an integer, got the string "big"`}},
		{"drift-conflict", `"block_size": 7,`, `"block_size": 7, "dflash_config": {"block_size": 8},`,
			[]string{"block_size = 7 disagrees with dflash_config.block_size = 8"}},
		{"layer-id-range", `[2, 23, 47, 71, 89]`, `[2, 23, 47, 71, 93]`,
			[]string{"target_layer_ids entry 93 is outside the target's 93 layers"}},
		{"count-mismatch", `"num_target_layers": 5`, `"num_target_layers": 7`,
			[]string{"num_target_layers 7 but target_layer_ids has 5 entries"}},
		{"unknown-rope", `"rope_type": "yarn"`, `"rope_type": "longrope"`,
			[]string{`rope type "longrope" is not supported`}},
		{"output-gate", `"mla_use_output_gate": false`, `"mla_use_output_gate": true`,
			[]string{"mla_use_output_gate = true is not supported"}},
		{"mask", `"mask_token_id": 163837`, `"mask_token_id": 163840`,
			[]string{"mask_token_id 163840 is outside the vocabulary"}},
		{"block-size", `"block_size": 7`, `"block_size": 0`, []string{"block_size 0 is outside 1..64"}},
		{"block-size-huge", `"block_size": 7`, `"block_size": 1000000000000`, []string{"block_size 1000000000000 is outside 1..64"}},
		{"theta-conflict", `"rope_theta": 50000,`, `"rope_theta": 10000,`, []string{"rope_theta 10000 disagrees with rope_parameters.rope_theta 50000"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			js := strings.Replace(k3Config, c.old, c.new, 1)
			if js == k3Config {
				t.Fatalf("edit %q not applied", c.old)
			}
			cfg, err := ParseConfig("config.json", []byte(js))
			if err != nil {
				t.Fatal(err)
			}
			_, err = readDFlash(cfg, &roster{byName: map[string]SrcTensor{}}, Options{}, newKeyValues(dflashArch.Schema))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseConfigSyntaxError(t *testing.T) {
	_, err := ParseConfig("x/config.json", []byte(`{"a": 1,, }`))
	if err == nil || !strings.Contains(err.Error(), "x/config.json: byte offset 9") {
		t.Errorf("got %v, want the path and byte offset 9", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`[1]`), 0o644)
	if _, err := LoadConfig(dir); err == nil {
		t.Error("a JSON array was accepted as config.json")
	}
}

func TestNaming(t *testing.T) {
	cases := []struct {
		n    uint64
		want string
	}{
		{2_387_907_841, "2.4B"}, {3_562_312_961, "3.6B"}, {232_000_000, "232M"}, {123_217, "123K"},
		{999, "1.0K"}, {15_700_000_000, "16B"}, {1_026_000_000_000, "1.0T"}, {9_960_000, "10M"}, {450, "0.45K"},
	}
	for _, c := range cases {
		if got := roundedCount(c.n); got != c.want {
			t.Errorf("roundedCount(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := SizeLabel(0, 11_000_000_000, 2_000_000_000, 384); got != "384x13B" {
		t.Errorf("MoE label %q", got)
	}
	if got := DefaultOutName("Kimi K3/DSpark", "2.4B", gguf.TypeBF16); got != "Kimi-K3-DSpark-2.4B-BF16.gguf" {
		t.Errorf("DefaultOutName = %q", got)
	}
	if got := DefaultOutName("", "1.0K", gguf.TypeQ8_0); got != "ggml-model-1.0K-Q8_0.gguf" {
		t.Errorf("DefaultOutName = %q", got)
	}
	c, _ := ParseConfig("c", []byte(`{"_name_or_path": "Inferact/Kimi-K3-DSpark/"}`))
	if got := modelName(c, "/x/y"); got != "Kimi-K3-DSpark" {
		t.Errorf("modelName = %q", got)
	}
	c, _ = ParseConfig("c", []byte(`{}`))
	if got := modelName(c, "/x/my-draft"); got != "my-draft" {
		t.Errorf("modelName = %q", got)
	}
}

func ExampleParseOutType() {
	for _, s := range []string{"auto", "BF16", "q8_0", "q4_k_m", "q4_k"} {
		t, err := ParseOutType(s)
		fmt.Println(t, err)
	}
	// Output:
	// auto <nil>
	// bf16 <nil>
	// q8_0 <nil>
	// Q4_K_M <nil>
	// auto unknown output type "q4_k" (supported: auto, bf16, f16, f32, q8_0, or a llama-quantize mix: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS, MXFP4_MOE)
}
