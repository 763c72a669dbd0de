// Package registry is the table of the model architectures dspark's runtime runs: for each
// GGUF declaration (gguf/schema) of a target or a draft, the package that reads its
// hyperparameters and loads it. A caller opens a file, looks its declaration up here (by
// general.architecture, and the declaration's Select when several share one) and loads it
// without naming the architecture, so a new architecture is one entry in this table (and its
// declaration and package).
//
// Any registered draft runs against any registered target whose sizes it fits (the draft's
// loader checks them against runtime.Target.Dims and the tokenizers).
package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashgqa"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/kimik3"
	"github.com/dspark-dev/dspark/runtime/qwen3"
	"github.com/dspark-dev/dspark/runtime/qwen35"
)

// Info is what a model file says before it is loaded: enough to bound a context and the
// memory its KV cache takes.
type Info struct {
	// ContextLength is the trained context length (0 for a draft: its context is its
	// target's); ContextKey names the key it comes from, for messages.
	ContextLength int
	ContextKey    string
	// CacheBytes returns the bytes of the KV cache a load for a ctx-token context allocates,
	// or an error if ctx is not positive or the size overflows.
	CacheBytes func(ctx int) (int64, error)
	// Cache describes the cache's size per position, for messages ("28 layers x 2048 values
	// x 4 bytes per position").
	Cache string
	// Layers, Embd and Vocab are the file's sizes (a draft's layers are its own).
	Layers, Embd, Vocab int
	// Draft describes a draft's blocks (zero for a target).
	Draft runtime.DraftInfo
	// TapWidth is the width of one tapped target hidden state a draft reads (its target's
	// hidden size as the file records it; zero for a target).
	TapWidth int
}

// Target is a loaded target model.
type Target interface {
	runtime.Target
	// Numerics says which kernel path and activation precision its products use.
	Numerics() runtime.Numerics
	// Close frees what the load allocated outside the Go heap; the file stays open.
	Close()
	// Values are the file's keys resolved against its declaration, with what the load read
	// and bound.
	Values() *schema.Values
}

// Draft is a loaded draft model.
type Draft interface {
	runtime.Draft
	Numerics() runtime.Numerics
	Close()
	Values() *schema.Values
}

// TargetArch is one target architecture the runtime runs.
type TargetArch struct {
	Schema *schema.Schema
	Info   func(f *gguf.File) (Info, error)
	Load   func(f *gguf.File, opt runtime.Options) (Target, error)
}

// DraftArch is one draft architecture the runtime runs, against any target.
type DraftArch struct {
	Schema *schema.Schema
	Info   func(f *gguf.File) (Info, error)
	Load   func(f *gguf.File, target runtime.Target, opt runtime.Options) (Draft, error)
	// Standalone loads the draft without its target, head (Vocab x Embd) standing in for the
	// target's embedding and lm_head: for timing a full-size draft alone (run --draft-only).
	Standalone func(f *gguf.File, head runtime.EmbeddingHead, opt runtime.Options) (Draft, error)
	// PerToken lists the declared tensors a draft reads once per committed token (the
	// context projection of the tapped features), not once per block: BlockBytes leaves
	// them out.
	PerToken []string
}

// perPosition formats a cache's size per position.
func perPosition(layers, values int) string {
	return fmt.Sprintf("%d layers x %d values x 4 bytes per position", layers, values)
}

// Targets are the target architectures, in the order they were added.
var Targets = []*TargetArch{
	{
		Schema: schema.Deepseek2,
		Info: func(f *gguf.File) (Info, error) {
			c, err := deepseek2.ReadConfig(f)
			if err != nil {
				return Info{}, err
			}
			return Info{ContextLength: c.NCtx, ContextKey: schema.Deepseek2.FullName(schema.ContextLength),
				CacheBytes: c.CacheBytes, Cache: perPosition(c.NLayer, c.Attn.KVLoraRank+c.Attn.DRope),
				Layers: c.NLayer, Embd: c.NEmbd, Vocab: c.NVocab}, nil
		},
		Load: func(f *gguf.File, opt runtime.Options) (Target, error) { return target(deepseek2.Load(f, opt)) },
	},
	{
		Schema: schema.Qwen3,
		Info: func(f *gguf.File) (Info, error) {
			c, err := qwen3.ReadConfig(f)
			if err != nil {
				return Info{}, err
			}
			return Info{ContextLength: c.NCtx, ContextKey: schema.Qwen3.FullName(schema.ContextLength),
				CacheBytes: c.CacheBytes, Cache: perPosition(c.NLayer, 2*c.KVWidth()),
				Layers: c.NLayer, Embd: c.NEmbd, Vocab: c.NVocab}, nil
		},
		Load: func(f *gguf.File, opt runtime.Options) (Target, error) { return target(qwen3.Load(f, opt)) },
	},
	qwen35Arch(schema.Qwen35),
	qwen35Arch(schema.Qwen35MoE),
	kimiArch(schema.KimiK3),
	kimiArch(schema.KimiLinear),
}

