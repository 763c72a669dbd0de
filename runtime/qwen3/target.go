package qwen3

import (
	"fmt"
	goruntime "runtime"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Target is a loaded qwen3 model with its KV cache. It implements runtime.Target.
type Target struct {
	Config Config
	File   *gguf.File

	tokEmbd *kernels.Mat
	outNorm []float32
	output  *kernels.Mat // token_embd when tied
	layers  []layer
	cache   *kvCache
	rewind  runtime.RewindWindow
	rope    *mla.RoPE
	attn    *attention
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

type layer struct {
	attnNorm, ffnNorm, qNorm, kNorm []float32
	qkv                             model.QKV
	o                               *kernels.Mat
	ffn                             model.FFN
}

type scratch struct {
	x, h, q, k, v, qkv, att, attnOut, ffA, ffB, ffOut []float32
	cs                                                []float32 // per row: the RoPE table of its position
}

// Load binds a qwen3 GGUF (already opened, mmap-backed) through its declaration and
// allocates its KV cache (opt.Context 0: min(context_length, 4096)). A cache size that
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
	for i := 0; i < cfg.NLayer; i++ {
		t.layers = append(t.layers, layer{
			attnNorm: b.Vec(schema.AttnNorm, i),
			qkv:      b.QKV(i),
			qNorm:    b.Vec(schema.AttnQNorm, i), kNorm: b.Vec(schema.AttnKNorm, i),
			o:       b.Mat(schema.AttnOutput, i),
			ffnNorm: b.Vec(schema.FFNNorm, i),
			ffn:     b.FFN(schema.FFNGate, schema.FFNUp, schema.FFNDown, i),
		})
		if b.Err() != nil {
			b.Release()
			return nil, b.Err()
		}
	}
	if err := b.Finish(); err != nil {
		b.Release()
		return nil, err
	}
	t.weights = b
	t.numerics = runtime.NumericsFor(opt, b.BF16())
	t.numerics.Note = b.QuantNote(t.numerics.Note)
	if t.cache, err = newCache(cfg.NLayer, opt.Context, cfg.KVWidth()); err != nil {
		b.Release()
		return nil, fmt.Errorf("%s: context %d: %w", f.Path, opt.Context, err)
	}
	t.rope = mla.NewRoPE(cfg.rope()) // validated by readConfig
	t.attn = newAttention(&cfg, opt.Context, goruntime.GOMAXPROCS(0))
	t.allocScratch()
	return t, nil
}

func (t *Target) allocScratch() {
	n, c := t.maxBatch, &t.Config
	E, Q, KV := c.NEmbd, c.NHead*c.HeadDim, c.KVWidth()
	t.s = scratch{
		x: make([]float32, n*E), h: make([]float32, n*E),
		q: make([]float32, n*Q), k: make([]float32, n*KV), v: make([]float32, n*KV), qkv: make([]float32, n*(Q+2*KV)),
		att: make([]float32, n*Q), attnOut: make([]float32, n*E),
		ffA: make([]float32, n*c.NFF), ffB: make([]float32, 2*n*c.NFF), ffOut: make([]float32, n*E),
		cs: make([]float32, n*c.HeadDim),
	}
}

// Numerics says which kernel path and activation precision the target's products use.
func (t *Target) Numerics() runtime.Numerics { return t.numerics }

// Close frees the repacked weights (with Options.Pack); the GGUF file stays open.
func (t *Target) Close() { t.weights.Release() }

// Values returns the file's keys as resolved against the qwen3 declaration, with what the
// loader read and bound (see schema.Values.Read and Bound).
func (t *Target) Values() *schema.Values { return t.values }

// Dims returns the target's sizes.
func (t *Target) Dims() runtime.Dims {
	return runtime.Dims{NEmbd: t.Config.NEmbd, NVocab: t.Config.NVocab, NLayer: t.Config.NLayer}
}

// MaxBatch is the most tokens one Forward accepts.
func (t *Target) MaxBatch() int { return t.maxBatch }

// Len returns the number of tokens in the KV cache.
func (t *Target) Len() int { return t.cache.n }

// Cap returns the KV cache capacity in tokens.
func (t *Target) Cap() int { return t.cache.capacity }

// Rewind drops the cached rows beyond n, which must lie within the last Forward
// (runtime.Target's contract).
func (t *Target) Rewind(n int) error {
	if err := t.rewind.Check(t.Name(), n); err != nil {
		return err
	}
	return t.cache.truncate(n)
}

// Reset empties the KV cache.
func (t *Target) Reset() { t.cache.n = 0; t.rewind.Reset() }

// Embed writes the embedding of token id into dst (NEmbd values).
func (t *Target) Embed(id int, dst []float32) { t.tokEmbd.Row(id, dst) }

// Head returns the output head (token_embd when tied).
func (t *Target) Head() runtime.Head { return t.output }

// Tokens returns the tokenizer's tokens (nil when the file has none).
func (t *Target) Tokens() []string { return t.tokens }

// Name returns the file's path.
func (t *Target) Name() string { return t.File.Path }

// Forward runs the target on tokens at positions Len()..Len()+n-1, appends them to the KV
// cache, and fills out. logitsFrom skips the head for rows before it (plain decoding only
// needs the last row). taps lists decoder layers whose outputs are copied into out.Hidden.
// out's buffers are reused when large enough.
func (t *Target) Forward(tokens []int, logitsFrom int, taps []int, out *runtime.Step) error {
	n := len(tokens)
	c := &t.Config
	if n == 0 || n > t.maxBatch {
		return fmt.Errorf("forward: %d tokens, want 1..%d", n, t.maxBatch)
	}
	L := t.cache.n
	if L+n > t.cache.capacity {
		return fmt.Errorf("forward: context full (%d + %d tokens > capacity %d)", L, n, t.cache.capacity)
	}
	E, D, Q, KV := c.NEmbd, c.HeadDim, c.NHead*c.HeadDim, c.KVWidth()
	for i, id := range tokens {
		if id < 0 || id >= c.NVocab {
			return fmt.Errorf("forward: token id %d out of range [0, %d)", id, c.NVocab)
		}
		t.tokEmbd.Row(id, t.s.x[i*E:(i+1)*E])
		t.rope.CosSin(t.s.cs[i*D:(i+1)*D], L+i)
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
	s := &t.s
	x, h := s.x[:n*E], s.h[:n*E]
	q, k, v, att := s.q[:n*Q], s.k[:n*KV], s.v[:n*KV], s.att[:n*Q]
	p := t.probe
	p.Check(-1, "token embedding", schema.TokenEmbd, x, n)
	for li := range t.layers {
		l := &t.layers[li]
		model.RMSRows(h, x, l.attnNorm, n, E, c.Eps)
		p.Check(li, "attention norm", schema.AttnNorm, h, n)
		l.qkv.Forward(q, k, v, h, n, s.qkv)
		for i := range n {
			cs := s.cs[i*D : (i+1)*D]
			qi, ki := q[i*Q:(i+1)*Q], k[i*KV:(i+1)*KV]
			normHeads(qi, l.qNorm, D, c.Eps)
			rotateHeads(qi, cs, D)
			normHeads(ki, l.kNorm, D, c.Eps)
			rotateHeads(ki, cs, D)
			ck, cv := t.cache.slot(li, L+i)
			copy(ck, ki)
			copy(cv, v[i*KV:(i+1)*KV])
		}
		ck, cv := t.cache.rows(li, L+n)
		t.attn.run(att, q, ck, cv, n, L, KV)
		l.o.MatMul(s.attnOut[:n*E], att, n)
		p.Check(li, "attention", "blk.{i}.attn_q/k/v/q_norm/k_norm/output.weight", s.attnOut[:n*E], n)
		model.AddTo(x, s.attnOut[:n*E])
		model.RMSRows(h, x, l.ffnNorm, n, E, c.Eps)
		p.Check(li, "feed-forward norm", schema.FFNNorm, h, n)
		l.ffn.Forward(s.ffOut[:n*E], h, n, s.ffA, s.ffB)
		p.Check(li, "feed-forward", "blk.{i}.ffn_gate/up/down.weight", s.ffOut[:n*E], n)
		model.AddTo(x, s.ffOut[:n*E])
		p.Check(li, "residual sum", "", x, n)
		for _, tk := range taps {
			if tk == li {
				copy(out.Hidden[tk], x)
			}
		}
	}
	t.cache.n = L + n
	t.rewind.Forwarded(L, L+n)
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
		p.Check(-1, "output head", schema.Output+" (or token_embd.weight when tied)", out.Logits[logitsFrom*V:n*V], m)
	}
	return nil
}
