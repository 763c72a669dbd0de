package qwen35

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/internal/rollback"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Target is a loaded qwen35 or qwen35moe model with its state: the KV cache of the
// attention blocks and the recurrent state of the DeltaNet blocks. It implements
// runtime.Target.
type Target struct {
	Config Config
	File   *gguf.File

	tokEmbd *kernels.Mat
	outNorm []float32
	output  *kernels.Mat // token_embd when tied
	layers  []layer
	rope    *mla.RoPE
	tokens  []string

	n, capacity int // positions held; KV cache capacity
	rewind      runtime.RewindWindow
	slots       rollback.Slots // the DeltaNet blocks' state slots
	convCur     int            // the DeltaNet blocks' current conv window (0 or 1)
	rows        int            // rows of the last forward the current state reflects

	maxBatch int
	s        scratch
	weights  *model.Binder
	values   *schema.Values
	numerics runtime.Numerics
	probe    *runtime.Probe
}

var (
	_ runtime.Target = (*Target)(nil)
	_ runtime.Probed = (*Target)(nil)
)

// SetProbe checks every operation of the forwards that follow with p (nil: none), for the
// diagnostic re-run of a forward that produced a non-finite value (runtime.Probed).
func (t *Target) SetProbe(p *runtime.Probe) { t.probe = p }

// layer is one block: its norms, its mixer (rec or att) and its feed-forward (ffn or moe).
type layer struct {
	attnNorm, postNorm []float32
	rec                *recurrent
	att                *gated
	ffn                model.FFN
	moe                *moe
}

type scratch struct {
	x, h, mix, ffOut, ffA, ffB []float32
	rec                        recScratch
	att                        attScratch
	moe                        moeScratch
}

// Load binds a qwen35 or qwen35moe GGUF (already opened, mmap-backed) through its
// declaration and allocates its state (opt.Context 0: min(context_length, 4096)).
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
	if _, err := cfg.StateBytes(opt.Context, opt.MaxBatch); err != nil {
		return nil, fmt.Errorf("%s: context %d: %w", f.Path, opt.Context, err)
	}
	b := model.NewBinder(f, v, opt.Pack, opt.Precision())
	t := &Target{Config: cfg, File: f, maxBatch: opt.MaxBatch, capacity: opt.Context, values: v, tokens: v.Strs(schema.TokTokens),
		slots: rollback.NewSlots(checkpoints, opt.MaxBatch)}
	t.tokEmbd = b.Mat(schema.TokenEmbd, -1)
	t.outNorm = b.Vec(schema.OutputNorm, -1)
	if b.Has(schema.Output, -1) {
		t.output = b.Mat(schema.Output, -1)
	} else {
		t.output = t.tokEmbd
	}
	KV := cfg.KVWidth()
	for i := 0; i < cfg.NLayer; i++ {
		l := layer{attnNorm: b.Vec(schema.AttnNorm, i), postNorm: b.Vec(schema.PostAttnNorm, i)}
		if cfg.Recurrent[i] {
			r := newRecurrent(&cfg, opt.MaxBatch, t.slots.N())
			if r.in = b.Stacked(i, schema.AttnQKV, schema.AttnGate, schema.SSMBeta, schema.SSMAlpha); r.in == nil {
				r.qkv, r.gate = b.Mat(schema.AttnQKV, i), b.Mat(schema.AttnGate, i)
				r.beta, r.alpha = b.Mat(schema.SSMBeta, i), b.Mat(schema.SSMAlpha, i)
			}
			r.out = b.Mat(schema.SSMOut, i)
			r.dtBias, r.a, r.norm = b.Vec(schema.SSMDtBias, i), b.Vec(schema.SSMA, i), b.Vec(schema.SSMNorm, i)
			if cw := b.Mat(schema.SSMConv1D, i); cw != nil {
				C, K := cfg.ConvChannels(), cfg.ConvK
				g := make([]float32, C*K)
				for ch := range C {
					cw.Row(ch, g[ch*K:(ch+1)*K])
				}
				r.convW = kernels.ConvWeights(g, K, C)
			}
			l.rec = &r
		} else {
			l.att = &gated{qkv: b.QKV(i), qNorm: b.Vec(schema.AttnQNorm, i), kNorm: b.Vec(schema.AttnKNorm, i),
				o: b.Mat(schema.AttnOutput, i), k: make([]float32, opt.Context*KV), v: make([]float32, opt.Context*KV)}
		}
		if cfg.MoE {
			l.moe = &moe{router: b.Mat(schema.FFNGateInp, i), experts: b.Experts(i),
				shared: b.FFN(schema.FFNGateShexp, schema.FFNUpShexp, schema.FFNDownShexp, i), shGate: b.Vec(schema.FFNGateInpShexp, i)}
		} else {
			l.ffn = b.FFN(schema.FFNGate, schema.FFNUp, schema.FFNDown, i)
		}
		if b.Err() != nil {
			b.Release()
			return nil, b.Err()
		}
		t.layers = append(t.layers, l)
	}
	for i := cfg.NLayer; i < cfg.NLayer+cfg.NextN; i++ {
		b.SkipBlock(i)
	}
	if err := b.Finish(); err != nil {
		b.Release()
		return nil, err
	}
	t.weights = b
	t.numerics = runtime.NumericsFor(opt, b.BF16())
	t.numerics.Note = b.QuantNote(t.numerics.Note)
	t.rope = mla.NewRoPE(cfg.rope()) // validated by readConfig
	t.allocScratch()
	return t, nil
}

