package convert

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// Arch is one supported source architecture: the HF names it answers to, the GGUF
// declaration it becomes, its tensor rules, and a function that reads config.json into the
// dimension table, features and key values the rules need.
type Arch struct {
	// HF lists the config.json architectures[0] values this entry converts.
	HF []string
	// About says in a few words what the checkpoints are (the CLI's help lists it).
	About string
	// Schema is the GGUF declaration written: general.architecture, the key types and
	// order, the tensor names and the blocks they exist in.
	Schema *schema.Schema
	// Draft is true for a draft model (its tokenizer comes from --target).
	Draft bool
	// Rules is the tensor table, in GGUF order.
	Rules []Rule
	// families names the tensor-name families of a draft's "|" alternatives, in order
	// (nil: the MLA draft's DSpark | DFlash).
	families []string
	// read parses config.json into the dims and the architecture's key values; it sees
	// the roster only to pick a tensor-name family.
	read func(c *Config, r *roster, opt Options, kv *keyValues) (*archSpec, error)
	// tokenizer reads a target's tokenizer files (nil: Kimi's tiktoken.model); a draft's
	// tokenizer is its target's, read by the target architecture's loader.
	tokenizer tokenizerLoader
}

func (a *Arch) tokenizerLoader() tokenizerLoader {
	if a.tokenizer == nil {
		return loadTiktoken
	}
	return a.tokenizer
}

// targetTokenizer returns the tokenizer loader of the target checkpoint in dir, by the
// architecture its config.json names.
func targetTokenizer(dir string) (tokenizerLoader, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("--target: %w", err)
	}
	hf, _, err := cfg.Architecture()
	if err != nil {
		return nil, fmt.Errorf("--target: %w", err)
	}
	a, err := LookupArch(hf)
	if err != nil {
		return nil, fmt.Errorf("--target %s: %w", cfg.Path, err)
	}
	if a.Draft {
		return nil, fmt.Errorf("--target %s: %s is a draft, not a target", dir, hf)
	}
	return a.tokenizerLoader(), nil
}

// GGUF returns the general.architecture written.
func (a *Arch) GGUF() string { return a.Schema.Arch }

// archSpec is what an architecture derives from one config.json.
type archSpec struct {
	dims     dims
	features features
	layers   layerPlan
	dropped  func(string) bool // source tensors known and deliberately skipped (MTP layers)
	// rename maps normalized source names to the names the rules use (nil: none).
	rename func(string) string
	// cross compares counts the config declares with the checkpoint's shapes (run after
	// the config, tokenizer and target checks, before the roster check).
	cross   func(ro *roster) error
	fp8     fp8Block
	vocab   int64
	experts int64 // routed experts (size label)
	special specialIDs
	draft   *draftSpec
	notes   []string
}

// specialIDs are bos/eos/pad ids from config.json (-1 when absent).
type specialIDs struct{ bos, eos, pad int64 }

// draftSpec holds the draft's view of its target, checked against --target.
type draftSpec struct {
	targetHidden, targetLayers int64
	layerIDs                   []int64
	hidden, vocab              int64
	// noLastTap: the target's last layer cannot be tapped (upstream's GQA drafts tap layer
	// inputs: the output of the last layer is no layer's input).
	noLastTap bool
	// exactTables: embed_tokens and lm_head must equal the target's byte for byte to be
	// dropped (a differing table is refused unless kept).
	exactTables bool
}

// Plausibility caps on counts read from config.json.
const (
	maxVocab   = 1 << 24
	maxLayers  = 1 << 12
	maxExperts = 1 << 16
)

// registry lists every supported architecture; adding one is one file plus a line here.
var registry = []*Arch{dflashArch, dflashGQAArch, deepseek2Arch, qwen3Arch, qwen35Arch, qwen35MoEArch, kimiK3Arch, kimiLinearArch}

