package main

import (
	"fmt"
	"io"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/registry"
	"github.com/dspark-dev/dspark/tokenizer"
)

// models is a run's target (and draft) GGUFs: opened and read by openModels, loaded by load
// once the context is known and bounded. Their architectures come from runtime/registry, by
// each file's declaration.
type models struct {
	tname, dname string // how messages name the files (their paths, or the demo pair's names)
	tf, df       *gguf.File
	tarch        *registry.TargetArch
	darch        *registry.DraftArch
	tinfo, dinfo registry.Info
	tok          *tokenizer.BPE
	tokErr       error // why tok is nil

	target registry.Target
	draft  registry.Draft
	ctx    int // the loaded context capacity
}

// openModels opens the target (and, if draftPath is not empty, the draft) and reads their
// hyperparameters and the target's tokenizer; nothing large is allocated yet.
func openModels(targetPath, draftPath string) (*models, error) {
	m := &models{tname: targetPath, dname: draftPath}
	if err := m.open(targetPath, draftPath); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *models) open(targetPath, draftPath string) error {
	var err error
	if m.tf, err = gguf.Open(targetPath); err != nil {
		return err
	}
	if m.tarch, err = registry.LookupTarget(m.tf); err != nil {
		return err
	}
	if m.tinfo, err = m.tarch.Info(m.tf); err != nil {
		return err
	}
	if _, ok := m.tf.Lookup(schema.TokTokens); ok {
		m.tok, m.tokErr = runtime.LoadTokenizer(m.tf)
	} else {
		m.tokErr = fmt.Errorf("%s has no tokenizer (%s)", targetPath, schema.TokTokens)
	}
	if draftPath == "" {
		return nil
	}
	if m.df, err = gguf.Open(draftPath); err != nil {
		return err
	}
	if m.darch, err = registry.LookupDraft(m.df); err != nil {
		return err
	}
	m.dinfo, err = m.darch.Info(m.df)
	return err
}

// Close releases the loaded models and closes the files.
func (m *models) Close() {
	if m.draft != nil {
		m.draft.Close()
	}
	if m.target != nil {
		m.target.Close()
	}
	for _, f := range []*gguf.File{m.df, m.tf} {
		if f != nil {
			f.Close()
		}
	}
}

// encode returns the prompt of the run: --tokens as given, or --prompt through the target's
// tokenizer. A tokenizer that cannot be built fails --prompt (naming the file and the
// problem); with --tokens it is only warned about, once, on stderr.
func (m *models) encode(c *runConfig, stderr io.Writer) ([]int, error) {
	if c.tokens != nil {
		if m.tokErr != nil {
			fmt.Fprintf(stderr, "dspark: warning: %v; --tokens runs without it, but --prompt and text output are unavailable for this file\n", m.tokErr)
		}
		return c.tokens, nil
	}
	if m.tokErr != nil {
		return nil, fmt.Errorf("--prompt needs the target's tokenizer: %w (give --tokens IDS instead)", m.tokErr)
	}
	ids := m.tok.Encode(c.prompt)
	if len(ids) == 0 {
		return nil, usagef("--prompt %q encodes to no tokens", c.prompt)
	}
	return ids, nil
}

// load bounds the context (by the model's context length and by the memory its caches need)
// and then loads the models. longest is the longest prompt the run decodes.
func (m *models) load(c *runConfig, longest int) error {
	need := longest + c.n - 1 // the last generated token is never fed back
	ctx, flag := c.ctx, "--ctx"
	switch {
	case ctx == 0:
		ctx, flag = need, "-n"
	case ctx < need:
		return usagef("--ctx %d cannot hold a %d-token prompt and -n %d: they need %d positions", ctx, longest, c.n, need)
	}
	if ctx > m.tinfo.ContextLength {
		return usagef("%s: a %d-token context (a %d-token prompt and -n %d) exceeds the context length of %s (%s = %d)",
			flag, ctx, longest, c.n, m.tname, m.tinfo.ContextKey, m.tinfo.ContextLength)
	}
	if err := m.checkMemory(ctx, flag); err != nil {
		return err
	}
	m.ctx = ctx
	opt := runtime.Options{Context: ctx, Pack: true, Activations: c.activations}
	var err error
	if m.target, err = m.tarch.Load(m.tf, opt); err != nil {
		return err
	}
	if m.df != nil {
		if m.draft, err = m.darch.Load(m.df, m.target, opt); err != nil {
			return err
		}
	}
	return c.fit(m)
}

