package drafts

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// Convention is the sentence inspect states with a pair's taps: how llama.cpp numbers them.
const Convention = "llama.cpp's +1 convention: id k+1 is the input of target layer k+1, i.e. the output of HF decoder layer k (HF target_layer_ids + 1); the tap is the residual stream after that block, whatever its kind"

// TargetBlocks is a target's blocks as its declaration in gguf/schema sees them: how many,
// the kind of each (hybrid architectures), and the trunk the main pass runs.
type TargetBlocks struct {
	Arch   string
	Schema *schema.Schema // nil: gguf/schema declares no such target
	Blocks int64
	// Kinds is the kind of every block (schema.KindRecurrent, KindAttention, KindNextN, or
	// "" where the declaration cannot tell); nil for an architecture of one kind.
	Kinds []string
	// Trunk is the number of leading blocks that are not multi-token-prediction blocks.
	Trunk int64
}

// ReadTargetBlocks reads t's block count and block kinds through its declaration (false
// when the block count is unknown).
func ReadTargetBlocks(t *gguf.File) (TargetBlocks, bool) {
	b := TargetBlocks{Arch: t.Architecture()}
	src := schema.FileSource(t)
	b.Schema = schema.For(src)
	if b.Schema == nil || b.Schema.Layers == "" {
		n, ok := intKey(t, b.Arch+".block_count")
		b.Blocks, b.Trunk = n, n
		return b, ok
	}
	vals, _ := b.Schema.Resolve(src)
	n, ok := vals.Eval(b.Schema.Layers)
	if !ok || n < 0 {
		return b, false
	}
	b.Blocks, b.Trunk = n, n
	if len(b.Schema.Kinds) > 0 && !vals.TooManyLayers() {
		b.Kinds = vals.Kinds()
		for i, k := range b.Kinds {
			if k == schema.KindNextN {
				b.Trunk = int64(i)
				break
			}
		}
	}
	return b, true
}

// Kind returns the kind of block i: its declared kind, "layer" for an architecture of one
// kind, "" when the declaration cannot tell or i is outside the target.
func (b TargetBlocks) Kind(i int64) string {
	switch {
	case i < 0 || i >= b.Blocks:
		return ""
	case b.Kinds == nil:
		return "layer"
	case i < int64(len(b.Kinds)):
		return b.Kinds[i]
	}
	return ""
}

// KindCount is how many blocks of a target are of one kind.
type KindCount struct {
	Kind   string `json:"kind"`
	Blocks int64  `json:"blocks"`
}

// Counts returns the number of blocks of each kind, in the declaration's order of kinds
// (nil for an architecture of one kind).
func (b TargetBlocks) Counts() []KindCount {
	if b.Kinds == nil || b.Schema == nil {
		return nil
	}
	var out []KindCount
	for _, k := range b.Schema.Kinds {
		n := int64(0)
		for _, x := range b.Kinds {
			if x == k.Name {
				n++
			}
		}
		if n > 0 {
			out = append(out, KindCount{Kind: k.Name, Blocks: n})
		}
	}
	return out
}

// PairTap is one tapped target layer of a draft, read against the target's blocks.
type PairTap struct {
	Entry int `json:"entry"` // index in the draft's tap list
	// Stored is the value as the file stores it; LlamaID is it in llama.cpp's convention (the
	// input of target layer LlamaID), HFLayer in HF's (the output of decoder layer HFLayer).
	Stored  int64 `json:"stored"`
	LlamaID int64 `json:"llama_id"`
	HFLayer int64 `json:"hf_layer"`
	// Kind is the kind of target block HFLayer (schema.KindRecurrent, KindAttention,
	// KindNextN; "layer" for a target of one kind), "" when outside the target or unknown.
	Kind string `json:"kind"`
	OK   bool   `json:"ok"`
	// Note says why the tap is not usable (empty when OK).
	Note string `json:"note,omitempty"`
}

// Pair is a draft's taps read against its target (the "pair" object of inspect --check
// --target's JSON).
type Pair struct {
	Target       string `json:"target"`
	Architecture string `json:"target_architecture"`
	Blocks       int64  `json:"target_blocks"`
	// Trunk is the blocks the target's main pass runs (Blocks less the nextn blocks): taps
	// must lie in it.
	Trunk      int64       `json:"trunk_blocks"`
	Kinds      []KindCount `json:"block_kinds"`
	Convention string      `json:"convention"`
	Taps       []PairTap   `json:"taps"`
	// TapReads, for a target whose taps could read more than one tensor (kimi-k3 and
	// kimi-linear), says which one dspark's runtime reads and how to choose the other; ""
	// for a target of one residual stream.
	TapReads string `json:"tap_reads,omitempty"`
	// Engines are other engines' verdicts on the pair itself, beyond their loading of the
	// draft (the check's loaders): llama.cpp's for kimi-k3 and kimi-linear targets.
	Engines []Verdict `json:"engines"`
}

