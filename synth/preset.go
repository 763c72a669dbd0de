package synth

import (
	"fmt"
	"strings"
)

// Preset names.
const (
	Tiny   = "tiny"
	Demo   = "demo"
	Small  = "small"
	K3Full = "k3-full"
)

// Presets lists the preset names in size order (qwen3-8b is a GQA draft preset).
var Presets = []string{Tiny, Demo, Small, Qwen3_8B, K3Full}

// TargetDims are the shape parameters of a synthetic target.
type TargetDims struct {
	Vocab, Reserved                int // vocab_size = ranks + Reserved special ids at the top
	Hidden, FFN, MoeFFN, Layers    int
	Heads, QLoRA, KVLoRA           int
	Nope, Rope, V                  int
	Experts, ExpertsPerTok, Shared int
	Groups, TopkGroup              int // n_group / topk_group with the GroupRouting option
}

// DraftDims are the shape parameters of a synthetic draft (hidden size, vocab and target
// depth come from its target).
type DraftDims struct {
	Layers, FFN           int
	Heads, QLoRA, KVLoRA  int
	Nope, Rope, V         int
	Taps                  int // num_target_layers: how many target layers feed context_proj
	MarkovRank, BlockSize int
}

// presetDims returns the dimensions of a preset. The k3-full target is Kimi-K2 itself
// (never written: the k3-full draft only needs its vocab, hidden size and depth, which come
// from the spec's K3 numbers).
func presetDims(preset string) (TargetDims, DraftDims, error) {
	switch preset {
	case Tiny:
		// Every dimension distinct so a transposition cannot pass a shape check.
		return TargetDims{Vocab: 1024, Reserved: 32, Hidden: 64, FFN: 96, MoeFFN: 32, Layers: 3,
				Heads: 4, QLoRA: 40, KVLoRA: 24, Nope: 16, Rope: 8, V: 12,
				Experts: 8, ExpertsPerTok: 2, Shared: 1, Groups: 4, TopkGroup: 2},
			DraftDims{Layers: 2, FFN: 128, Heads: 4, QLoRA: 40, KVLoRA: 24, Nope: 16, Rope: 8, V: 12,
				Taps: 3, MarkovRank: 16, BlockSize: 4}, nil
	case Demo:
		// The embedded demo pair (internal/demo): the tiny target's width at 16 layers, and
		// a draft with the real block size 7 and a Markov rank equal to the target width, so
		// the head can hold the target's whole next-token table (rank <= hidden + 1). The
		// depth gives the pair the ratio of real ones (a 2-layer draft for a 16-layer target;
		// K3's is 5 for 61), so that drafting costs much less than a target step.
		t, d, _ := presetDims(Tiny)
		t.Layers = 16
		d.BlockSize, d.MarkovRank = 7, t.Hidden
		return t, d, nil
	case Small:
		// ~232M parameters in BF16 (see docs/synth.md for the count).
		return TargetDims{Vocab: 32000, Reserved: 256, Hidden: 1024, FFN: 2816, MoeFFN: 150, Layers: 16,
				Heads: 16, QLoRA: 384, KVLoRA: 256, Nope: 64, Rope: 32, V: 48,
				Experts: 16, ExpertsPerTok: 4, Shared: 1, Groups: 4, TopkGroup: 2},
			DraftDims{Layers: 2, FFN: 2048, Heads: 16, QLoRA: 384, KVLoRA: 256, Nope: 64, Rope: 32, V: 48,
				Taps: 5, MarkovRank: 64, BlockSize: 7}, nil
	case K3Full:
		return TargetDims{Vocab: 163840, Reserved: 256, Hidden: 7168, FFN: 18432, MoeFFN: 2048, Layers: 61,
				Heads: 64, QLoRA: 1536, KVLoRA: 512, Nope: 128, Rope: 64, V: 128,
				Experts: 384, ExpertsPerTok: 8, Shared: 1, Groups: 1, TopkGroup: 1},
			DraftDims{Layers: 5, FFN: 14336, Heads: 64, QLoRA: 1536, KVLoRA: 512, Nope: 128, Rope: 64, V: 128,
				Taps: 5, MarkovRank: 256, BlockSize: 7}, nil
	}
	return TargetDims{}, DraftDims{}, fmt.Errorf("synth: unknown preset %q (want one of %s)", preset, strings.Join(Presets, ", "))
}
