package kimik3

import (
	"fmt"
	"math"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/internal/rollback"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// TapForm chooses which tensor a hidden-state tap of a block reads (package doc; spec
// target-kimi-k3.md 5.4).
type TapForm int

const (
	// TapPartialSum reads the block partial sum P after the block: llama.cpp's l_out, the
	// tensor vLLM's K3 model captures as aux_hidden_state (prefix_sum + hidden_states). The
	// default.
	TapPartialSum TapForm = iota
	// TapMixed reads res_mix(P) with the next block's attn_res_score (output_res_score after
	// the last block): the stream the next block's attention norm reads.
	TapMixed
)

// String names the form.
func (f TapForm) String() string {
	switch f {
	case TapPartialSum:
		return "partial-sum"
	case TapMixed:
		return "mixed"
	}
	return fmt.Sprintf("TapForm(%d)", int(f))
}

// Target is a loaded kimi-k3 or kimi-linear model with its state: the latent cache of the MLA
// blocks and the recurrent state of the KDA blocks. It implements runtime.Target.
type Target struct {
	Config Config
	File   *gguf.File

	tokEmbd *kernels.Mat
	outNorm []float32
	output  *kernels.Mat
	outRes  []float32 // output_res_score (attention residuals)
	layers  []layer
	cache   *mla.LatentCache // nil without MLA blocks
	tokens  []string
	tap     TapForm

	n       int // positions held
	ctx     int
	rewind  runtime.RewindWindow
	slots   rollback.Slots // the KDA blocks' state slots
	convCur int            // the KDA blocks' current conv window (0 or 1)
	rows    int            // rows of the last forward the current state reflects

	maxBatch int
	s        scratch
	weights  *model.Binder
	values   *schema.Values
	numerics runtime.Numerics
}

var _ runtime.Target = (*Target)(nil)

// layer is one block: its norms, residual scores, its mixer (rec or att) and its
// feed-forward (dense or moe).
type layer struct {
	attnNorm, ffnNorm []float32
	attnRes, ffnRes   []float32
	rec               *kda
	att               *mla.Attention
	gate              *gatedOut // the MLA output gate (nil without)
	mlaIdx            int
	dense             *model.FFN
	moe               *moe
}

type scratch struct {
	P, mix, h, a, ffA, ffB []float32
	banks                  [][]float32 // banked block inputs, MaxBatch rows each
	pos                    []int       // zeros: NoPE
	kda                    kdaScratch
	moe                    moeScratch
	sc                     []float64
}

// gatedOut is the MLA output projection behind K3's sigmoid output gate: MatMul multiplies
// each input row by the gate values set for the forward (sigmoid(attn_gate h), computed
// before the attention) and then applies attn_output, so runtime/mla applies the gate
// between the attention and its output projection.
type gatedOut struct {
	o, gate *kernels.Mat
	g, buf  []float32 // MaxBatch rows of NHead x DV
}

func (p *gatedOut) Rows() int { return p.o.Rows() }
func (p *gatedOut) Cols() int { return p.o.Cols() }

func (p *gatedOut) MatVec(dst, x []float32) { p.MatMul(dst, x, 1) }

func (p *gatedOut) MatMul(dst, x []float32, n int) {
	w := p.o.Cols()
	for i := range n * w {
		p.buf[i] = x[i] * p.g[i]
	}
	p.o.MatMul(dst, p.buf[:n*w], n)
}

// set computes the gate of n normed rows h.
func (p *gatedOut) set(h []float32, n int) {
	w := p.o.Cols()
	p.gate.MatMul(p.g[:n*w], h, n)
	for i, v := range p.g[:n*w] {
		p.g[i] = sigmoid32(v)
	}
}

// Load binds a kimi-k3 or kimi-linear GGUF (already opened, mmap-backed) through its
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
	t := &Target{Config: cfg, File: f, maxBatch: opt.MaxBatch, ctx: opt.Context, values: v, tokens: v.Strs(schema.TokTokens),
		slots: rollback.NewSlots(checkpoints, opt.MaxBatch)}
	t.tokEmbd = b.Mat(schema.TokenEmbd, -1)
	t.outNorm = b.Vec(schema.OutputNorm, -1)
	t.output = b.Mat(schema.Output, -1)
	res := cfg.K3 && cfg.ResBlock > 0
	if res {
		t.outRes = b.Vec(schema.OutputResScore, -1)
	}
	D := cfg.KDAWidth()
	var proto *mla.Attention
	nMLA := 0
	for i := 0; i < cfg.NLayer; i++ {
		l := layer{attnNorm: b.Vec(schema.AttnNorm, i), ffnNorm: b.Vec(schema.FFNNorm, i)}
		if res {
			l.attnRes, l.ffnRes = b.Vec(schema.AttnResScore, i), b.Vec(schema.FFNResScore, i)
		}
		if !cfg.MLA[i] {
			if b.Has(schema.AttnQKV, i) {
				b.Release()
				return nil, fmt.Errorf("%s: tensor %s: the fused q/k/v form is not run: dspark's runtime needs attn_q/k/v (which llama.cpp's graph reads; dspark convert writes them)",
					f.Path, schema.Name(schema.AttnQKV, i))
			}
			r := newKDA(&cfg, opt.MaxBatch, t.slots.N())
			r.q, r.k, r.v = b.Mat(schema.AttnQ, i), b.Mat(schema.AttnK, i), b.Mat(schema.AttnV, i)
			r.fa, r.fb, r.beta = b.Mat(schema.SSMFA, i), b.Mat(schema.SSMFB, i), b.Mat(schema.SSMBeta, i)
			if cfg.K3 {
				r.g = b.Mat(schema.SSMG, i)
			} else {
				r.ga, r.gb = b.Mat(schema.SSMGA, i), b.Mat(schema.SSMGB, i)
			}
			r.out = b.Mat(schema.AttnOutput, i)
			r.a, r.dtBias, r.norm = b.Floats(schema.SSMA, i), b.Vec(schema.SSMDtBias, i), b.Vec(schema.SSMNorm, i)
			cq, ck, cv := b.Floats(schema.SSMConv1DQ, i), b.Floats(schema.SSMConv1DK, i), b.Floats(schema.SSMConv1DV, i)
			if b.Err() == nil {
				g := make([]float32, 0, 3*D*cfg.ConvK)
				g = append(append(append(g, cq...), ck...), cv...)
				r.convW = kernels.ConvWeights(g, cfg.ConvK, 3*D)
			}
			l.rec = r
		} else {
			w := b.Attention(i, cfg.Attn)
			if cfg.K3 && b.Has(schema.AttnGate, i) {
				gm := b.Mat(schema.AttnGate, i)
				if o, ok := w.O.(*kernels.Mat); ok && gm != nil {
					vw := cfg.NHead * cfg.Attn.DV
					l.gate = &gatedOut{o: o, gate: gm, g: make([]float32, opt.MaxBatch*vw), buf: make([]float32, opt.MaxBatch*vw)}
					w.O = l.gate
				}
			}
			if b.Err() == nil {
				var at *mla.Attention
				var err error
				if proto == nil {
					at, err = mla.NewAttention(cfg.Attn, w, opt.MaxBatch)
					proto = at
				} else {
					at, err = proto.WithWeights(w)
				}
				if err != nil {
					b.Release()
					return nil, fmt.Errorf("%s: block %d: %w", f.Path, i, err)
				}
				l.att = at
			}
			l.mlaIdx = nMLA
			nMLA++
		}
		if v.Dense(i) {
			fn := b.FFN(schema.FFNGate, schema.FFNUp, schema.FFNDown, i)
			l.dense = &fn
		} else {
			m := &moe{router: b.Mat(schema.FFNGateInp, i), bias: b.Vec(schema.ExpProbsB, i), experts: b.Experts(i)}
			if b.Has(schema.FFNGateShexp, i) {
				sh := b.FFN(schema.FFNGateShexp, schema.FFNUpShexp, schema.FFNDownShexp, i)
				m.shared = &sh
			}
			if cfg.K3 && cfg.NLatent > 0 {
				m.routedDown, m.routedUp = b.Mat(schema.FFNRoutedDown, i), b.Mat(schema.FFNRoutedUp, i)
				if b.Has(schema.FFNRoutedNorm, i) {
					m.routedNorm = b.Vec(schema.FFNRoutedNorm, i)
				}
			}
			l.moe = m
		}
		if b.Err() != nil {
			b.Release()
			return nil, b.Err()
		}
		t.layers = append(t.layers, l)
	}
	if err := b.Finish(); err != nil {
		b.Release()
		return nil, err
	}
	t.weights = b
	t.numerics = runtime.NumericsFor(opt, b.BF16())
	t.numerics.Note = b.QuantNote(t.numerics.Note)
	if nMLA > 0 {
		if t.cache, err = mla.AllocLatentCache(nMLA, opt.Context, cfg.Attn.KVLoraRank, cfg.Attn.DRope); err != nil {
			b.Release()
			return nil, fmt.Errorf("%s: context %d: %w", f.Path, opt.Context, err)
		}
	}
	t.allocScratch()
	return t, nil
}