// PairOf reads the taps of draft v against target t; nil when v is not a recognized draft,
// its taps are unknown, t is itself a draft, or t's block count is unknown.
func PairOf(v *View, t *gguf.File) *Pair {
	if v == nil || !v.Recognized || t == nil || !v.TapsHF.Known() || Recognize(t).Recognized {
		return nil
	}
	b, ok := ReadTargetBlocks(t)
	if !ok {
		return nil
	}
	p := &Pair{Target: t.Path, Architecture: b.Arch, Blocks: b.Blocks, Trunk: b.Trunk, Kinds: b.Counts(),
		Convention: Convention, Taps: []PairTap{}, Engines: []Verdict{}}
	if b.Schema == schema.KimiK3 || b.Schema == schema.KimiLinear {
		p.TapReads, p.Engines = kimiPair(t, b)
	}
	if p.Kinds == nil {
		p.Kinds = []KindCount{{Kind: "layer", Blocks: b.Blocks}}
	}
	hf, ll := v.TapsHF.Get(), v.TapsLlama.Get()
	for i, h := range hf {
		stored := ll[i]
		if v.TapsConvention == "hf" {
			stored = h
		}
		tap := PairTap{Entry: i, Stored: stored, LlamaID: ll[i], HFLayer: h, Kind: b.Kind(h)}
		tap.Note = tapProblem(v, b, h)
		tap.OK = tap.Note == ""
		p.Taps = append(p.Taps, tap)
	}
	return p
}

// tapProblem says why HF layer h of target b cannot be tapped ("" when it can).
func tapProblem(v *View, b TargetBlocks, h int64) string {
	switch {
	case h < 0:
		return "llama.cpp id 0 is the embedding output, which no draft taps (HF ids written without the +1?)"
	case h >= b.Blocks:
		return fmt.Sprintf("past the target's last layer (HF layers 0..%d)", b.Blocks-1)
	case h >= b.Trunk:
		return fmt.Sprintf("a %s block (multi-token prediction), which the main pass does not run: the trunk is HF layers 0..%d", b.Kind(h), b.Trunk-1)
	case h == b.Trunk-1 && !v.decl.LastTapOK:
		return "the target's last layer: its output is the final hidden state, no layer's input (llama.cpp publishes layer inputs)"
	}
	return ""
}

// kimiPair says which tensor a tap of a kimi-k3 or kimi-linear target reads in dspark's
// runtime (runtime/kimik3's TapForm), and llama.cpp's verdict on pairing any draft with it
// (target-kimi-k3.md sections 5.1, 5.4 and 6).
func kimiPair(t *gguf.File, b TargetBlocks) (string, []Verdict) {
	vals, _ := b.Schema.Resolve(schema.FileSource(t))
	block, _ := vals.Eval(schema.AttnResBlockSize)
	reads := "the residual stream after the tapped block: the target has no attention residuals, so `dspark run --tap-form partial-sum` (the default) and `--tap-form mixed` read the same tensor"
	if b.Schema == schema.KimiK3 && block > 0 {
		reads = fmt.Sprintf("the block partial sum P after the tapped block (the default, `dspark run --tap-form partial-sum`: llama.cpp's l_out, the aux_hidden_state vLLM's K3 model captures), "+
			"which sums the block outputs since the last attention-residual boundary (every %d blocks; what came before it, the embedding included, is banked, not in P); "+
			"`dspark run --tap-form mixed` reads res_mix(P) instead, the stream the next block's attention norm reads (output_res_score's mix after the last block)", block)
	}
	rollback := "its KDA blocks do keep per-token state snapshots (n_rs_seq) for rollback: that is not the obstacle"
	if b.Schema == schema.KimiLinear {
		rollback = "nor could it roll back the KDA state by snapshots: it clamps n_rs_seq to 0 for kimi-linear"
	}
	v := no("llama.cpp", "cannot pair any DFlash/DSpark draft with a %s target: its %s graph publishes no per-layer hidden states "+
		"(src/models/%s.cpp never sets t_layer_inp; llama-graph.cpp asserts \"layer input tensor is null\" when a draft asks for them), so no draft can read its taps; "+
		"%s; it runs the target alone (target-kimi-k3.md 5.1, 6)", b.Arch, b.Arch, b.Arch, rollback)
	return reads, []Verdict{v}
}