// LookupArch finds the registry entry for an HF architectures[0] value, or returns an error
// listing the supported ones.
func LookupArch(hf string) (*Arch, error) {
	for _, a := range registry {
		for _, n := range a.HF {
			if n == hf {
				return a, nil
			}
		}
	}
	return nil, fmt.Errorf("architecture %q is not supported (supported: %s)", hf, strings.Join(SupportedArchitectures(), ", "))
}

// SupportedArchitectures returns every accepted architectures[0] value with its GGUF name.
func SupportedArchitectures() []string {
	var out []string
	for _, a := range registry {
		for _, n := range a.HF {
			out = append(out, n+" -> "+a.GGUF())
		}
	}
	sort.Strings(out)
	return out
}

// ArchitectureHelp returns the registry as aligned lines for a help text, one per entry:
// its architectures[0] values, the GGUF architecture written and what the checkpoints are.
func ArchitectureHelp() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, a := range registry {
		fmt.Fprintf(w, "  %s\t-> %s\t%s\n", strings.Join(a.HF, " / "), a.GGUF(), a.About)
	}
	w.Flush()
	return strings.TrimRight(b.String(), "\n")
}

// readSpecials reads bos/eos/pad token ids (optional).
func readSpecials(r *cfgReader) specialIDs {
	bos, _ := r.OptInt(-1, "bos_token_id")
	eos, _ := r.OptInt(-1, "eos_token_id")
	pad, _ := r.OptInt(-1, "pad_token_id")
	return specialIDs{bos, eos, pad}
}

// mlaDims reads the MLA attention hyperparameters shared by dflash and deepseek2 and fills
// the common dimension names.
func mlaDims(r *cfgReader, d dims) {
	d["hidden"] = r.Positive("hidden_size")
	d["heads"] = r.Positive("num_attention_heads")
	d["r_kv"] = r.Positive("kv_lora_rank")
	d["nope"] = r.Positive("qk_nope_head_dim")
	d["rope"] = r.Positive("qk_rope_head_dim")
	d["v"] = r.Positive("v_head_dim")
	d["vocab"] = r.Bounded(maxVocab, "vocab_size")
	d["one"] = 1
	d["q_out"] = d["heads"] * (d["nope"] + d["rope"])
	d["kv_a_out"] = d["r_kv"] + d["rope"]
	d["kv_b_out"] = d["heads"] * (d["nope"] + d["v"])
	d["o_in"] = d["heads"] * d["v"]
	if kv, ok := r.OptInt(0, "num_key_value_heads"); ok && kv != d["heads"] {
		r.fail("num_key_value_heads %d differs from num_attention_heads %d (MLA checkpoints keep them equal)", kv, d["heads"])
	}
}

// setMLA sets the attention keys shared by dflash and deepseek2.
func setMLA(kv *keyValues, d dims, qLora int64, eps float64) {
	kv.set(schema.HeadCount, d["heads"])
	kv.set(schema.HeadCountKV, int64(1))
	kv.set(schema.QLoraRank, qLora)
	kv.set(schema.KVLoraRank, d["r_kv"])
	kv.set(schema.KeyLength, d["r_kv"]+d["rope"])
	kv.set(schema.ValueLength, d["r_kv"])
	kv.set(schema.KeyLengthMLA, d["nope"]+d["rope"])
	kv.set(schema.ValueLengthMLA, d["v"])
	kv.set(schema.RMSEpsilon, eps)
}

// readFP8 reads the block size of FP8 block-quantized weights (quantization_config, as in
// DeepSeek-V3's and Qwen3's FP8 releases); zero without quantization.
func readFP8(r *cfgReader) fp8Block {
	method := r.OptStr("", "quantization_config.quant_method")
	if method == "" {
		return fp8Block{}
	}
	if method != "fp8" {
		r.fail("quantization_config.quant_method %q is not supported (supported: fp8)", method)
		return fp8Block{}
	}
	bs := r.Ints("quantization_config.weight_block_size")
	if len(bs) == 2 && bs[0] > 0 && bs[1] > 0 {
		return fp8Block{bs[0], bs[1]}
	}
	if bs != nil {
		r.fail("quantization_config.weight_block_size %v must be two positive integers", bs)
	}
	return fp8Block{}
}
