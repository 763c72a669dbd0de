package runtime

import (
	"fmt"
	"math"
	"slices"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/mla"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// DraftConfig holds a dflash (DSpark, MLA backbone) draft's hyperparameters.
type DraftConfig struct {
	NLayer, NEmbd, NFF, NVocab int
	Attn                       mla.Config
	Eps                        float32
	BlockSize                  int   // g: block rows per forward
	SampleFromAnchor           bool  // true (DSpark): row k predicts token k+1; false (DFlash): row k predicts token k
	TargetLayers               []int // tapped target layers in HF convention (decoder layer outputs, 0-based)
	TargetHidden               int
	TargetBlocks               int
	MarkovRank                 int // 0: no Markov head
	MaskToken                  int
	HasConfidence              bool
}

func readDraftConfig(f *gguf.File) (DraftConfig, error) {
	if a := f.Architecture(); a != "dflash" {
		return DraftConfig{}, fmt.Errorf("%s: general.architecture is %q, want dflash", f.Path, a)
	}
	m := &meta{f: f, arch: "dflash"}
	var c DraftConfig
	c.NLayer = m.u32("block_count")
	c.NEmbd = m.u32("embedding_length")
	c.NFF = m.u32("feed_forward_length")
	c.Eps = m.f32("attention.layer_norm_rms_epsilon")
	c.BlockSize = m.u32("block_size")
	c.SampleFromAnchor = m.boolOr("sample_from_anchor", true)
	c.TargetHidden = m.u32("target_hidden_size")
	c.TargetBlocks = m.u32Or("target_block_count", 0)
	c.MarkovRank = m.u32Or("markov_rank", 0)
	nHead := m.u32("attention.head_count")
	qLora := m.u32Or("attention.q_lora_rank", 0)
	kvLora := m.u32("attention.kv_lora_rank")
	dRope := m.u32("rope.dimension_count")
	kMLA := m.u32("attention.key_length_mla")
	dV := m.u32("attention.value_length_mla")
	c.Attn = mla.Config{NEmbd: c.NEmbd, NHead: nHead, QLoraRank: qLora, KVLoraRank: kvLora,
		DNope: kMLA - dRope, DRope: dRope, DV: dV, Eps: c.Eps, RoPE: m.yarn(dRope)}
	m.positive(map[string]int{"block_count": c.NLayer, "embedding_length": c.NEmbd, "feed_forward_length": c.NFF,
		"block_size": c.BlockSize, "target_hidden_size": c.TargetHidden, "attention.head_count": nHead,
		"attention.kv_lora_rank": kvLora, "rope.dimension_count": dRope, "attention.value_length_mla": dV})
	if m.err != nil {
		return c, m.err
	}
	tl, err := f.Int32s("dflash.target_layers")
	if err != nil {
		return c, fmt.Errorf("%s: %w", f.Path, err)
	}
	if len(tl) == 0 {
		return c, fmt.Errorf("%s: dflash.target_layers is empty", f.Path)
	}
	for _, l := range tl {
		if l < 1 {
			return c, fmt.Errorf("%s: dflash.target_layers holds %d; ids are stored +1 (the input of layer k+1), so each must be >= 1", f.Path, l)
		}
		c.TargetLayers = append(c.TargetLayers, int(l)-1)
	}
	if mt, err := f.Uint32("tokenizer.ggml.mask_token_id"); err == nil {
		c.MaskToken = int(mt)
	} else {
		return c, fmt.Errorf("%s: the block's mask token: %w", f.Path, err)
	}
	return c, nil
}

// Draft is a loaded DSpark draft: an MLA backbone reading the target's hidden states, a Markov
// head and a confidence head. It keeps its own latent cache of injected context rows.
type Draft struct {
	Config DraftConfig
	File   *gguf.File

	embed   func(id int, dst []float32) // token embedding (the target's unless the draft keeps its own)
	head    *kernels.Mat                // the target's lm_head (vocab x NEmbd)
	fc      *kernels.Mat                // NEmbd x (taps*TargetHidden)
	encNorm []float32
	outNorm []float32
	tokEmbd *kernels.Mat // nil: the target's embedding is used
	w1, w2  *kernels.Mat // Markov head: V x r each
	conf    *kernels.Mat // 1 x (NEmbd + r)
	confB   []float32
	layers  []draftLayer
	cache   *mla.LatentCache
	weights *binder

	numerics Numerics
	s        draftScratch
}

// Numerics says which kernel path and activation precision the draft's products use (its
// lm_head is the target's, or the stand-in head of LoadDraftStandalone, with theirs).
func (d *Draft) Numerics() Numerics { return d.numerics }

type draftLayer struct {
	attnNorm, ffnNorm []float32
	attn              *mla.Attention
	ffn               ffn
}

type draftScratch struct {
	feat, ctx                []float32
	x, h, attnOut, a, b, ffo []float32
	pos                      []int
	logits                   []float32 // g x V
	hidden                   []float32 // g x NEmbd (after output_norm)
	w1row, confIn, confOut   []float32
	bias                     []float32 // V: the Markov bias of one row
}

// LoadDraft binds a dflash GGUF and checks that it fits target (hidden sizes, vocabulary,
// tokenizer, tapped layers); each mismatch is an error naming both files.
func LoadDraft(f *gguf.File, target *Target, opt TargetOptions) (*Draft, error) {
	c, err := readDraftConfig(f)
	if err != nil {
		return nil, err
	}
	if err := checkPair(f, c, target); err != nil {
		return nil, err
	}
	if c.NEmbd != target.Config.NEmbd {
		if _, ok := f.Tensor("token_embd.weight"); !ok {
			return nil, fmt.Errorf("%s has no token_embd and its width %d differs from the target %s (%d)", f.Path, c.NEmbd, target.File.Path, target.Config.NEmbd)
		}
	}
	if opt.Context <= 0 {
		opt.Context = target.cache.Cap()
	}
	return loadDraft(f, c, target.Embed, target.output, opt)
}

// LoadDraftStandalone binds a dflash GGUF without its target, using head (vocab x NEmbd) as
// both the token embedding and the lm_head. It exists to time a full-size draft on its own
// (dspark run --draft-only); its drafts mean nothing.
func LoadDraftStandalone(f *gguf.File, head *kernels.Mat, opt TargetOptions) (*Draft, error) {
	c, err := readDraftConfig(f)
	if err != nil {
		return nil, err
	}
	if head.Cols() != c.NEmbd {
		return nil, fmt.Errorf("%s: stand-in head has width %d, draft %d", f.Path, head.Cols(), c.NEmbd)
	}
	if opt.Context <= 0 {
		opt.Context = 256
	}
	head = head.WithPrecision(opt.activations())
	return loadDraft(f, c, head.Row, head, opt)
}

func loadDraft(f *gguf.File, c DraftConfig, embed func(int, []float32), head *kernels.Mat, opt TargetOptions) (*Draft, error) {
	c.NVocab = head.Rows()
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = kernels.MaxBatch
	}
	if opt.Context <= 0 {
		opt.Context = 4096
	}
	E, V, r := c.NEmbd, c.NVocab, c.MarkovRank
	b := newBinder(f, opt)
	d := &Draft{Config: c, File: f, embed: embed, head: head}
	d.fc = b.mat("fc.weight", len(c.TargetLayers)*c.TargetHidden, E)
	d.encNorm = b.vec("enc.output_norm.weight", E)
	d.outNorm = b.vec("output_norm.weight", E)
	if b.has("token_embd.weight") {
		d.tokEmbd = b.mat("token_embd.weight", E, V)
		d.embed = d.tokEmbd.Row
	}
	if r > 0 {
		d.w1 = b.mat("markov_w1.weight", r, V)
		d.w2 = b.mat("markov_w2.weight", r, V)
	}
	if b.has("conf_proj.weight") {
		d.conf = b.mat("conf_proj.weight", E+r, 1)
		d.confB = b.vec("conf_proj.bias", 1)
		d.Config.HasConfidence = true
	}
	a := c.Attn
	for i := 0; i < c.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		var l draftLayer
		l.attnNorm = b.vec(p+"attn_norm.weight", E)
		l.ffnNorm = b.vec(p+"ffn_norm.weight", E)
		w := b.attention(p, a)
		l.ffn = b.ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", E, c.NFF)
		if b.err != nil {
			b.release()
			return nil, b.err
		}
		at, err := mla.NewAttention(a, w, max(opt.MaxBatch, c.BlockSize))
		if err != nil {
			b.release()
			return nil, fmt.Errorf("%s: layer %d: %w", f.Path, i, err)
		}
		l.attn = at
		d.layers = append(d.layers, l)
	}
	b.unused()
	if b.err != nil {
		b.release()
		return nil, b.err
	}
	d.weights = b
	d.numerics = numericsFor(opt, b.bf16 || head.DType() == kernels.BF16)
	d.cache = mla.NewLatentCache(c.NLayer, opt.Context+c.BlockSize, a.KVLoraRank, a.DRope)
	n := max(opt.MaxBatch, c.BlockSize)
	g := c.BlockSize
	d.s = draftScratch{
		feat: make([]float32, n*len(c.TargetLayers)*c.TargetHidden), ctx: make([]float32, n*E),
		x: make([]float32, g*E), h: make([]float32, g*E), attnOut: make([]float32, g*E),
		a: make([]float32, g*c.NFF), b: make([]float32, 2*g*c.NFF), ffo: make([]float32, g*E),
		pos: make([]int, n), logits: make([]float32, g*V), hidden: make([]float32, g*E),
		w1row: make([]float32, max(r, 1)), bias: make([]float32, V), confIn: make([]float32, E+r), confOut: make([]float32, 1),
	}
	return d, nil
}