// checkMemory bounds the bytes the KV caches of a ctx-token context need by cacheMemoryLimit.
// Caches that do not fit even for one position are the file's fault, not the flags': that is
// a file error (exit 1) naming the files and their per-position sizes.
func (m *models) checkMemory(ctx int, flag string) error {
	limit, why := cacheMemoryLimit()
	one, err := m.tinfo.CacheBytes(1)
	files, detail1 := m.tname, "target "+m.tinfo.Cache
	if err == nil && m.df != nil {
		var d int64
		if d, err = m.dinfo.CacheBytes(1); err == nil {
			one += d
		}
		files += " and " + m.dname
		detail1 += ", draft " + m.dinfo.Cache
	}
	if err != nil || one > limit {
		if err == nil {
			err = fmt.Errorf("%d bytes (%s)", one, gib(one))
		}
		return fmt.Errorf("%s: the sizes in the file(s) are unreasonable: the KV caches of a single position need %v (%s), more than the limit of %d bytes (%s, %s)",
			files, err, detail1, limit, gib(limit), why)
	}
	total, err := m.tinfo.CacheBytes(ctx)
	detail := "target " + m.tinfo.Cache
	if err == nil && m.df != nil {
		var d int64
		if d, err = m.dinfo.CacheBytes(ctx); err == nil {
			total += d
			detail += ", draft " + m.dinfo.Cache
		}
	}
	if err != nil {
		return usagef("%s: a %d-token context: %v", flag, ctx, err)
	}
	if total > limit {
		return usagef("%s: the KV caches of a %d-token context need %d bytes (%s; %s), more than the limit of %d bytes (%s, %s)",
			flag, ctx, total, gib(total), detail, limit, gib(limit), why)
	}
	return nil
}

// fit checks the flags that depend on the loaded models: token ids, top-k and --logprobs
// against the vocabulary, --max-drafts against the draft's block, --confidence-threshold
// against its heads.
func (c *runConfig) fit(m *models) error {
	V := m.target.Dims().NVocab
	for _, id := range c.tokens {
		if id >= V {
			return usagef("--tokens: %d is not a token id of %s (vocabulary of %d)", id, m.tname, V)
		}
	}
	if c.params.TopK > V {
		return usagef("--top-k %d exceeds the vocabulary of %s (%d)", c.params.TopK, m.tname, V)
	}
	if c.logprobs > V {
		return usagef("--logprobs %d exceeds the vocabulary of %s (%d)", c.logprobs, m.tname, V)
	}
	if d := m.draft; d != nil {
		info := d.Info()
		if mx := info.MaxDrafts(); c.maxDrafts > mx {
			return usagef("--max-drafts %d exceeds the %d drafts a block of %s proposes (%s %d)", c.maxDrafts, mx, m.dname,
				d.Values().Schema().FullName(schema.BlockSize), info.BlockSize)
		}
		if c.threshold > 0 && !info.HasConfidence {
			return usagef("--confidence-threshold: %s has no confidence head (conf_proj)", m.dname)
		}
	}
	return nil
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// cacheMemoryLimit is the most memory the KV caches of one run may take, and why: half of
// the machine's physical memory (the weights, repacked at load time, need room too). A
// variable so that tests can bound it.
var cacheMemoryLimit = func() (int64, string) {
	if phys := physicalMemory(); phys > 0 {
		return phys / 2, fmt.Sprintf("half of this machine's %s of physical memory", gib(phys))
	}
	return 8 << 30, "the physical memory is unknown on this system"
}