func (t *Target) allocScratch() {
	n, c := t.maxBatch, &t.Config
	E := c.NEmbd
	ff := max(c.NFF, c.NFFExp*max(1, c.NShared))
	t.s = scratch{P: make([]float32, n*E), mix: make([]float32, n*E), h: make([]float32, n*E), a: make([]float32, n*E),
		ffA: make([]float32, n*ff), ffB: make([]float32, 2*n*ff), pos: make([]int, n),
		kda: newKDAScratch(c, n)}
	if c.K3 && c.ResBlock > 0 {
		nb := (c.NLayer + c.ResBlock - 1) / c.ResBlock
		t.s.banks = make([][]float32, nb)
		for i := range t.s.banks {
			t.s.banks[i] = make([]float32, n*E)
		}
		t.s.sc = make([]float64, nb+1)
	}
	if c.NDense < c.NLayer {
		t.s.moe = newMoEScratch(c, n)
	}
}

// SetTapForm chooses which tensor the hidden-state taps read (TapPartialSum by default).
func (t *Target) SetTapForm(f TapForm) { t.tap = f }

// TapForm returns the tensor the hidden-state taps read.
func (t *Target) TapForm() TapForm { return t.tap }

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

// Cap returns the context capacity in positions.
func (t *Target) Cap() int { return t.ctx }

