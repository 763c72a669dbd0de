// Package session is what `dspark run` does, as a library: it opens a target and a draft
// through runtime/registry (by each file's declaration), loads them, resolves the draft's
// calibration and the verify schedule, measures the scheduler's cost model (pooled with the
// passes of earlier runs in a persistent cache keyed by CPU, build and file) and returns a
// configured runtime.Generator with a report of what was chosen. Flags and printing stay in
// cmd/dspark.
//
// The steps, in order: Open, Pair.Load, Pair.Schedule (speculative decoding only),
// Pair.Generator, Schedule.Apply; then Generator.Plain or Generator.Speculative.
package session

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/registry"
	"github.com/dspark-dev/dspark/runtime/speculative"
	"github.com/dspark-dev/dspark/tokenizer"
)

// Pair is a target (and optionally a draft) GGUF: opened and read by Open, loaded by Load.
// Their architectures come from runtime/registry, by each file's declaration.
type Pair struct {
	// TargetName and DraftName are how messages name the files (their paths by default).
	TargetName, DraftName string
	TargetFile, DraftFile *gguf.File // DraftFile is nil without a draft
	TargetArch            *registry.TargetArch
	DraftArch             *registry.DraftArch
	TargetInfo, DraftInfo registry.Info
	// Tokenizer is the target's tokenizer; nil with TokenizerErr saying why.
	Tokenizer    *tokenizer.BPE
	TokenizerErr error

	// Target and Draft are the loaded models (nil before Load); Context is the context
	// capacity they were loaded for.
	Target  registry.Target
	Draft   registry.Draft
	Context int
}

// Open opens the target (and, if draftPath is not empty, the draft) and reads their
// hyperparameters and the target's tokenizer; nothing large is allocated yet. A file of an
// architecture the runtime does not run is an error naming the file.
func Open(targetPath, draftPath string) (*Pair, error) {
	p := &Pair{TargetName: targetPath, DraftName: draftPath}
	if err := p.open(targetPath, draftPath); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Pair) open(targetPath, draftPath string) error {
	var err error
	if p.TargetFile, err = gguf.Open(targetPath); err != nil {
		return err
	}
	if p.TargetArch, err = registry.LookupTarget(p.TargetFile); err != nil {
		return err
	}
	if p.TargetInfo, err = p.TargetArch.Info(p.TargetFile); err != nil {
		return err
	}
	if _, ok := p.TargetFile.Lookup(schema.TokTokens); ok {
		p.Tokenizer, p.TokenizerErr = runtime.LoadTokenizer(p.TargetFile)
	} else {
		p.TokenizerErr = fmt.Errorf("%s has no tokenizer (%s)", targetPath, schema.TokTokens)
	}
	if draftPath == "" {
		return nil
	}
	if p.DraftFile, err = gguf.Open(draftPath); err != nil {
		return err
	}
	if p.DraftArch, err = registry.LookupDraft(p.DraftFile); err != nil {
		return err
	}
	p.DraftInfo, err = p.DraftArch.Info(p.DraftFile)
	return err
}

// Close releases the loaded models and closes the files.
func (p *Pair) Close() {
	if p.Draft != nil {
		p.Draft.Close()
	}
	if p.Target != nil {
		p.Target.Close()
	}
	for _, f := range []*gguf.File{p.DraftFile, p.TargetFile} {
		if f != nil {
			f.Close()
		}
	}
}

// Load loads the target (and the draft) for a context of opt.Context tokens. The caller
// bounds the context first (TargetInfo.ContextLength, and the memory TargetInfo.CacheBytes
// and DraftInfo.CacheBytes report).
func (p *Pair) Load(opt runtime.Options) error {
	var err error
	if p.Target, err = p.TargetArch.Load(p.TargetFile, opt); err != nil {
		return err
	}
	p.Context = opt.Context
	if p.DraftFile != nil {
		if p.Draft, err = p.DraftArch.Load(p.DraftFile, p.Target, opt); err != nil {
			return err
		}
	}
	return nil
}

// Settings are a decode's sampling and drafting settings.
type Settings struct {
	Params speculative.Params
	// MaxDrafts bounds the drafts per round (0: the draft's full block); Threshold stops
	// drafting at the first survival below it (0: off); TopLogProbs records the top K
	// log-probabilities of every generated position (0: off).
	MaxDrafts   int
	Threshold   float64
	TopLogProbs int
}

// Generator returns a Generator for the loaded models with s's settings and the target's
// end-of-sequence tokens; Schedule.Apply then sets its verify schedule.
func (p *Pair) Generator(s Settings) *runtime.Generator {
	g := &runtime.Generator{Target: p.Target, Params: s.Params, EOS: runtime.EOS(p.TargetFile),
		MaxDraft: s.MaxDrafts, Threshold: s.Threshold, TopLogProbs: s.TopLogProbs}
	if p.Draft != nil {
		g.Draft = p.Draft
	}
	return g
}

// StepBytes is the weight bytes one plain decode step of the target reads, from its
// declaration (registry.TargetArch.StepBytes).
func (p *Pair) StepBytes() (int64, error) { return p.TargetArch.StepBytes(p.TargetFile) }

// BlockBytes is the weight bytes one draft block reads, from the declarations
// (registry.DraftArch.BlockBytes); an error without a draft.
func (p *Pair) BlockBytes() (int64, error) {
	if p.DraftFile == nil {
		return 0, fmt.Errorf("%s: no draft", p.TargetName)
	}
	return p.DraftArch.BlockBytes(p.DraftFile, p.TargetArch, p.TargetFile)
}
