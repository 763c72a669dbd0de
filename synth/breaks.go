package synth

import (
	"fmt"
	"strings"
)

// Broken variants (--break NAME). Each breaks one thing a converter must check and must make
// it fail with one clear error; docs/synth.md lists the error expected for each.
const (
	BreakMissingTensor     = "missing-tensor"         // layers.1.self_attn.kv_a_layernorm.weight is absent
	BreakExtraTensor       = "extra-tensor"           // layers.0.mlp.extra_proj.weight [8, hidden] is added
	BreakWrongShape        = "wrong-shape"            // layers.0.self_attn.kv_b_proj.weight is stored transposed
	BreakWrongDtype        = "wrong-dtype"            // layers.0.input_layernorm.weight is I32
	BreakConfigRoster      = "config-roster-mismatch" // config.json declares one layer more than the weights hold
	BreakTruncatedShard    = "truncated-shard"        // the last shard loses half of its tensor data
	BreakIndexMissingShard = "index-missing-shard"    // the last shard named by the index is deleted
	BreakVocabMismatch     = "vocab-mismatch"         // vocab_size, embedding rows and tokenizer size disagree
)

// Breaks lists every broken variant.
var Breaks = []string{BreakMissingTensor, BreakExtraTensor, BreakWrongShape, BreakWrongDtype,
	BreakConfigRoster, BreakTruncatedShard, BreakIndexMissingShard, BreakVocabMismatch}

// vocabBreakRows is how many rows the vocab-mismatch break adds to the target's embedding
// and lm_head (and to the draft's config vocab_size); vocabBreakAdded is how many added
// tokens it appends to the target's tokenizer above the vocab.
const (
	vocabBreakRows  = 64
	vocabBreakAdded = 32
)

// checkBreak returns an error for an unknown break name ("" is no break).
func checkBreak(b string) error {
	if b == "" {
		return nil
	}
	for _, k := range Breaks {
		if b == k {
			return nil
		}
	}
	return fmt.Errorf("synth: unknown break %q (want one of %s)", b, strings.Join(Breaks, ", "))
}

// shardBreak reports whether b is applied to the files after writing (and needs shards).
func shardBreak(b string) bool { return b == BreakTruncatedShard || b == BreakIndexMissingShard }

// breakRoster applies the roster-level breaks to r. prefix is the tensor-name prefix of the
// layers ("model." or ""), hidden the hidden size.
func breakRoster(b string, r Roster, prefix string, hidden int) (Roster, error) {
	return breakRosterWith(b, r, prefix, hidden, mlaBreakTensors)
}

// breakTensors are the tensors the roster-level breaks act on.
type breakTensors struct{ missing, transposed string }

var (
	mlaBreakTensors = breakTensors{missing: "layers.1.self_attn.kv_a_layernorm.weight", transposed: "layers.0.self_attn.kv_b_proj.weight"}
	gqaBreakTensors = breakTensors{missing: "layers.1.self_attn.k_norm.weight", transposed: "layers.0.self_attn.k_proj.weight"}
)

// breakRosterWith is breakRoster with the tensors of a backbone.
func breakRosterWith(b string, r Roster, prefix string, hidden int, bt breakTensors) (Roster, error) {
	find := func(suffix string) (int, error) {
		if i := r.Find(prefix + suffix); i >= 0 {
			return i, nil
		}
		return -1, fmt.Errorf("synth: break %s: no tensor %s%s", b, prefix, suffix)
	}
	switch b {
	case BreakMissingTensor:
		i, err := find(bt.missing)
		if err != nil {
			return nil, err
		}
		return append(r[:i:i], r[i+1:]...), nil
	case BreakExtraTensor:
		i, err := find("layers.0.post_attention_layernorm.weight")
		if err != nil {
			return nil, err
		}
		extra := linear(prefix+"layers.0.mlp.extra_proj.weight", 8, hidden)
		return append(r[:i+1:i+1], append(Roster{extra}, r[i+1:]...)...), nil
	case BreakWrongShape:
		i, err := find(bt.transposed)
		if err != nil {
			return nil, err
		}
		r = append(Roster(nil), r...)
		s := r[i].Shape
		r[i].Shape = []int64{s[1], s[0]}
		return r, nil
	case BreakWrongDtype:
		i, err := find("layers.0.input_layernorm.weight")
		if err != nil {
			return nil, err
		}
		r = append(Roster(nil), r...)
		// Same element count; 4-byte float32 values labelled as 32-bit integers.
		r[i].Dtype = I32
		r[i].Init.Store = F32
		return r, nil
	}
	return r, nil
}
