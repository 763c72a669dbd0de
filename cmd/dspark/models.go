package main

import (
	"fmt"
	"io"

	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kimik3"
	"github.com/dspark-dev/dspark/runtime/session"
)

// models is a run's target (and draft): a session.Pair, opened through runtime/registry by
// each file's declaration, and loaded by load once the context is known and bounded by the
// run's flags.
type models struct {
	*session.Pair
}

// openModels opens the target (and, if draftPath is not empty, the draft) and reads their
// hyperparameters and the target's tokenizer; nothing large is allocated yet.
func openModels(targetPath, draftPath string) (*models, error) {
	p, err := session.Open(targetPath, draftPath)
	if err != nil {
		return nil, err
	}
	return &models{p}, nil
}

// encode returns the prompt of the run: --tokens as given, or --prompt through the target's
// tokenizer. A tokenizer that cannot be built fails --prompt (naming the file and the
// problem); with --tokens it is only warned about, once, on stderr.
func (m *models) encode(c *runConfig, stderr io.Writer) ([]int, error) {
	if c.tokens != nil {
		if m.TokenizerErr != nil {
			fmt.Fprintf(stderr, "dspark: warning: %v; --tokens runs without it, but --prompt and text output are unavailable for this file\n", m.TokenizerErr)
		}
		return c.tokens, nil
	}
	if m.TokenizerErr != nil {
		return nil, fmt.Errorf("--prompt needs the target's tokenizer: %w (give --tokens IDS instead)", m.TokenizerErr)
	}
	ids := m.Tokenizer.Encode(c.prompt)
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
	if ctx > m.TargetInfo.ContextLength {
		return usagef("%s: a %d-token context (a %d-token prompt and -n %d) exceeds the context length of %s (%s = %d)",
			flag, ctx, longest, c.n, m.TargetName, m.TargetInfo.ContextKey, m.TargetInfo.ContextLength)
	}
	if err := m.checkMemory(ctx, flag); err != nil {
		return err
	}
	if err := m.Pair.Load(runtime.Options{Context: ctx, Pack: true, Activations: c.activations}); err != nil {
		return err
	}
	if err := m.setTapForm(c.tapForm); err != nil {
		return err
	}
	return c.fit(m)
}

// checkMemory bounds the bytes the KV caches of a ctx-token context need by cacheMemoryLimit.
// Caches that do not fit even for one position are the file's fault, not the flags': that is
// a file error (exit 1) naming the files and their per-position sizes.
func (m *models) checkMemory(ctx int, flag string) error {
	limit, why := cacheMemoryLimit()
	one, err := m.TargetInfo.CacheBytes(1)
	files, detail1 := m.TargetName, "target "+m.TargetInfo.Cache
	if err == nil && m.DraftFile != nil {
		var d int64
		if d, err = m.DraftInfo.CacheBytes(1); err == nil {
			one += d
		}
		files += " and " + m.DraftName
		detail1 += ", draft " + m.DraftInfo.Cache
	}
	if err != nil || one > limit {
		if err == nil {
			err = fmt.Errorf("%d bytes (%s)", one, gib(one))
		}
		return fmt.Errorf("%s: the sizes in the file(s) are unreasonable: the KV caches of a single position need %v (%s), more than the limit of %d bytes (%s, %s)",
			files, err, detail1, limit, gib(limit), why)
	}
	total, err := m.TargetInfo.CacheBytes(ctx)
	detail := "target " + m.TargetInfo.Cache
	if err == nil && m.DraftFile != nil {
		var d int64
		if d, err = m.DraftInfo.CacheBytes(ctx); err == nil {
			total += d
			detail += ", draft " + m.DraftInfo.Cache
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
	V := m.Target.Dims().NVocab
	for _, id := range c.tokens {
		if id >= V {
			return usagef("--tokens: %d is not a token id of %s (vocabulary of %d)", id, m.TargetName, V)
		}
	}
	if c.params.TopK > V {
		return usagef("--top-k %d exceeds the vocabulary of %s (%d)", c.params.TopK, m.TargetName, V)
	}
	if c.logprobs > V {
		return usagef("--logprobs %d exceeds the vocabulary of %s (%d)", c.logprobs, m.TargetName, V)
	}
	if d := m.Draft; d != nil {
		info := d.Info()
		if mx := info.MaxDrafts(); c.maxDrafts > mx {
			return usagef("--max-drafts %d exceeds the %d drafts a block of %s proposes (%s %d)", c.maxDrafts, mx, m.DraftName,
				d.Values().Schema().FullName(schema.BlockSize), info.BlockSize)
		}
		if c.threshold > 0 && !info.HasConfidence {
			return usagef("--confidence-threshold: %s has no confidence head (conf_proj)", m.DraftName)
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

// tapForms are the values of --tap-form, as kimik3.TapForm names them.
var tapForms = []string{kimik3.TapPartialSum.String(), kimik3.TapMixed.String()}

// setTapForm applies --tap-form (form "" keeps the target's default). Only targets whose
// hidden-state taps can read more than one tensor (kimi-k3, kimi-linear) take it; for any
// other target the flag is a usage error, never silently ignored.
func (m *models) setTapForm(form string) error {
	if form == "" {
		return nil
	}
	t, ok := m.Target.(interface{ SetTapForm(kimik3.TapForm) })
	if !ok {
		return usagef("--tap-form: %s is a %s target, whose taps read one tensor; only kimi-k3 and kimi-linear targets have a tap form",
			m.TargetName, m.TargetArch.Schema.Arch)
	}
	f := kimik3.TapPartialSum
	if form == kimik3.TapMixed.String() {
		f = kimik3.TapMixed
	}
	t.SetTapForm(f)
	return nil
}
