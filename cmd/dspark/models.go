package main

import (
	"fmt"
	"io"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/tokenizer"
)

// models is a run's target (and draft) GGUFs: opened and read by openModels, loaded by load
// once the context is known and bounded.
type models struct {
	tname, dname string // how messages name the files (their paths, or the demo pair's names)
	tf, df       *gguf.File
	tcfg         deepseek2.Config
	dcfg         *draftFile
	tok          *tokenizer.BPE
	tokErr       error // why tok is nil

	target *deepseek2.Target
	draft  loadedDraft
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
	if m.tcfg, err = deepseek2.ReadConfig(m.tf); err != nil {
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
	m.dcfg, err = readDraft(m.df)
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
	if ctx > m.tcfg.NCtx {
		return usagef("%s: a %d-token context (a %d-token prompt and -n %d) exceeds the context length of %s (deepseek2.context_length = %d)",
			flag, ctx, longest, c.n, m.tname, m.tcfg.NCtx)
	}
	if err := m.checkMemory(ctx, flag); err != nil {
		return err
	}
	m.ctx = ctx
	opt := runtime.Options{Context: ctx, Pack: true, Activations: c.activations}
	var err error
	if m.target, err = deepseek2.Load(m.tf, opt); err != nil {
		return err
	}
	if m.df != nil {
		if m.draft, err = m.dcfg.load(m.target, opt); err != nil {
			return err
		}
	}
	return c.fit(m)
}

// checkMemory bounds the bytes the KV caches of a ctx-token context need by cacheMemoryLimit.
func (m *models) checkMemory(ctx int, flag string) error {
	limit, why := cacheMemoryLimit()
	total, err := m.tcfg.CacheBytes(ctx)
	detail := fmt.Sprintf("target %d layers x %d values x 4 bytes per position", m.tcfg.NLayer, m.tcfg.Attn.KVLoraRank+m.tcfg.Attn.DRope)
	if err == nil && m.df != nil {
		var d int64
		if d, err = m.dcfg.cacheBytes(ctx); err == nil {
			total += d
			detail += ", " + m.dcfg.cacheDetail
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
	V := m.target.Config.NVocab
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
			return usagef("--max-drafts %d exceeds the %d drafts a block of %s proposes (dflash.block_size %d)", c.maxDrafts, mx, m.dname, info.BlockSize)
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
