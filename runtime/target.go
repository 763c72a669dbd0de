package runtime

import (
	"fmt"
	"math"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/mla"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// Target is a loaded deepseek2 model with its latent KV cache.
type Target struct {
	Config TargetConfig
	File   *gguf.File

	tokEmbd *kernels.Mat
	outNorm []float32
	output  *kernels.Mat
	layers  []targetLayer
	cache   *mla.LatentCache

	maxBatch int
	s        targetScratch
	weights  *binder
	numerics Numerics
}

// Numerics says which kernel path and activation precision the target's products use.
func (t *Target) Numerics() Numerics { return t.numerics }

type targetLayer struct {
	attnNorm, ffnNorm []float32
	attn              *mla.Attention
	dense             ffn // the dense FFN (layers < NDense)
	// MoE
	router  *kernels.Mat
	bias    []float32
	experts []ffn
	shared  *ffn // nil without shared experts
}

type targetScratch struct {
	x, h, attnOut, ffA, ffB, ffOut []float32
	moe                            moeScratch
	pos                            []int
}

// TargetOptions tunes LoadTarget.
type TargetOptions struct {
	// Context is the KV cache capacity in tokens (0: min(context_length, 4096)).
	Context int
	// MaxBatch is the largest number of rows one Forward accepts (0: 64).
	MaxBatch int
	// Pack repacks the weight matrices into the kernels' fast layout at load time, in
	// huge-page memory outside the Go heap (freed by Close), and fuses the matrices that share
	// an input (kv_a_mqa with q_a, gate with up) and the per-head k_b / v_b blocks.
	Pack bool
	// Activations is the precision of the activations in the products of BF16 weight
	// matrices: kernels.F32Activations (the default: the reference, identical on every
	// machine) or kernels.BF16Activations (activations rounded to bfloat16, as llama.cpp does
	// for BF16 weights; faster where VDPBF16PS is fast, and less accurate). BF16 activations
	// are only used where the kernels run them on hardware (kernels.FastBF16); elsewhere the
	// model keeps F32Activations and Numerics says why.
	Activations kernels.Precision
}

// activations returns the precision the options give the kernels.
func (o TargetOptions) activations() kernels.Precision {
	if o.Activations == kernels.BF16Activations && kernels.FastBF16() {
		return kernels.BF16Activations
	}
	return kernels.F32Activations
}

// Numerics says how a loaded model computes, for reports: the kernel path, the activation
// precision used and, when it differs, the one requested and why.
type Numerics struct {
	Kernels     string `json:"kernels"`                         // kernels.Path of the precision used
	Activations string `json:"activations"`                     // "f32" or "bf16"
	Requested   string `json:"activations_requested,omitempty"` // set when it differs from Activations
	Note        string `json:"note,omitempty"`
}

// numericsFor describes what opt gives on this machine to a model whose matrices include
// BF16 ones (bf16) or not.
func numericsFor(opt TargetOptions, bf16 bool) Numerics {
	p := opt.activations()
	if !bf16 {
		p = kernels.F32Activations
	}
	n := Numerics{Kernels: kernels.Path(p), Activations: p.String()}
	if !opt.Pack {
		n.Kernels = "portable"
	}
	switch {
	case p == opt.Activations:
	case !bf16:
		n.Requested = opt.Activations.String()
		n.Note = "no BF16 weight matrices: bf16 activations apply to BF16 weights only"
	default:
		n.Requested = opt.Activations.String()
		n.Note = "this CPU has no fast bf16 kernels (AVX512_BF16 with the reference's results); f32 activations used"
	}
	if p == kernels.BF16Activations {
		n.Note = "bf16 activations on BF16 weights: less accurate than the f32 reference (llama.cpp's log-probs move by 0.02-0.07 this way); docs/kernels.md says where it is faster"
	}
	return n
}

// LoadTarget binds a deepseek2 GGUF (already opened, mmap-backed) and allocates its cache.
func LoadTarget(f *gguf.File, opt TargetOptions) (*Target, error) {
	cfg, err := readTargetConfig(f)
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
	b := newBinder(f, opt)
	E := cfg.NEmbd
	emb, _ := f.Tensor("token_embd.weight")
	if emb == nil || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("%s: missing 2-D tensor token_embd.weight", f.Path)
	}
	cfg.NVocab = int(emb.Dims[1])
	t := &Target{Config: cfg, File: f, maxBatch: opt.MaxBatch}
	t.tokEmbd = b.mat("token_embd.weight", E, cfg.NVocab)
	t.outNorm = b.vec("output_norm.weight", E)
	if b.has("output.weight") {
		t.output = b.mat("output.weight", E, cfg.NVocab)
	} else {
		t.output = t.tokEmbd
	}
	a := cfg.Attn
	for i := 0; i < cfg.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		var l targetLayer
		l.attnNorm = b.vec(p+"attn_norm.weight", E)
		l.ffnNorm = b.vec(p+"ffn_norm.weight", E)
		w := b.attention(p, a)
		if i < cfg.NDense {
			l.dense = b.ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", E, cfg.NFF)
		} else {
			l.router = b.mat(p+"ffn_gate_inp.weight", E, cfg.NExpert)
			if b.has(p + "exp_probs_b.bias") {
				l.bias = b.vec(p+"exp_probs_b.bias", cfg.NExpert)
			}
			l.experts = b.experts(p, E, cfg.NFFExp, cfg.NExpert)
			if cfg.NShared > 0 {
				sh := b.ffn(p+"ffn_gate_shexp.weight", p+"ffn_up_shexp.weight", p+"ffn_down_shexp.weight", E, cfg.NFFExp*cfg.NShared)
				l.shared = &sh
			}
		}
		if b.err != nil {
			b.release()
			return nil, b.err
		}
		at, err := mla.NewAttention(a, w, opt.MaxBatch)
		if err != nil {
			b.release()
			return nil, fmt.Errorf("%s: layer %d: %w", f.Path, i, err)
		}
		l.attn = at
		t.layers = append(t.layers, l)
	}
	b.unused()
	if b.err != nil {
		b.release()
		return nil, b.err
	}
	t.weights = b
	t.numerics = numericsFor(opt, b.bf16)
	t.cache = mla.NewLatentCache(cfg.NLayer, opt.Context, a.KVLoraRank, a.DRope)
	t.allocScratch()
	return t, nil
}

