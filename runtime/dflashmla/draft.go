// Package dflashmla runs dspark's dflash draft with an MLA backbone (the Kimi-K3 DSpark
// family, dspark-k3.md section 4) as a runtime.Draft against any runtime.Target: context
// injection of the target's tapped hidden states, one block forward per round (non-causal
// or causal block attention, as the file declares), the Markov head's bias and the
// confidence head. Its hyperparameters and tensors are read through the dflash MLA
// declaration (gguf/schema).
package dflashmla

import (
	"fmt"
	"math"
	"slices"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Config holds a dflash MLA draft's hyperparameters.
type Config struct {
	NLayer, NEmbd, NFF, NVocab int
	Attn                       mla.Config
	Eps                        float32
	BlockSize                  int   // g: block rows per forward
	SampleFromAnchor           bool  // true (DSpark): row k predicts token k+1; false (DFlash): row k predicts token k
	Causal                     bool  // causal block attention: row k sees the block rows up to itself
	TargetLayers               []int // tapped target layers in HF convention (decoder layer outputs, 0-based)
	TargetHidden               int
	TargetBlocks               int // the target's layer count as the file records it (0: not recorded)
	MarkovRank                 int // 0: no Markov head
	MaskToken                  int
	HasConfidence              bool
}

// Info returns what the decode loop needs of the blocks.
func (c *Config) Info() runtime.DraftInfo {
	return runtime.DraftInfo{BlockSize: c.BlockSize, SampleFromAnchor: c.SampleFromAnchor, HasConfidence: c.HasConfidence}
}

// MaxDrafts is the most drafts one block proposes: the block size, or one less for a DFlash
// draft (sample_from_anchor false), whose first row predicts the anchor itself.
func (c *Config) MaxDrafts() int { return c.Info().MaxDrafts() }

// CacheBytes returns the bytes of the latent cache a draft loaded for a context of ctx
// tokens allocates (ctx plus one block of rows), or an error if ctx is not positive or the
// size overflows.
func (c *Config) CacheBytes(ctx int) (int64, error) {
	rows, err := c.cacheRows(ctx)
	if err != nil {
		return 0, err
	}
	return mla.LatentCacheBytes(c.NLayer, rows, c.Attn.KVLoraRank, c.Attn.DRope)
}

// cacheRows is the draft cache's capacity for a context of ctx tokens: ctx plus one block.
func (c *Config) cacheRows(ctx int) (int, error) {
	if ctx <= 0 || ctx > math.MaxInt-c.BlockSize {
		return 0, fmt.Errorf("draft context %d: must be in [1, %d]", ctx, math.MaxInt-c.BlockSize)
	}
	return ctx + c.BlockSize, nil
}

// ReadConfig reads and validates a dflash MLA GGUF's hyperparameters through the
// declaration, without loading its tensors (NVocab is the file's vocab_size; Load takes the
// vocabulary from the target's head).
func ReadConfig(f *gguf.File) (Config, error) {
	c, _, err := readConfig(f)
	return c, err
}

func readConfig(f *gguf.File) (Config, *schema.Values, error) {
	v, err := model.Resolve(f, schema.DFlashMLA)
	if err != nil {
		return Config{}, nil, err
	}
	c := Config{
		NLayer: int(v.Int(schema.BlockCount)), NEmbd: int(v.Int(schema.EmbeddingLength)),
		NFF: int(v.Int(schema.FeedForwardLength)), NVocab: int(v.Int(schema.VocabSize)),
		Attn: model.MLAConfig(v), Eps: v.F32(schema.RMSEpsilon),
		BlockSize: int(v.Int(schema.BlockSize)), SampleFromAnchor: v.Bool(schema.SampleFromAnchor),
		Causal: v.Bool(schema.Causal), TargetHidden: int(v.Int(schema.TargetHiddenSize)),
		TargetBlocks: int(v.Int(schema.TargetBlockCount)), MarkovRank: int(v.Int(schema.MarkovRank)),
		MaskToken: int(v.Int(schema.TokMask)),
	}
	for _, l := range v.Ints(schema.TargetLayers) {
		c.TargetLayers = append(c.TargetLayers, int(l)-1) // stored +1: the input of layer k+1
	}
	return c, v, nil
}

// Draft is a loaded DSpark draft: an MLA backbone reading the target's hidden states, a Markov
// head and a confidence head. It keeps its own latent cache of injected context rows. It
// implements runtime.Draft.
type Draft struct {
	Config Config
	File   *gguf.File

	embed   func(id int, dst []float32) // token embedding (the target's unless the draft keeps its own)
	head    runtime.Head                // the target's lm_head (vocab x NEmbd)
	fc      *kernels.Mat                // NEmbd x (taps*TargetHidden)
	encNorm []float32
	outNorm []float32
	tokEmbd *kernels.Mat // nil: the target's embedding is used
	heads   model.Heads  // Markov and confidence heads
	layers  []layer
	cache   *mla.LatentCache
	mask    mla.Mask
	weights *model.Binder
	values  *schema.Values

	numerics runtime.Numerics
	s        scratch
	probe    *runtime.Probe // nil outside a diagnostic re-run
}

var _ runtime.Draft = (*Draft)(nil)

// SetProbe checks every operation of the block forwards that follow with p (nil: none), for
// the diagnostic re-run of a block that produced a non-finite value (runtime.Probed).
func (d *Draft) SetProbe(p *runtime.Probe) { d.probe = p }

// Name returns the draft's file path, for messages.
func (d *Draft) Name() string { return d.File.Path }

// Numerics says which kernel path and activation precision the draft's products use (its
// lm_head is the target's, or the stand-in head of LoadStandalone, with theirs).
func (d *Draft) Numerics() runtime.Numerics { return d.numerics }

type layer struct {
	attnNorm, ffnNorm []float32
	attn              *mla.Attention
	ffn               model.FFN
}

type scratch struct {
	feat, ctx                []float32
	x, h, attnOut, a, b, ffo []float32
	pos                      []int
	logits                   []float32 // g x V
	hidden                   []float32 // g x NEmbd (after output_norm)
}

// Load binds a dflash MLA GGUF and checks that it fits target (hidden sizes, vocabulary,
// tokenizer, tapped layers); each mismatch is an error naming both files. The draft embeds
// with the target's table (unless it keeps its own) and computes logits with the target's
// head; opt.Context 0 takes the target's capacity.
func Load(f *gguf.File, target runtime.Target, opt runtime.Options) (*Draft, error) {
	c, v, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	if err := checkPair(f, c, v, target); err != nil {
		return nil, err
	}
	if c.NEmbd != target.Dims().NEmbd {
		if _, ok := f.Tensor(schema.TokenEmbd); !ok {
			return nil, fmt.Errorf("%s has no token_embd and its width %d differs from the target %s (%d)", f.Path, c.NEmbd, target.Name(), target.Dims().NEmbd)
		}
	}
	if opt.Context <= 0 {
		opt.Context = target.Cap()
	}
	return load(f, c, v, target.Embed, target.Head(), opt)
}

// LoadStandalone binds a dflash MLA GGUF without its target, using head (vocab x NEmbd) as
// both the token embedding and the lm_head. It exists to time a full-size draft on its own
// (dspark run --draft-only); its drafts mean nothing.
func LoadStandalone(f *gguf.File, head runtime.EmbeddingHead, opt runtime.Options) (*Draft, error) {
	c, v, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	if head, err = runtime.StandaloneHead(f.Path, head, c.NEmbd, &opt); err != nil {
		return nil, err
	}
	return load(f, c, v, head.Row, head, opt)
}

func load(f *gguf.File, c Config, v *schema.Values, embed func(int, []float32), head runtime.Head, opt runtime.Options) (*Draft, error) {
	c.NVocab = head.Rows()
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = kernels.MaxBatch
	}
	if opt.Context <= 0 {
		opt.Context = 4096
	}
	E, V := c.NEmbd, c.NVocab
	b := model.NewBinder(f, v, opt.Pack, opt.Precision())
	d := &Draft{Config: c, File: f, embed: embed, head: head, values: v, mask: mla.Block}
	if c.Causal {
		d.mask = mla.Causal
	}
	d.fc = b.Mat(schema.FC, -1)
	d.encNorm = b.Vec(schema.EncOutputNorm, -1)
	d.outNorm = b.Vec(schema.OutputNorm, -1)
	if b.Has(schema.TokenEmbd, -1) {
		d.tokEmbd = b.Mat(schema.TokenEmbd, -1)
		if d.tokEmbd != nil {
			d.embed = d.tokEmbd.Row
		}
	}
	d.heads = b.Heads(c.NEmbd, c.MarkovRank)
	d.Config.HasConfidence = d.heads.HasConfidence()
	a := c.Attn
	for i := 0; i < c.NLayer; i++ {
		var l layer
		l.attnNorm = b.Vec(schema.AttnNorm, i)
		l.ffnNorm = b.Vec(schema.FFNNorm, i)
		w := b.Attention(i, a)
		l.ffn = b.FFN(schema.FFNGate, schema.FFNUp, schema.FFNDown, i)
		if b.Err() != nil {
			b.Release()
			return nil, b.Err()
		}
		at, err := mla.NewAttention(a, w, max(opt.MaxBatch, c.BlockSize))
		if err != nil {
			b.Release()
			return nil, fmt.Errorf("%s: layer %d: %w", f.Path, i, err)
		}
		l.attn = at
		d.layers = append(d.layers, l)
	}
	if err := b.Finish(); err != nil {
		b.Release()
		return nil, err
	}
	if d.tokEmbd != nil && d.tokEmbd.Rows() != V {
		b.Release()
		return nil, fmt.Errorf("%s: token_embd has %d rows, the head %d", f.Path, d.tokEmbd.Rows(), V)
	}
	d.weights = b
	hm, ok := head.(*kernels.Mat)
	d.numerics = runtime.NumericsFor(opt, b.BF16() || ok && hm.DType() == kernels.BF16)
	d.numerics.Note = b.QuantNote(d.numerics.Note)
	rows, err := c.cacheRows(opt.Context)
	if err == nil {
		d.cache, err = mla.AllocLatentCache(c.NLayer, rows, a.KVLoraRank, a.DRope)
	}
	if err != nil {
		b.Release()
		return nil, fmt.Errorf("%s: context %d: %w", f.Path, opt.Context, err)
	}
	n := max(opt.MaxBatch, c.BlockSize)
	g := c.BlockSize
	d.heads.Prepare(V)
	d.s = scratch{
		feat: make([]float32, n*len(c.TargetLayers)*c.TargetHidden), ctx: make([]float32, n*E),
		x: make([]float32, g*E), h: make([]float32, g*E), attnOut: make([]float32, g*E),
		a: make([]float32, g*c.NFF), b: make([]float32, 2*g*c.NFF), ffo: make([]float32, g*E),
		pos: make([]int, n), logits: make([]float32, g*V), hidden: make([]float32, g*E),
	}
	return d, nil
}