func (t *Target) allocScratch() {
	n, c := t.maxBatch, &t.Config
	E := c.NEmbd
	ff := max(c.NFF, c.NFFExp, c.NFFShared)
	t.s = scratch{x: make([]float32, n*E), h: make([]float32, n*E), mix: make([]float32, n*E), ffOut: make([]float32, n*E),
		ffA: make([]float32, n*ff), ffB: make([]float32, 2*n*ff),
		rec: newRecScratch(c, n), att: newAttScratch(c, n, t.capacity)}
	if c.MoE {
		t.s.moe = newMoEScratch(c, n)
	}
}

// Numerics says which kernel path and activation precision the target's products use.
func (t *Target) Numerics() runtime.Numerics { return t.numerics }

// Close frees the repacked weights (with Options.Pack); the GGUF file stays open.
func (t *Target) Close() { t.weights.Release() }

// Values returns the file's keys as resolved against its declaration, with what the loader
// read and bound.
func (t *Target) Values() *schema.Values { return t.values }

// Dims returns the target's sizes.
func (t *Target) Dims() runtime.Dims {
	return runtime.Dims{NEmbd: t.Config.NEmbd, NVocab: t.Config.NVocab, NLayer: t.Config.NLayer}
}

// MaxBatch is the most tokens one Forward accepts.
func (t *Target) MaxBatch() int { return t.maxBatch }

// Len returns the number of positions the target holds.
func (t *Target) Len() int { return t.n }

// Cap returns the KV cache capacity in positions.
func (t *Target) Cap() int { return t.capacity }

// Rewind returns the target to its state after the first n positions, n within the last
// Forward (runtime.Target's contract): the attention blocks drop their cache rows, the
// DeltaNet blocks return to their state after row a = n-s of that forward (s its first
// position). A forward of k rows keeps the state before it and the states after rows k/3
// and 2k/3 (the checkpoints; rows 5 and 10 of a 16-row verify forward): a is free when it
// is 0, a checkpoint's row or k; otherwise the block replays the rows from the nearest kept
// state below a with the forward's stash (kernels.DeltaNetLayer.Replay), bit for bit the
// state the forward computed: one pass over the state plus at most 5 rows' arithmetic for
// k = 16. Rolling back never invalidates the kept states, so a second Rewind lower within
// the window works the same way.
func (t *Target) Rewind(n int) error {
	if err := t.rewind.Check(t.Name(), n); err != nil {
		return err
	}
	if a := n - t.rewind.From; a != t.rows {
		t.rollback(a)
	}
	t.n = n
	return nil
}

// rollback sets every DeltaNet block's current state and conv window to those after the
// first a rows of the last forward (a below the rows the current state reflects).
func (t *Target) rollback(a int) {
	to := t.slots.Final()
	from, replay := t.slots.Rollback(a)
	for i := range t.layers {
		if r := t.layers[i].rec; r != nil {
			r.rewind(&t.Config, from, replay, to, t.convCur, a)
		}
	}
	t.rows = a
}