// Rewind returns the target to its state after the first n positions, n within the last
// Forward (runtime.Target's contract): the MLA blocks drop their cache rows, the KDA blocks
// return to their state after row a = n-s of that forward (s its first position). As
// runtime/qwen35's DeltaNet blocks (rollback.Slots), a forward of k rows keeps the state
// before it and the states after rows k/3 and 2k/3 (rows 5 and 10 of a 16-row verify
// forward): a is free when it is 0, a checkpoint's row or k; otherwise the block replays the
// rows from the nearest kept state below a with the forward's stash
// (kernels.DeltaNetLayer.Replay), bit for bit the state the forward computed: at most 5
// rows for k = 16. Rolling back never invalidates the kept states, so a second Rewind lower
// within the window works the same way.
func (t *Target) Rewind(n int) error {
	if err := t.rewind.Check(t.Name(), n); err != nil {
		return err
	}
	if t.cache != nil {
		if err := t.cache.Truncate(n); err != nil {
			return err
		}
	}
	if a := n - t.rewind.From; a != t.rows {
		t.rollback(a)
	}
	t.n = n
	return nil
}

// rollback sets every KDA block's current state and conv window to those after the first a
// rows of the last forward (a below the rows the current state reflects).
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
	if t.cache != nil {
		t.cache.Reset()
	}
	for i := range t.layers {
		if r := t.layers[i].rec; r != nil {
			r.reset()
		}
	}
}

// Embed writes the embedding of token id into dst (NEmbd values).
func (t *Target) Embed(id int, dst []float32) { t.tokEmbd.Row(id, dst) }

// Head returns the output head.
func (t *Target) Head() runtime.Head { return t.output }

// Tokens returns the tokenizer's tokens (nil when the file has none).
func (t *Target) Tokens() []string { return t.tokens }

// Name returns the file's path.
func (t *Target) Name() string { return t.File.Path }

// resMix writes into dst the res_mix of n rows (target-kimi-k3.md 3.3): per row, the
// softmax over the banked candidates and cur of the scores RMSNorm(c) . w, then the sum of
// the raw candidates weighted by it. Each row is computed alone (batch-independent).
func (t *Target) resMix(dst []float32, banks [][]float32, cur, w []float32, n int) {
	E, eps := t.Config.NEmbd, t.Config.Eps
	sc := t.s.sc[:len(banks)+1]
	for i := range n {
		row := func(b int) []float32 {
			if b == len(banks) {
				return cur[i*E : (i+1)*E]
			}
			return banks[b][i*E : (i+1)*E]
		}
		mx := math.Inf(-1)
		for b := range sc {
			c := row(b)
			ss := kernels.Dot(c, c)
			k := 1 / math.Sqrt(float64(ss)/float64(E)+float64(eps))
			sc[b] = float64(kernels.Dot(c, w)) * k
			mx = math.Max(mx, sc[b])
		}
		var z float64
		for b := range sc {
			sc[b] = math.Exp(sc[b] - mx)
			z += sc[b]
		}
		d := dst[i*E : (i+1)*E]
		clear(d)
		for b := range sc {
			kernels.Axpy(d, float32(sc[b]/z), row(b))
		}
	}
}