func (t *Target) allocScratch() {
	n, E := t.maxBatch, t.Config.NEmbd
	ff := max(t.Config.NFF, t.Config.NFFExp*max(1, t.Config.NShared))
	t.s = targetScratch{
		x: make([]float32, n*E), h: make([]float32, n*E), attnOut: make([]float32, n*E),
		ffA: make([]float32, n*ff), ffB: make([]float32, 2*n*ff), ffOut: make([]float32, n*E),
		pos: make([]int, n),
	}
	if t.Config.NExpert > 0 {
		t.s.moe = newMoEScratch(n, t.Config)
	}
}

// Close frees the repacked weights (with TargetOptions.Pack); the GGUF file stays open.
func (t *Target) Close() { t.weights.release() }

// Len returns the number of tokens in the KV cache.
func (t *Target) Len() int { return t.cache.Len() }

// Truncate drops cached tokens beyond n (rejected drafts).
func (t *Target) Truncate(n int) error { return t.cache.Truncate(n) }

// Reset empties the KV cache.
func (t *Target) Reset() { t.cache.Reset() }

// Embed writes the embedding of token id into dst (NEmbd values).
func (t *Target) Embed(id int, dst []float32) { t.tokEmbd.Row(id, dst) }

// Step is the result of one Forward.
type Step struct {
	// Logits holds len(tokens) rows of NVocab logits (only rows >= LogitsFrom are computed).
	Logits []float32
	// Hidden maps each requested layer k to len(tokens) rows of NEmbd values: the output of
	// decoder layer k (0-based), before the final norm.
	Hidden map[int][]float32
}

// Forward runs the target on tokens at positions Len()..Len()+n-1, appends them to the KV
// cache, and fills out. logitsFrom skips the lm_head for rows before it (plain decoding only
// needs the last row). taps lists decoder layers whose outputs are copied into out.Hidden.
// out's buffers are reused when large enough.
func (t *Target) Forward(tokens []int, logitsFrom int, taps []int, out *Step) error {
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
		out.Hidden[k] = grow(out.Hidden[k], n*E)
	}
	x, h := t.s.x[:n*E], t.s.h[:n*E]
	for li := range t.layers {
		l := &t.layers[li]
		rmsRows(h, x, l.attnNorm, n, E, c.Eps)
		if err := l.attn.Forward(t.s.attnOut[:n*E], h, n, t.s.pos[:n], t.cache, li, mla.Causal); err != nil {
			return err
		}
		addTo(x, t.s.attnOut[:n*E])
		rmsRows(h, x, l.ffnNorm, n, E, c.Eps)
		if li < c.NDense {
			l.dense.forward(t.s.ffOut[:n*E], h, n, t.s.ffA, t.s.ffB)
		} else {
			t.moe(l, t.s.ffOut[:n*E], h, n)
		}
		addTo(x, t.s.ffOut[:n*E])
		for _, k := range taps {
			if k == li {
				copy(out.Hidden[k], x)
			}
		}
	}
	if err := t.cache.Advance(n); err != nil {
		return err
	}
	V := c.NVocab
	out.Logits = grow(out.Logits, n*V)
	if logitsFrom < 0 {
		logitsFrom = 0
	}
	if logitsFrom < n {
		m := n - logitsFrom
		rmsRows(h[:m*E], x[logitsFrom*E:], t.outNorm, m, E, c.Eps)
		t.output.MatMul(out.Logits[logitsFrom*V:n*V], h[:m*E], m)
	}
	return nil
}

func silu(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }

// rmsRows applies RMSNorm with weight w to n rows of width E.
func rmsRows(dst, x, w []float32, n, E int, eps float32) {
	for i := 0; i < n; i++ {
		mla.RMSNorm(dst[i*E:(i+1)*E], x[i*E:(i+1)*E], w, eps)
	}
}

func addTo(dst, src []float32) {
	for i := range src {
		dst[i] += src[i]
	}
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