// Reset empties the target: no cached position, zero recurrent states.
func (t *Target) Reset() {
	t.n, t.rows, t.convCur = 0, 0, 0
	t.slots.Reset()
	t.rewind.Reset()
	for i := range t.layers {
		if r := t.layers[i].rec; r != nil {
			r.reset()
		}
	}
}

// Embed writes the embedding of token id into dst (NEmbd values).
func (t *Target) Embed(id int, dst []float32) { t.tokEmbd.Row(id, dst) }

// Head returns the output head (token_embd when tied).
func (t *Target) Head() runtime.Head { return t.output }

// Tokens returns the tokenizer's tokens (nil when the file has none).
func (t *Target) Tokens() []string { return t.tokens }

// Name returns the file's path.
func (t *Target) Name() string { return t.File.Path }

// Forward runs the target on tokens at positions Len()..Len()+n-1 and fills out: logits of
// the rows from logitsFrom on, and in out.Hidden the output of every block listed in taps
// (Hugging Face's hidden_states[k+1], llama.cpp's t_layer_inp[k+1]). The DeltaNet blocks run
// the rows one after another in order, so a row's outputs do not depend on the batch.
func (t *Target) Forward(tokens []int, logitsFrom int, taps []int, out *runtime.Step) error {
	n := len(tokens)
	c := &t.Config
	if n == 0 || n > t.maxBatch {
		return fmt.Errorf("forward: %d tokens, want 1..%d", n, t.maxBatch)
	}
	L := t.n
	if L+n > t.capacity {
		return fmt.Errorf("forward: context full (%d + %d tokens > capacity %d)", L, n, t.capacity)
	}
	E, R := c.NEmbd, c.NRot
	for _, id := range tokens {
		if id < 0 || id >= c.NVocab {
			return fmt.Errorf("forward: token id %d out of range [0, %d)", id, c.NVocab)
		}
	}
	for _, k := range taps {
		if k < 0 || k >= c.NLayer {
			return fmt.Errorf("forward: hidden state of layer %d requested, model has %d", k, c.NLayer)
		}
	}
	s := &t.s
	for i, id := range tokens {
		t.tokEmbd.Row(id, s.x[i*E:(i+1)*E])
		t.rope.CosSin(s.att.cs[i*R:(i+1)*R], L+i)
	}
	if out.Hidden == nil {
		out.Hidden = map[int][]float32{}
	}
	for _, k := range taps {
		out.Hidden[k] = model.Grow(out.Hidden[k], n*E)
	}
	x, h, mix, ffo := s.x[:n*E], s.h[:n*E], s.mix[:n*E], s.ffOut[:n*E]
	from := t.slots.Plan(n)
	p := t.probe
	p.Check(-1, "token embedding", schema.TokenEmbd, x, n)
	for li := range t.layers {
		l := &t.layers[li]
		model.RMSRows(h, x, l.attnNorm, n, E, c.Eps)
		p.Check(li, "attention norm", schema.AttnNorm, h, n)
		if l.rec != nil {
			l.rec.forward(c, &s.rec, mix, h, n, from, t.slots.Row(), t.convCur)
			p.Check(li, "gated deltanet", "blk.{i}.attn_qkv/attn_gate/ssm_*.weight", mix, n)
		} else {
			l.att.forward(c, &s.att, mix, h, n, L)
			p.Check(li, "gated attention", "blk.{i}.attn_q/k/v/q_norm/k_norm/output.weight", mix, n)
		}
		model.AddTo(x, mix)
		model.RMSRows(h, x, l.postNorm, n, E, c.Eps)
		p.Check(li, "post-attention norm", schema.PostAttnNorm, h, n)
		if l.moe != nil {
			l.moe.forward(c, &s.moe, ffo, h, n)
			p.Check(li, "mixture of experts", "blk.{i}.ffn_*_exps/ffn_*_shexp/ffn_gate_inp.weight", ffo, n)
		} else {
			l.ffn.Forward(ffo, h, n, s.ffA, s.ffB)
			p.Check(li, "feed-forward", "blk.{i}.ffn_gate/up/down.weight", ffo, n)
		}
		model.AddTo(x, ffo)
		p.Check(li, "residual sum", "", x, n)
		for _, tk := range taps {
			if tk == li {
				copy(out.Hidden[tk], x)
			}
		}
	}
	t.convCur, t.rows = 1-t.convCur, n
	t.n = L + n
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