// kimiArch is the entry of the Kimi hybrids (kimi-k3 and kimi-linear share a package). Their
// cache is the latent cache of the MLA blocks plus the KDA blocks' recurrent states, kept
// twice, and the rollback stash of a verify batch of the kernels' limit.
func kimiArch(s *schema.Schema) *TargetArch {
	return &TargetArch{
		Schema: s,
		Info: func(f *gguf.File) (Info, error) {
			c, err := kimik3.ReadConfig(f)
			if err != nil {
				return Info{}, err
			}
			kda, mlas := c.Layers()
			return Info{ContextLength: c.NCtx, ContextKey: s.FullName(schema.ContextLength),
				CacheBytes: func(ctx int) (int64, error) { return c.StateBytes(ctx, kernels.MaxBatch) },
				Cache: perPosition(mlas, c.Attn.KVLoraRank+c.Attn.DRope) + fmt.Sprintf(", plus %d KDA blocks x 2 states of %d values and a rollback stash",
					kda, c.StateLen()),
				Layers: c.NLayer, Embd: c.NEmbd, Vocab: c.NVocab}, nil
		},
		Load: func(f *gguf.File, opt runtime.Options) (Target, error) { return target(kimik3.Load(f, opt)) },
	}
}

// qwen35Arch is the entry of the hybrid targets (qwen35 and qwen35moe share a package).
// Their cache is the KV cache of the attention blocks plus the DeltaNet blocks' recurrent
// states, kept twice, and the rollback stash of a verify batch of the kernels' limit.
func qwen35Arch(s *schema.Schema) *TargetArch {
	return &TargetArch{
		Schema: s,
		Info: func(f *gguf.File) (Info, error) {
			c, err := qwen35.ReadConfig(f)
			if err != nil {
				return Info{}, err
			}
			rec, att := c.Layers()
			return Info{ContextLength: c.NCtx, ContextKey: s.FullName(schema.ContextLength),
				CacheBytes: func(ctx int) (int64, error) { return c.StateBytes(ctx, kernels.MaxBatch) },
				Cache: perPosition(att, 2*c.KVWidth()) + fmt.Sprintf(", plus %d recurrent blocks x 2 states of %d values and a rollback stash",
					rec, c.StateLen()),
				Layers: c.NLayer, Embd: c.NEmbd, Vocab: c.NVocab}, nil
		},
		Load: func(f *gguf.File, opt runtime.Options) (Target, error) { return target(qwen35.Load(f, opt)) },
	}
}

// Drafts are the draft architectures, in the order they were added.
var Drafts = []*DraftArch{
	{
		Schema: schema.DFlashMLA,
		Info: func(f *gguf.File) (Info, error) {
			c, err := dflashmla.ReadConfig(f)
			if err != nil {
				return Info{}, err
			}
			return Info{CacheBytes: c.CacheBytes, Cache: perPosition(c.NLayer, c.Attn.KVLoraRank+c.Attn.DRope) + " plus one block",
				Layers: c.NLayer, Embd: c.NEmbd, Vocab: c.NVocab, Draft: c.Info(), TapWidth: c.TargetHidden}, nil
		},
		Load: func(f *gguf.File, t runtime.Target, opt runtime.Options) (Draft, error) {
			return draft(dflashmla.Load(f, t, opt))
		},
		Standalone: func(f *gguf.File, head runtime.EmbeddingHead, opt runtime.Options) (Draft, error) {
			return draft(dflashmla.LoadStandalone(f, head, opt))
		},
		PerToken: []string{schema.FC, schema.EncOutputNorm},
	},
	{
		Schema: schema.DFlashGQA,
		Info: func(f *gguf.File) (Info, error) {
			c, err := dflashgqa.ReadConfig(f)
			if err != nil {
				return Info{}, err
			}
			return Info{CacheBytes: c.CacheBytes, Cache: perPosition(c.NLayer, 2*c.NHeadKV*c.HeadDim) + " plus one block",
				Layers: c.NLayer, Embd: c.NEmbd, Vocab: c.NVocab, Draft: c.Info(), TapWidth: c.NEmbd}, nil
		},
		Load: func(f *gguf.File, t runtime.Target, opt runtime.Options) (Draft, error) {
			return draft(dflashgqa.Load(f, t, opt))
		},
		Standalone: func(f *gguf.File, head runtime.EmbeddingHead, opt runtime.Options) (Draft, error) {
			return draft(dflashgqa.LoadStandalone(f, head, opt))
		},
		PerToken: []string{schema.FC, schema.EncOutputNorm},
	},
}

// target converts a package's load result, keeping a failed load's nil a nil interface (a
// nil *T in an interface would not compare equal to nil).
func target[T Target](t T, err error) (Target, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}

func draft[D Draft](d D, err error) (Draft, error) {
	if err != nil {
		return nil, err
	}
	return d, nil
}

// LookupTarget returns the target architecture of f, or an error naming the file, what it
// is and the architectures the runtime runs.
func LookupTarget(f *gguf.File) (*TargetArch, error) {
	s := schema.For(schema.FileSource(f))
	for _, a := range Targets {
		if s != nil && a.Schema == s {
			return a, nil
		}
	}
	return nil, notRun(f, s, "target", targetNames())
}