// checkPair validates that draft file f (config c) can run against target.
func checkPair(f *gguf.File, c DraftConfig, t *Target) error {
	where := fmt.Sprintf("draft %s vs target %s", f.Path, t.File.Path)
	if c.TargetHidden != t.Config.NEmbd {
		return fmt.Errorf("%s: dflash.target_hidden_size %d != target embedding_length %d", where, c.TargetHidden, t.Config.NEmbd)
	}
	if c.TargetBlocks != 0 && c.TargetBlocks != t.Config.NLayer {
		return fmt.Errorf("%s: dflash.target_block_count %d != target block_count %d", where, c.TargetBlocks, t.Config.NLayer)
	}
	for _, l := range c.TargetLayers {
		if l >= t.Config.NLayer {
			return fmt.Errorf("%s: dflash.target_layers taps layer %d (stored %d) but the target has %d layers", where, l, l+1, t.Config.NLayer)
		}
	}
	if v, err := f.Uint32("dflash.vocab_size"); err == nil && int(v) != t.Config.NVocab {
		return fmt.Errorf("%s: dflash.vocab_size %d != target vocabulary %d", where, v, t.Config.NVocab)
	}
	if c.MaskToken >= t.Config.NVocab {
		return fmt.Errorf("%s: mask token %d outside the target vocabulary (%d)", where, c.MaskToken, t.Config.NVocab)
	}
	dt, derr := f.Strings("tokenizer.ggml.tokens")
	tt, terr := t.File.Strings("tokenizer.ggml.tokens")
	if derr == nil && terr == nil && !slices.Equal(dt, tt) {
		return fmt.Errorf("%s: the tokenizers differ (tokenizer.ggml.tokens)", where)
	}
	return nil
}

