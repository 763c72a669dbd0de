package deepseek2

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Target is a loaded deepseek2 model with its latent KV cache. It implements
// runtime.Target.
type Target struct {
	Config Config
	File   *gguf.File

	tokEmbd *kernels.Mat
	outNorm []float32
	output  *kernels.Mat
	layers  []layer
	cache   *mla.LatentCache
	rewind  runtime.RewindWindow
	tokens  []string

	maxBatch int
	s        scratch
	weights  *model.Binder
	values   *schema.Values
	numerics runtime.Numerics
	probe    *runtime.Probe // nil outside a diagnostic re-run
}

var _ runtime.Target = (*Target)(nil)

// SetProbe checks every operation of the forwards that follow with p (nil: none), for the
// diagnostic re-run of a forward that produced a non-finite value (runtime.Probed).
func (t *Target) SetProbe(p *runtime.Probe) { t.probe = p }

// Numerics says which kernel path and activation precision the target's products use.
func (t *Target) Numerics() runtime.Numerics { return t.numerics }

type layer struct {
	attnNorm, ffnNorm []float32
	attn              *mla.Attention
	dense             model.FFN // the dense FFN (layers < NDense)
	// MoE
	router  *kernels.Mat
	bias    []float32
	experts []model.FFN
	shared  *model.FFN // nil without shared experts
	oneRow  bool       // every expert (and the shared experts) has a stacked gate-up: moeOneRow
}

type scratch struct {
	x, h, attnOut, ffA, ffB, ffOut []float32
	moe                            moeScratch
	pos                            []int
}

// Load binds a deepseek2 GGUF (already opened, mmap-backed) through its declaration and
// allocates its cache (opt.Context 0: min(context_length, 4096)). A cache size that
// overflows is an error; the memory is not checked (see Config.CacheBytes).
func Load(f *gguf.File, opt runtime.Options) (*Target, error) {
	cfg, v, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = kernels.MaxBatch
	}
	if opt.MaxBatch > kernels.MaxBatch {
		return nil, fmt.Errorf("max batch %d exceeds the kernels' limit %d", opt.MaxBatch, kernels.MaxBatch)
	}
	if opt.Context <= 0 {
		opt.Context = min(cfg.NCtx, 4096)
	}
	b := model.NewBinder(f, v, opt.Pack, opt.Precision())
	t := &Target{Config: cfg, File: f, maxBatch: opt.MaxBatch, values: v, tokens: v.Strs(schema.TokTokens)}
	t.tokEmbd = b.Mat(schema.TokenEmbd, -1)
	t.outNorm = b.Vec(schema.OutputNorm, -1)
	if b.Has(schema.Output, -1) {
		t.output = b.Mat(schema.Output, -1)
	} else {
		t.output = t.tokEmbd
	}
	a := cfg.Attn
	for i := 0; i < cfg.NLayer; i++ {
		var l layer
		l.attnNorm = b.Vec(schema.AttnNorm, i)
		l.ffnNorm = b.Vec(schema.FFNNorm, i)
		w := b.Attention(i, a)
		if v.Dense(i) {
			l.dense = b.FFN(schema.FFNGate, schema.FFNUp, schema.FFNDown, i)
		} else {
			l.router = b.Mat(schema.FFNGateInp, i)
			if b.Has(schema.ExpProbsB, i) {
				l.bias = b.Vec(schema.ExpProbsB, i)
			}
			l.experts = b.Experts(i)
			if cfg.NShared > 0 {
				sh := b.FFN(schema.FFNGateShexp, schema.FFNUpShexp, schema.FFNDownShexp, i)
				l.shared = &sh
			}
			l.oneRow = l.shared == nil || l.shared.GateUp != nil
			for _, e := range l.experts {
				l.oneRow = l.oneRow && e.GateUp != nil
			}
		}
		if b.Err() != nil {
			b.Release()
			return nil, b.Err()
		}
		at, err := mla.NewAttention(a, w, opt.MaxBatch)
		if err != nil {
			b.Release()
			return nil, fmt.Errorf("%s: layer %d: %w", f.Path, i, err)
		}
		l.attn = at
		t.layers = append(t.layers, l)
	}
	if err := b.Finish(); err != nil {
		b.Release()
		return nil, err
	}
	t.weights = b
	t.numerics = runtime.NumericsFor(opt, b.BF16())
	t.numerics.Note = b.QuantNote(t.numerics.Note)
	if t.cache, err = mla.AllocLatentCache(cfg.NLayer, opt.Context, a.KVLoraRank, a.DRope); err != nil {
		b.Release()
		return nil, fmt.Errorf("%s: context %d: %w", f.Path, opt.Context, err)
	}
	t.allocScratch()
	return t, nil
}

func (t *Target) allocScratch() {
	n, E := t.maxBatch, t.Config.NEmbd
	ff := max(t.Config.NFF, t.Config.NFFExp*max(1, t.Config.NShared))
	t.s = scratch{
		x: make([]float32, n*E), h: make([]float32, n*E), attnOut: make([]float32, n*E),
		ffA: make([]float32, n*ff), ffB: make([]float32, 2*n*ff), ffOut: make([]float32, n*E),
		pos: make([]int, n),
	}
	if t.Config.NExpert > 0 {
		t.s.moe = newMoEScratch(n, t.Config)
	}
}

// Close frees the repacked weights (with Options.Pack); the GGUF file stays open.
func (t *Target) Close() { t.weights.Release() }

// Values returns the file's keys as resolved against the deepseek2 declaration, with what
// the loader read and bound (see schema.Values.Read and Bound).
func (t *Target) Values() *schema.Values { return t.values }