// checkPair validates that draft file f (config c) can run against target.
func checkPair(f *gguf.File, c Config, v *schema.Values, t runtime.Target) error {
	where := fmt.Sprintf("draft %s vs target %s", f.Path, t.Name())
	td := t.Dims()
	if c.TargetHidden != td.NEmbd {
		return fmt.Errorf("%s: dflash.target_hidden_size %d != target embedding_length %d", where, c.TargetHidden, td.NEmbd)
	}
	if c.TargetBlocks != 0 && c.TargetBlocks != td.NLayer {
		return fmt.Errorf("%s: dflash.target_block_count %d != target block_count %d", where, c.TargetBlocks, td.NLayer)
	}
	for _, l := range c.TargetLayers {
		if l >= td.NLayer {
			return fmt.Errorf("%s: dflash.target_layers taps layer %d (stored %d) but the target has %d layers", where, l, l+1, td.NLayer)
		}
	}
	if c.NVocab != td.NVocab {
		return fmt.Errorf("%s: dflash.vocab_size %d != target vocabulary %d", where, c.NVocab, td.NVocab)
	}
	if c.MaskToken >= td.NVocab {
		return fmt.Errorf("%s: mask token %d outside the target vocabulary (%d)", where, c.MaskToken, td.NVocab)
	}
	if dt, tt := v.Strs(schema.TokTokens), t.Tokens(); dt != nil && tt != nil && !slices.Equal(dt, tt) {
		return fmt.Errorf("%s: the tokenizers differ (%s)", where, schema.TokTokens)
	}
	return nil
}