// Close frees the repacked weights (with TargetOptions.Pack).
func (d *Draft) Close() { d.weights.release() }

// Len returns the number of context positions injected so far.
func (d *Draft) Len() int { return d.cache.Len() }

// Reset forgets all context.
func (d *Draft) Reset() { d.cache.Reset() }

// Taps returns the target layers whose outputs the draft reads (HF convention).
func (d *Draft) Taps() []int { return d.Config.TargetLayers }

// AddContext injects n new context positions. hidden maps each tapped target layer to n rows
// of TargetHidden values (rows from..from+n-1 of a target Step are selected by from).
func (d *Draft) AddContext(hidden map[int][]float32, from, n int) error {
	c := &d.Config
	Ht := c.TargetHidden
	width := len(c.TargetLayers) * Ht
	for n > 0 {
		m := min(n, len(d.s.pos))
		feat := d.s.feat[:m*width]
		for i := 0; i < m; i++ {
			for j, l := range c.TargetLayers {
				src, ok := hidden[l]
				if !ok || len(src) < (from+i+1)*Ht {
					return fmt.Errorf("draft context: hidden states of target layer %d missing", l)
				}
				copy(feat[i*width+j*Ht:], src[(from+i)*Ht:(from+i+1)*Ht])
			}
		}
		if err := d.inject(feat, m); err != nil {
			return err
		}
		from += m
		n -= m
	}
	return nil
}