// Dims returns the target's sizes.
func (t *Target) Dims() runtime.Dims {
	return runtime.Dims{NEmbd: t.Config.NEmbd, NVocab: t.Config.NVocab, NLayer: t.Config.NLayer}
}

// MaxBatch is the most tokens one Forward accepts.
func (t *Target) MaxBatch() int { return t.maxBatch }

// Len returns the number of tokens in the KV cache.
func (t *Target) Len() int { return t.cache.Len() }

// Cap returns the KV cache capacity in tokens.
func (t *Target) Cap() int { return t.cache.Cap() }

// Rewind drops the cached rows beyond n, which must lie within the last Forward
// (runtime.Target's contract).
func (t *Target) Rewind(n int) error {
	if err := t.rewind.Check(t.Name(), n); err != nil {
		return err
	}
	return t.cache.Truncate(n)
}

// Reset empties the KV cache.
func (t *Target) Reset() { t.cache.Reset(); t.rewind.Reset() }

// Embed writes the embedding of token id into dst (NEmbd values).
func (t *Target) Embed(id int, dst []float32) { t.tokEmbd.Row(id, dst) }

// Head returns the output head (token_embd when tied).
func (t *Target) Head() runtime.Head { return t.output }

// Tokens returns the tokenizer's tokens (nil when the file has none).
func (t *Target) Tokens() []string { return t.tokens }

// Name returns the file's path.
func (t *Target) Name() string { return t.File.Path }

// Forward runs the target on tokens at positions Len()..Len()+n-1, appends them to the KV
// cache, and fills out. logitsFrom skips the lm_head for rows before it (plain decoding only
// needs the last row). taps lists decoder layers whose outputs are copied into out.Hidden.
// out's buffers are reused when large enough.
func (t *Target) Forward(tokens []int, logitsFrom int, taps []int, out *runtime.Step) error {
	n := len(tokens)
	c := &t.Config
	if n == 0 || n > t.maxBatch {
		return fmt.Errorf("forward: %d tokens, want 1..%d", n, t.maxBatch)
	}
	if t.cache.Len()+n > t.cache.Cap() {
		return fmt.Errorf("forward: context full (%d + %d tokens > capacity %d)", t.cache.Len(), n, t.cache.Cap())
	}
	E := c.NEmbd
	for i, id := range tokens {
		if id < 0 || id >= c.NVocab {
			return fmt.Errorf("forward: token id %d out of range [0, %d)", id, c.NVocab)
		}
		t.tokEmbd.Row(id, t.s.x[i*E:(i+1)*E])
		t.s.pos[i] = t.cache.Len() + i
	}
	if out.Hidden == nil {
		out.Hidden = map[int][]float32{}
	}
	for _, k := range taps {
		if k < 0 || k >= c.NLayer {
			return fmt.Errorf("forward: hidden state of layer %d requested, model has %d", k, c.NLayer)
		}
		out.Hidden[k] = model.Grow(out.Hidden[k], n*E)
	}
	x, h := t.s.x[:n*E], t.s.h[:n*E]
	p := t.probe
	p.Check(-1, "token embedding", schema.TokenEmbd, x, n)
	for li := range t.layers {
		l := &t.layers[li]
		model.RMSRows(h, x, l.attnNorm, n, E, c.Eps)
		p.Check(li, "attention norm", schema.AttnNorm, h, n)
		if err := l.attn.Forward(t.s.attnOut[:n*E], h, n, t.s.pos[:n], t.cache, li, mla.Causal); err != nil {
			return err
		}
		p.Check(li, "MLA attention", "blk.{i}.attn_q_a/q_a_norm/q_b/kv_a_mqa/kv_a_norm/k_b/v_b/output.weight", t.s.attnOut[:n*E], n)
		model.AddTo(x, t.s.attnOut[:n*E])
		model.RMSRows(h, x, l.ffnNorm, n, E, c.Eps)
		p.Check(li, "feed-forward norm", schema.FFNNorm, h, n)
		if li < c.NDense {
			l.dense.Forward(t.s.ffOut[:n*E], h, n, t.s.ffA, t.s.ffB)
			p.Check(li, "dense feed-forward", "blk.{i}.ffn_gate/up/down.weight", t.s.ffOut[:n*E], n)
		} else {
			t.moe(l, t.s.ffOut[:n*E], h, n)
			p.Check(li, "MoE feed-forward", "blk.{i}.ffn_gate_inp.weight, exp_probs_b.bias, ffn_gate/up/down_exps.weight, ffn_gate/up/down_shexp.weight", t.s.ffOut[:n*E], n)
		}
		model.AddTo(x, t.s.ffOut[:n*E])
		p.Check(li, "residual sum", "", x, n)
		for _, k := range taps {
			if k == li {
				copy(out.Hidden[k], x)
			}
		}
	}
	if err := t.cache.Advance(n); err != nil {
		return err
	}
	t.rewind.Forwarded(t.cache.Len()-n, t.cache.Len())
	V := c.NVocab
	out.Logits = model.Grow(out.Logits, n*V)
	if logitsFrom < 0 {
		logitsFrom = 0
	}
	if logitsFrom < n {
		m := n - logitsFrom
		model.RMSRows(h[:m*E], x[logitsFrom*E:], t.outNorm, m, E, c.Eps)
		p.Check(-1, "output norm", schema.OutputNorm, h[:m*E], m)
		t.output.MatMul(out.Logits[logitsFrom*V:n*V], h[:m*E], m)
		p.Check(-1, "output head", schema.Output, out.Logits[logitsFrom*V:n*V], m)
	}
	return nil
}