// Close frees the repacked weights (with Options.Pack).
func (d *Draft) Close() { d.weights.Release() }

// Values returns the file's keys as resolved against the declaration, with what the
// loader read and bound.
func (d *Draft) Values() *schema.Values { return d.values }

// Info describes the draft's blocks.
func (d *Draft) Info() runtime.DraftInfo { return d.Config.Info() }

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
	if err := model.CheckContext(d.File.Path, "context projection", schema.FC, ctx, m); err != nil {
		return err
	}
	model.RMSRows(ctx, ctx, d.encNorm, m, E, c.Eps)
	if err := model.CheckContext(d.File.Path, "context norm", schema.EncOutputNorm, ctx, m); err != nil {
		return err
	}
	pos := d.s.pos[:m]
	for i := range pos {
		pos[i] = d.cache.Len() + i
	}
	for l := range d.layers {
		if err := d.layers[l].attn.InjectKV(ctx, m, pos, d.cache, l); err != nil {
			return fmt.Errorf("%s: the draft's context injection: %w", d.File.Path, err)
		}
	}
	return d.cache.Advance(m)
}

// Block runs the backbone on [anchor, MASK x (g-1)] at positions Len()..Len()+g-1 over the
// context and the block (every block row sees the whole block, or, for a causal draft, the
// block rows up to itself), and returns g rows of logits (through the target's lm_head) and
// g rows of normed hidden states. The block's keys are not kept.
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
	p := d.probe
	p.Check(-1, "token embedding", schema.TokenEmbd+" (the target's unless the draft has its own)", x, g)
	for li := range d.layers {
		l := &d.layers[li]
		model.RMSRows(h, x, l.attnNorm, g, E, c.Eps)
		p.Check(li, "attention norm", schema.AttnNorm, h, g)
		if err := l.attn.Forward(d.s.attnOut[:g*E], h, g, pos, d.cache, li, d.mask); err != nil {
			return nil, nil, err
		}
		p.Check(li, "MLA attention over the context and the block", "blk.{i}.attn_q_a/q_a_norm/q_b/kv_a_mqa/kv_a_norm/k_b/v_b/output.weight", d.s.attnOut[:g*E], g)
		model.AddTo(x, d.s.attnOut[:g*E])
		model.RMSRows(h, x, l.ffnNorm, g, E, c.Eps)
		p.Check(li, "feed-forward norm", schema.FFNNorm, h, g)
		l.ffn.Forward(d.s.ffo[:g*E], h, g, d.s.a, d.s.b)
		p.Check(li, "feed-forward", "blk.{i}.ffn_gate/up/down.weight", d.s.ffo[:g*E], g)
		model.AddTo(x, d.s.ffo[:g*E])
		p.Check(li, "residual sum", "", x, g)
	}
	hid := d.s.hidden[:g*E]
	model.RMSRows(hid, x, d.outNorm, g, E, c.Eps)
	p.Check(-1, "output norm", schema.OutputNorm, hid, g)
	lg := d.s.logits[:g*V]
	d.head.MatMul(lg, hid, g)
	p.Check(-1, "output head", schema.Output+" (the target's unless the draft has its own)", lg, g)
	return lg, hid, nil
}

// MarkovBias adds W2·W1[prev] to dst (the Markov head's logit bias); a no-op without the head.
func (d *Draft) MarkovBias(prev int, dst []float32) { d.heads.MarkovBias(prev, dst) }

// MarkovBiases writes the Markov head's biases for several previous tokens in one pass (row j
// of dst for prevs[j], what MarkovBias adds) and reports whether the draft has the head.
func (d *Draft) MarkovBiases(prevs []int, dst []float32) bool {
	return d.heads.MarkovBiases(prevs, dst)
}

// Confidence returns sigmoid(conf_proj · [h_row ; W1[prev]] + b) for block row row (hidden
// as Block returns it), whose previous token is prev: the confidence of the draft drawn from
// that row. It is 1 without a confidence head.
func (d *Draft) Confidence(hidden []float32, row, prev int) float64 {
	return d.heads.Confidence(hidden, row, prev)
}
