package synth

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// TargetPlan is everything WriteTarget writes, decided before any byte is written.
type TargetPlan struct {
	Config   *TargetConfig
	Roster   Roster
	Ranks    int            // BPE ranks of tiktoken.model (ids 0..Ranks-1)
	Specials map[int]string // added_tokens_decoder: id -> name
}

// PlanTarget returns the plan of the target opts describe, with the break brk ("" for none)
// applied. The k3-full preset has no target (its real target, Kimi-K3, is out of scope).
func PlanTarget(opts TargetOptions, brk string) (*TargetPlan, error) {
	if err := checkBreak(brk); err != nil {
		return nil, err
	}
	if opts.Preset == K3Full {
		return nil, fmt.Errorf("synth: preset %s is draft-only (write the draft without --target)", K3Full)
	}
	cfg, err := TargetConfigFor(opts)
	if err != nil {
		return nil, err
	}
	block := 0
	if opts.FP8 {
		block = fp8Block(opts)
	}
	p := &TargetPlan{Config: cfg, Roster: TargetRoster(cfg, block), Ranks: cfg.Ranks()}
	p.Specials = SpecialTokens(p.Ranks, cfg.VocabSize)
	if p.Roster, err = breakRoster(brk, p.Roster, "model.", cfg.HiddenSize); err != nil {
		return nil, err
	}
	switch brk {
	case BreakConfigRoster:
		cfg.NumHiddenLayers++
	case BreakVocabMismatch:
		// config vocab_size V; embedding (and lm_head) rows V+64; tokenizer V+32 ids.
		for _, name := range []string{"model.embed_tokens.weight", "lm_head.weight"} {
			if i := p.Roster.Find(name); i >= 0 {
				p.Roster[i].Shape = []int64{int64(cfg.VocabSize + vocabBreakRows), int64(cfg.HiddenSize)}
			}
		}
		for id := cfg.VocabSize; id < cfg.VocabSize+vocabBreakAdded; id++ {
			p.Specials[id] = fmt.Sprintf("<|extra_token_%d|>", id)
		}
	}
	return p, nil
}

// DraftPlan is everything WriteDraft writes, decided before any byte is written.
type DraftPlan struct {
	// Config is the config of an MLA draft, GQA that of a GQA draft (the other is nil).
	Config *DraftConfig
	GQA    *GQAConfig
	Roster Roster
	// TargetDir is the target whose embedding is copied ("" when regenerated).
	TargetDir string
}

// ConfigJSON returns the draft's config.json bytes (indented as written).
func (p *DraftPlan) ConfigJSON() ([]byte, error) {
	if p.GQA != nil {
		return marshal(p.GQA, "  ")
	}
	return marshal(p.Config, "  ")
}

// PlanDraft returns the plan of the draft opts describe, with the break brk applied. With a
// TargetDir it reads the target's config.json (not its weights).
func PlanDraft(opts DraftOptions, brk string) (*DraftPlan, error) {
	if err := checkBreak(brk); err != nil {
		return nil, err
	}
	switch opts.Backbone {
	case "", BackboneMLA:
		if opts.NoHeads {
			return nil, fmt.Errorf("synth: head-less DFlash drafts have a GQA backbone (Backbone %q)", BackboneGQA)
		}
		if opts.GQA != nil {
			return nil, fmt.Errorf("synth: GQA dims given for an MLA draft")
		}
	case BackboneGQA:
		return planGQA(opts, brk)
	default:
		return nil, fmt.Errorf("synth: unknown draft backbone %q (want %s or %s)", opts.Backbone, BackboneMLA, BackboneGQA)
	}
	if opts.Preset == Qwen3_8B {
		return nil, fmt.Errorf("synth: preset %s is a GQA draft preset (Backbone %q)", Qwen3_8B, BackboneGQA)
	}
	var t pairedTarget
	switch {
	case opts.TargetDir != "":
		var err error
		if t, err = readTarget(opts.TargetDir); err != nil {
			return nil, err
		}
	case opts.Preset == K3Full:
		t = k3Target
	default:
		cfg, err := TargetConfigFor(TargetOptions{Preset: opts.Preset})
		if err != nil {
			return nil, err
		}
		t = pairedTarget{Vocab: cfg.VocabSize, Hidden: cfg.HiddenSize, Layers: cfg.NumHiddenLayers,
			Bos: cfg.BosTokenID, Pad: cfg.PadTokenID}
	}
	cfg, err := draftConfigFor(opts, t)
	if err != nil {
		return nil, err
	}
	p := &DraftPlan{Config: cfg, Roster: DraftRoster(cfg), TargetDir: opts.TargetDir}
	prefix := ""
	if opts.DFlashNames {
		prefix = "model."
	}
	if p.Roster, err = breakRoster(brk, p.Roster, prefix, cfg.HiddenSize); err != nil {
		return nil, err
	}
	switch brk {
	case BreakConfigRoster:
		cfg.NumHiddenLayers++
	case BreakVocabMismatch:
		// config vocab_size V+64; embedding and Markov rows V; the target tokenizer V.
		cfg.VocabSize += vocabBreakRows
		cfg.DraftVocabSize += vocabBreakRows
	}
	return p, nil
}