// LookupDraft returns the draft architecture of f, or an error naming the file, what it is
// and the architectures the runtime runs.
func LookupDraft(f *gguf.File) (*DraftArch, error) {
	s := schema.For(schema.FileSource(f))
	for _, a := range Drafts {
		if s != nil && a.Schema == s {
			return a, nil
		}
	}
	return nil, notRun(f, s, "draft", draftNames())
}

func notRun(f *gguf.File, s *schema.Schema, role string, known []string) error {
	what := fmt.Sprintf("general.architecture %q", f.Architecture())
	switch {
	case s == nil:
		what += " has no declaration"
	case slices.Contains(targetNames(), s.Name):
		what += " is a target"
	case slices.Contains(draftNames(), s.Name):
		what += " is a draft"
	default:
		what += fmt.Sprintf(" (%s) is not run by dspark's runtime", s.Name)
	}
	return fmt.Errorf("%s: %s, not a %s the runtime runs (%ss: %s)", f.Path, what, role, role, strings.Join(known, ", "))
}

func targetNames() []string {
	var out []string
	for _, a := range Targets {
		out = append(out, a.Schema.Name)
	}
	return out
}

func draftNames() []string {
	var out []string
	for _, a := range Drafts {
		out = append(out, a.Schema.Name)
	}
	return out
}

// CheckDraft reports why dspark's runtime would not load f as a draft, from its header
// alone (nothing is loaded and no tensor data is read): no registered draft architecture,
// hyperparameters its package refuses, or the first tensor the loader would refuse. nil
// means the file loads (against any target whose sizes it fits).
func CheckDraft(f *gguf.File) error {
	a, err := LookupDraft(f)
	if err != nil {
		return err
	}
	return checkHeader(f, a.Schema, a.Info)
}

// CheckTarget reports why dspark's runtime would not load f as a target, from its header
// alone (nothing is loaded and no tensor data is read): no registered target architecture,
// hyperparameters its package refuses, or the tensors the loader would refuse (every matrix
// of a type the runtime does not run, in one error). nil means the file loads.
func CheckTarget(f *gguf.File) error {
	a, err := LookupTarget(f)
	if err != nil {
		return err
	}
	return checkHeader(f, a.Schema, a.Info)
}

// checkHeader makes a load's header checks: the package's hyperparameters, the resolved
// declaration and every tensor the binder would refuse.
func checkHeader(f *gguf.File, s *schema.Schema, info func(*gguf.File) (Info, error)) error {
	if _, err := info(f); err != nil {
		return err
	}
	v, err := model.Resolve(f, s)
	if err != nil {
		return err
	}
	if err := model.CheckTensors(f, v); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	return nil
}

// declared calls fn with every tensor of s's declaration that f holds, per-layer tensors
// expanded over layers blocks; a tensor f holds outside the declaration is not visited.
func declared(f *gguf.File, s *schema.Schema, layers int, fn func(name string, t *gguf.TensorInfo)) {
	seen := map[string]bool{}
	for _, d := range s.Tensors {
		n := 1
		if d.Scope != schema.Global {
			n = layers
		}
		for i := range n {
			name := schema.Name(d.Name, i)
			if seen[name] {
				continue
			}
			seen[name] = true
			if t, ok := f.Tensor(name); ok {
				fn(name, t)
			}
		}
	}
}

// StepBytes is the weight bytes one plain decode step of a target in f reads, from its
// declaration: every declared tensor f holds, except the token embedding, of which a step
// reads one row (all of it when it is also the output head: no schema.Output tensor).
func (a *TargetArch) StepBytes(f *gguf.File) (int64, error) {
	info, err := a.Info(f)
	if err != nil {
		return 0, err
	}
	_, untied := f.Tensor(schema.Output)
	var n int64
	declared(f, a.Schema, info.Layers, func(name string, t *gguf.TensorInfo) {
		if name == schema.TokenEmbd && untied && len(t.Dims) > 0 {
			n += int64(t.Size / max(1, t.Dims[len(t.Dims)-1]))
			return
		}
		n += int64(t.Size)
	})
	return n, nil
}

// BlockBytes is the weight bytes one draft block of the draft in d reads against the target
// in t (of architecture target), from the declarations: the draft's declared tensors except
// its PerToken ones and its token embedding (a block reads a few rows of it), plus the
// target's output head, which the block's logits go through (its token embedding when the
// head is tied).
func (a *DraftArch) BlockBytes(d *gguf.File, target *TargetArch, t *gguf.File) (int64, error) {
	info, err := a.Info(d)
	if err != nil {
		return 0, err
	}
	var n int64
	declared(d, a.Schema, info.Layers, func(name string, ti *gguf.TensorInfo) {
		if name != schema.TokenEmbd && !slices.Contains(a.PerToken, name) {
			n += int64(ti.Size)
		}
	})
	head := schema.Output
	if _, ok := t.Tensor(head); !ok {
		head = schema.TokenEmbd
	}
	if slices.ContainsFunc(target.Schema.Tensors, func(x schema.Tensor) bool { return x.Name == head }) {
		if o, ok := t.Tensor(head); ok {
			n += int64(o.Size)
		}
	}
	return n, nil
}