// Forward runs the target on tokens at positions Len()..Len()+n-1 and fills out: logits of
// the rows from logitsFrom on, and in out.Hidden the tap of every block listed in taps (the
// tensor SetTapForm chose). The KDA blocks run the rows one after another in order, the MLA
// blocks attend causally, and every other operation is per row, so a row's outputs do not
// depend on the batch.
func (t *Target) Forward(tokens []int, logitsFrom int, taps []int, out *runtime.Step) error {
	n := len(tokens)
	c := &t.Config
	if n == 0 || n > t.maxBatch {
		return fmt.Errorf("forward: %d tokens, want 1..%d", n, t.maxBatch)
	}
	L := t.n
	if L+n > t.ctx {
		return fmt.Errorf("forward: context full (%d + %d tokens > capacity %d)", L, n, t.ctx)
	}
	E := c.NEmbd
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
	P, mix, h, a := s.P[:n*E], s.mix[:n*E], s.h[:n*E], s.a[:n*E]
	for i, id := range tokens {
		t.tokEmbd.Row(id, P[i*E:(i+1)*E])
	}
	if out.Hidden == nil {
		out.Hidden = map[int][]float32{}
	}
	for _, k := range taps {
		out.Hidden[k] = model.Grow(out.Hidden[k], n*E)
	}
	res := c.K3 && c.ResBlock > 0
	banks := s.banks[:0]
	from := t.slots.Plan(n)
	for li := range t.layers {
		l := &t.layers[li]
		x := P
		if res && len(banks) > 0 {
			t.resMix(mix, banks, P, l.attnRes, n)
			x = mix
		}
		bank := res && li%c.ResBlock == 0
		if bank {
			banks = s.banks[:len(banks)+1]
			copy(banks[len(banks)-1][:n*E], P)
		}
		model.RMSRows(h, x, l.attnNorm, n, E, c.Eps)
		if l.rec != nil {
			l.rec.forward(c, &s.kda, a, h, n, from, t.slots.Row(), t.convCur)
		} else {
			if l.gate != nil {
				l.gate.set(h, n)
			}
			if err := l.att.Forward(a, h, n, s.pos[:n], t.cache, l.mlaIdx, mla.Causal); err != nil {
				return err
			}
		}
		if bank {
			copy(P, a)
		} else {
			model.AddTo(P, a)
		}
		x = P
		if res {
			t.resMix(mix, banks, P, l.ffnRes, n)
			x = mix
		}
		model.RMSRows(h, x, l.ffnNorm, n, E, c.Eps)
		if l.dense != nil {
			ffn(c, l.dense, a, h, n, s.ffA, s.ffB)
		} else {
			l.moe.forward(c, &s.moe, a, h, n, s.ffA, s.ffB)
		}
		model.AddTo(P, a)
		for _, tk := range taps {
			if tk != li {
				continue
			}
			switch {
			case t.tap == TapMixed && res && li+1 < c.NLayer:
				t.resMix(out.Hidden[tk], banks, P, t.layers[li+1].attnRes, n)
			case t.tap == TapMixed && res:
				t.resMix(out.Hidden[tk], banks, P, t.outRes, n)
			default:
				copy(out.Hidden[tk], P)
			}
		}
	}
	if t.cache != nil {
		if err := t.cache.Advance(n); err != nil {
			return err
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
		x := P[logitsFrom*E:]
		if res {
			t.resMix(mix, banks, P, t.outRes, n) // every row: the banks are row-aligned with P
			x = mix[logitsFrom*E:]
		}
		model.RMSRows(h[:m*E], x[:m*E], t.outNorm, m, E, c.Eps)
		t.output.MatMul(out.Logits[logitsFrom*V:n*V], h[:m*E], m)
	}
	return nil
}