// readTarget reads what a draft needs from a target's config.json.
func readTarget(dir string) (pairedTarget, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return pairedTarget{}, fmt.Errorf("synth: target: %w", err)
	}
	return parseTargetConfig(path, b)
}

// parseTargetConfig reads what a draft needs from the bytes of a target's config.json. A
// target without pad_token_id (Qwen3's configs; its tokenizer pads with <|endoftext|>, the
// bos) pads with its bos.
func parseTargetConfig(path string, b []byte) (pairedTarget, error) {
	type fields struct {
		VocabSize       *int `json:"vocab_size"`
		HiddenSize      *int `json:"hidden_size"`
		NumHiddenLayers *int `json:"num_hidden_layers"`
		BosTokenID      *int `json:"bos_token_id"`
		PadTokenID      *int `json:"pad_token_id"`
		EosTokenID      *int `json:"eos_token_id"`
	}
	var c struct {
		fields
		ModelType  string  `json:"model_type"`
		TextConfig *fields `json:"text_config"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return pairedTarget{}, fmt.Errorf("synth: target %s: %w", path, err)
	}
	if c.TextConfig != nil { // a multimodal wrapper (Qwen3.5, Kimi-K3): the language model's fields
		c.fields = *c.TextConfig
	}
	if c.BosTokenID == nil { // Qwen3.5: no bos; eos_token_id is <|endoftext|>, Qwen3's bos
		c.BosTokenID = c.EosTokenID
	}
	if c.PadTokenID == nil {
		c.PadTokenID = c.BosTokenID
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"bos_token_id", c.BosTokenID}, {"pad_token_id", c.PadTokenID}} {
		if f.v == nil || *f.v < 0 || (*f.v == 0 && f.name != "bos_token_id" && f.name != "pad_token_id") {
			return pairedTarget{}, fmt.Errorf("synth: target %s: field %s missing or invalid", path, f.name)
		}
	}
	const maxDim = 1 << 24 // far above any real vocab or hidden size; keeps the arithmetic safe
	if *c.VocabSize > maxDim || *c.HiddenSize > maxDim || *c.NumHiddenLayers > 1<<12 {
		return pairedTarget{}, fmt.Errorf("synth: target %s: vocab_size %d, hidden_size %d or num_hidden_layers %d is out of range",
			path, *c.VocabSize, *c.HiddenSize, *c.NumHiddenLayers)
	}
	if *c.BosTokenID+imEndOffset >= *c.VocabSize || *c.PadTokenID >= *c.VocabSize || *c.VocabSize < 3 {
		return pairedTarget{}, fmt.Errorf("synth: target %s: bos_token_id %d or pad_token_id %d does not fit the specials in vocab_size %d",
			path, *c.BosTokenID, *c.PadTokenID, *c.VocabSize)
	}
	t := pairedTarget{Vocab: *c.VocabSize, Hidden: *c.HiddenSize, Layers: *c.NumHiddenLayers,
		Bos: *c.BosTokenID, Pad: *c.PadTokenID}
	if c.ModelType == "kimi_k3" && t.Layers == k3Target.Layers {
		t.LayerIDs = k3Target.LayerIDs // the seed draft's taps; other depths spread theirs
	}
	return t, nil
}

// planGQA is PlanDraft for a GQA draft.
func planGQA(opts DraftOptions, brk string) (*DraftPlan, error) {
	d, preset, err := gqaDims(opts)
	if err != nil {
		return nil, err
	}
	var t pairedTarget
	switch {
	case opts.TargetDir != "":
		if t, err = readTarget(opts.TargetDir); err != nil {
			return nil, err
		}
	case preset != nil:
		t = *preset
	default:
		cfg, err := TargetConfigFor(TargetOptions{Preset: opts.Preset})
		if err != nil {
			return nil, err
		}
		t = pairedTarget{Vocab: cfg.VocabSize, Hidden: cfg.HiddenSize, Layers: cfg.NumHiddenLayers,
			Bos: cfg.BosTokenID, Pad: cfg.PadTokenID}
	}
	cfg, err := gqaConfigFor(opts, d, t)
	if err != nil {
		return nil, err
	}
	prefix := ""
	if opts.DFlashNames {
		prefix = "model."
	}
	p := &DraftPlan{GQA: cfg, Roster: GQARoster(cfg, d.Tables, d.DSparkNames, prefix), TargetDir: opts.TargetDir}
	if p.Roster, err = breakRosterWith(brk, p.Roster, prefix, cfg.HiddenSize, gqaBreakTensors); err != nil {
		return nil, err
	}
	switch brk {
	case BreakConfigRoster:
		cfg.NumHiddenLayers++
	case BreakVocabMismatch:
		cfg.VocabSize += vocabBreakRows
	}
	return p, nil
}