// inject projects m feature rows with fc, normalizes them and writes their keys into every
// layer's cache at the next m positions.
func (d *Draft) inject(feat []float32, m int) error {
	c := &d.Config
	E := c.NEmbd
	if d.cache.Len()+m+c.BlockSize > d.cache.Cap() {
		return fmt.Errorf("draft context full (%d positions)", d.cache.Cap()-c.BlockSize)
	}
	ctx := d.s.ctx[:m*E]
	d.fc.MatMul(ctx, feat, m)
	rmsRows(ctx, ctx, d.encNorm, m, E, c.Eps)
	pos := d.s.pos[:m]
	for i := range pos {
		pos[i] = d.cache.Len() + i
	}
	for l := range d.layers {
		if err := d.layers[l].attn.InjectKV(ctx, m, pos, d.cache, l); err != nil {
			return err
		}
	}
	return d.cache.Advance(m)
}

// Block runs the backbone on [anchor, MASK x (g-1)] at positions Len()..Len()+g-1 with
// non-causal attention over the context and the block, and returns g rows of logits (through
// the target's lm_head) and g rows of normed hidden states. The block's keys are not kept.
func (d *Draft) Block(anchor int) (logits, hidden []float32, err error) {
	c := &d.Config
	g, E, V := c.BlockSize, c.NEmbd, c.NVocab
	if anchor < 0 || anchor >= V {
		return nil, nil, fmt.Errorf("draft: anchor token %d out of range", anchor)
	}
	x := d.s.x[:g*E]
	for k := 0; k < g; k++ {
		id := c.MaskToken
		if k == 0 {
			id = anchor
		}
		d.embed(id, x[k*E:(k+1)*E])
	}
	pos := d.s.pos[:g]
	for i := range pos {
		pos[i] = d.cache.Len() + i
	}
	h := d.s.h[:g*E]
	for li := range d.layers {
		l := &d.layers[li]
		rmsRows(h, x, l.attnNorm, g, E, c.Eps)
		if err := l.attn.Forward(d.s.attnOut[:g*E], h, g, pos, d.cache, li, mla.Block); err != nil {
			return nil, nil, err
		}
		addTo(x, d.s.attnOut[:g*E])
		rmsRows(h, x, l.ffnNorm, g, E, c.Eps)
		l.ffn.forward(d.s.ffo[:g*E], h, g, d.s.a, d.s.b)
		addTo(x, d.s.ffo[:g*E])
	}
	hid := d.s.hidden[:g*E]
	rmsRows(hid, x, d.outNorm, g, E, c.Eps)
	lg := d.s.logits[:g*V]
	d.head.MatMul(lg, hid, g)
	return lg, hid, nil
}

// MarkovBias adds W2·W1[prev] to dst (the Markov head's logit bias); a no-op without the head.
func (d *Draft) MarkovBias(prev int, dst []float32) {
	if d.w1 == nil {
		return
	}
	w1 := d.s.w1row[:d.Config.MarkovRank]
	d.w1.Row(prev, w1)
	bias := d.s.bias[:d.Config.NVocab]
	d.w2.MatVec(bias, w1)
	addTo(dst, bias)
}

// Confidence returns c_k = sigmoid(conf_proj · [h_{k-1} ; W1[prev]] + b) for block row k-1;
// 1 without a confidence head.
func (d *Draft) Confidence(hidden []float32, k, prev int) float64 {
	if d.conf == nil {
		return 1
	}
	c := &d.Config
	E, r := c.NEmbd, c.MarkovRank
	in := d.s.confIn[:E+r]
	copy(in, hidden[(k-1)*E:k*E])
	if r > 0 {
		d.w1.Row(prev, in[E:])
	}
	d.conf.MatVec(d.s.confOut, in)
	z := float64(d.s.confOut[0] + d.confB[0])
	return 1 / (1 + math.Exp(-z))
}
