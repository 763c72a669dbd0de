// Package dflashgqa runs upstream llama.cpp's dflash draft on its Qwen3-style GQA path
// (families.md sections 3-4) as a runtime.Draft against any runtime.Target: DeepSpec's
// DSpark drafts (Markov and confidence heads, block anchored at the last token), DFlash
// drafts (no heads, mask positions) and the GQA Kimi-K3 DSpark. The context features (the
// target's tapped hidden states through fc and hidden_norm) are injected into every layer
// through that layer's own k/v projections; the block runs non-causally (or causally when
// the file says so) over the context and itself, with per-head q/k RMSNorm and NEOX RoPE at
// absolute positions. The draft knows its target only through runtime.Target. Its
// hyperparameters and tensors are read through the dflash GQA declaration (gguf/schema).
package dflashgqa

import (
	"fmt"
	"math"
	"slices"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// Config holds a dflash GQA draft's hyperparameters.
type Config struct {
	NLayer, NEmbd, NFF, NVocab int
	NHead, NHeadKV, HeadDim    int // query heads, key/value heads, head size
	Eps                        float32
	RopeBase                   float64 // NEOX RoPE theta (the whole head rotates)
	BlockSize                  int     // g: block rows per forward
	SampleFromAnchor           bool    // true (DSpark): row k predicts token k+1; false (DFlash): row k predicts token k
	Causal                     bool    // causal block attention: row k sees the block rows up to itself
	Window                     int     // sliding-window width of the layers Sliding marks
	Sliding                    []bool  // per layer; nil: every layer attends fully
	TargetLayers               []int   // tapped target layers in HF convention (decoder layer outputs, 0-based)
	TargetBlocks               int     // the target's layer count as the file records it (0: not recorded)
	MarkovRank                 int     // 0: no Markov head
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

// kvWidth is the width of one cached key (or value) row: every key/value head.
func (c *Config) kvWidth() int { return c.NHeadKV * c.HeadDim }

// CacheBytes returns the bytes of the key/value cache a draft loaded for a context of ctx
// tokens allocates (ctx plus one block of rows, float32 keys and values in every layer), or
// an error if ctx is not positive or the size overflows.
func (c *Config) CacheBytes(ctx int) (int64, error) {
	rows, err := c.cacheRows(ctx)
	if err != nil {
		return 0, err
	}
	per := int64(2) * int64(c.NLayer) * int64(c.kvWidth()) * 4
	if per <= 0 || int64(rows) > math.MaxInt64/per {
		return 0, fmt.Errorf("draft context %d: a cache of %d rows x %d bytes overflows", ctx, rows, per)
	}
	return int64(rows) * per, nil
}

// cacheRows is the draft cache's capacity for a context of ctx tokens: ctx plus one block.
func (c *Config) cacheRows(ctx int) (int, error) {
	if ctx <= 0 || ctx > math.MaxInt-c.BlockSize {
		return 0, fmt.Errorf("draft context %d: must be in [1, %d]", ctx, math.MaxInt-c.BlockSize)
	}
	return ctx + c.BlockSize, nil
}

// ReadConfig reads and validates a dflash GQA GGUF's hyperparameters through the
// declaration, without loading its tensors (NVocab is the file's vocab_size; Load takes the
// vocabulary from the head the draft computes logits with).
func ReadConfig(f *gguf.File) (Config, error) {
	c, _, err := readConfig(f)
	return c, err
}

func readConfig(f *gguf.File) (Config, *schema.Values, error) {
	if s := schema.For(schema.FileSource(f)); s != nil && s != schema.DFlashGQA {
		return Config{}, nil, fmt.Errorf("%s: a %s file, not a GQA dflash draft", f.Path, s.Name)
	}
	v, err := model.Resolve(f, schema.DFlashGQA)
	if err != nil {
		return Config{}, nil, err
	}
	c := Config{
		NLayer: int(v.Int(schema.BlockCount)), NEmbd: int(v.Int(schema.EmbeddingLength)),
		NFF: int(v.Int(schema.FeedForwardLength)), NVocab: int(v.Int(schema.VocabSize)),
		NHead: int(v.Int(schema.HeadCount)), NHeadKV: int(v.Int(schema.HeadCountKV)),
		HeadDim: int(v.Int(schema.KeyLength)), Eps: v.F32(schema.RMSEpsilon),
		RopeBase: float64(v.F32(schema.RopeFreqBase)), BlockSize: int(v.Int(schema.BlockSize)),
		SampleFromAnchor: v.Bool(schema.SampleFromAnchor), Causal: v.Bool(schema.Causal),
		TargetBlocks: int(v.Int(schema.TargetBlockCount)), MarkovRank: int(v.Int(schema.MarkovRank)),
		MaskToken: int(v.Int(schema.TokMask)),
	}
	if v.Has(schema.SlidingWindowPattern) {
		c.Sliding = v.Bools(schema.SlidingWindowPattern)
		c.Window = int(v.Int(schema.SlidingWindow))
		if !slices.Contains(c.Sliding, true) {
			c.Sliding = nil
		}
	}
	for _, l := range v.Ints(schema.TargetLayers) {
		c.TargetLayers = append(c.TargetLayers, int(l)-1) // stored +1: the input of layer k+1
	}
	// What upstream honours generically but dspark's runtime does not run yet is refused,
	// never silently ignored.
	if t := v.Str(schema.RopeScalingType); t != "" && t != "none" {
		return c, nil, fmt.Errorf("%s: %s is %q: rope scaling of GQA drafts is not run by dspark's runtime yet", f.Path, schema.DFlashGQA.FullName(schema.RopeScalingType), t)
	}
	if d := int(v.Int(schema.RopeDimensionCount)); d != c.HeadDim {
		return c, nil, fmt.Errorf("%s: %s is %d, key_length %d: partial rotary embeddings are not run by dspark's runtime", f.Path, schema.DFlashGQA.FullName(schema.RopeDimensionCount), d, c.HeadDim)
	}
	if v.Has(schema.LogitScale) {
		if s := v.F32(schema.LogitScale); s != 1 {
			return c, nil, fmt.Errorf("%s: %s is %v: scaled draft logits are not run by dspark's runtime", f.Path, schema.DFlashGQA.FullName(schema.LogitScale), s)
		}
	}
	if c.HeadDim%2 != 0 {
		return c, nil, fmt.Errorf("%s: key_length %d is odd: NEOX RoPE rotates pairs (i, i + d/2)", f.Path, c.HeadDim)
	}
	if !(c.RopeBase > 1) || math.IsInf(c.RopeBase, 0) {
		return c, nil, fmt.Errorf("%s: %s is %v, must be finite and > 1", f.Path, schema.DFlashGQA.FullName(schema.RopeFreqBase), c.RopeBase)
	}
	if c.NHeadKV == 0 || c.NHead%c.NHeadKV != 0 {
		return c, nil, fmt.Errorf("%s: head_count %d is not a multiple of head_count_kv %d", f.Path, c.NHead, c.NHeadKV)
	}
	return c, v, nil
}

// Draft is a loaded GQA dflash draft. It keeps its own key/value cache of injected context
// rows. It implements runtime.Draft.
type Draft struct {
	Config Config
	File   *gguf.File

	embed   func(id int, dst []float32) // token embedding (the target's unless the draft keeps its own)
	head    runtime.Head                // output head (the target's unless the draft keeps its own)
	fc      *kernels.Mat                // NEmbd x (taps*NEmbd)
	encNorm []float32
	outNorm []float32
	heads   model.Heads // Markov and confidence heads
	layers  []layer
	cache   kvCache
	rope    rope
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
// head is the target's, or the stand-in head of LoadStandalone, with theirs, unless the draft
// keeps its own).
func (d *Draft) Numerics() runtime.Numerics { return d.numerics }

type layer struct {
	attnNorm, ffnNorm []float32
	qNorm, kNorm      []float32
	q, k, v, o        *kernels.Mat
	ffn               model.FFN
	sliding           bool
}

type scratch struct {
	feat, ctx            []float32
	x, h, q, attnOut, ao []float32
	a, b, ffo            []float32
	logits               []float32 // g x V
	hidden               []float32 // g x NEmbd (after output_norm)
	att                  attention
	maxRows              int // rows one context injection handles at a time
}

// Load binds a dflash GQA GGUF and checks that it fits target (hidden size, vocabulary,
// tokenizer, tapped layers); each mismatch is an error naming both files. The draft embeds
// with the target's table and computes logits with the target's head unless it keeps its
// own token_embd / output; opt.Context 0 takes the target's capacity.
func Load(f *gguf.File, target runtime.Target, opt runtime.Options) (*Draft, error) {
	c, v, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	if err := checkPair(f, c, v, target); err != nil {
		return nil, err
	}
	if opt.Context <= 0 {
		opt.Context = target.Cap()
	}
	return load(f, c, v, target.Embed, target.Head(), opt)
}

// LoadStandalone binds a dflash GQA GGUF without its target, using head (vocab x NEmbd) as
// both the token embedding and the output head (unless the draft keeps its own). It exists
// to time a full-size draft on its own (dspark run --draft-only); its drafts mean nothing.
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
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = kernels.MaxBatch
	}
	if opt.Context <= 0 {
		opt.Context = 4096
	}
	if c.BlockSize > kernels.MaxBatch {
		return nil, fmt.Errorf("%s: block size %d exceeds the kernels' batch of %d rows", f.Path, c.BlockSize, kernels.MaxBatch)
	}
	b := model.NewBinder(f, v, opt.Pack, opt.Precision())
	d := &Draft{Config: c, File: f, embed: embed, head: head, values: v}
	fail := func(err error) (*Draft, error) {
		b.Release()
		return nil, err
	}
	d.fc = b.Mat(schema.FC, -1)
	d.encNorm = b.Vec(schema.EncOutputNorm, -1)
	d.outNorm = b.Vec(schema.OutputNorm, -1)
	if b.Has(schema.TokenEmbd, -1) {
		if m := b.Mat(schema.TokenEmbd, -1); m != nil {
			d.embed = m.Row
			if m.Rows() != head.Rows() && !b.Has(schema.Output, -1) {
				return fail(fmt.Errorf("%s: token_embd has %d rows, the head %d", f.Path, m.Rows(), head.Rows()))
			}
		}
	}
	if b.Has(schema.Output, -1) {
		if m := b.Mat(schema.Output, -1); m != nil {
			d.head = m
		}
	}
	d.Config.NVocab = d.head.Rows()
	d.heads = b.Heads(c.NEmbd, c.MarkovRank)
	d.Config.HasConfidence = d.heads.HasConfidence()
	for i := 0; i < c.NLayer; i++ {
		l := layer{
			attnNorm: b.Vec(schema.AttnNorm, i), ffnNorm: b.Vec(schema.FFNNorm, i),
			q: b.Mat(schema.AttnQ, i), k: b.Mat(schema.AttnK, i), v: b.Mat(schema.AttnV, i), o: b.Mat(schema.AttnOutput, i),
			qNorm: b.Vec(schema.AttnQNorm, i), kNorm: b.Vec(schema.AttnKNorm, i),
			ffn:     b.FFN(schema.FFNGate, schema.FFNUp, schema.FFNDown, i),
			sliding: c.Sliding != nil && c.Sliding[i],
		}
		d.layers = append(d.layers, l)
	}
	if err := b.Finish(); err != nil {
		return fail(err)
	}
	V := d.Config.NVocab
	w1Rows, w2Rows := d.heads.MarkovRows()
	for _, rows := range []int{w1Rows, w2Rows} {
		if rows != 0 && rows != V {
			return fail(fmt.Errorf("%s: the Markov head has %d rows, the output head %d", f.Path, rows, V))
		}
	}
	if c.MaskToken >= V {
		return fail(fmt.Errorf("%s: mask token %d outside the vocabulary of %d", f.Path, c.MaskToken, V))
	}
	d.weights = b
	hm, ok := d.head.(*kernels.Mat)
	d.numerics = runtime.NumericsFor(opt, b.BF16() || ok && hm.DType() == kernels.BF16)
	d.numerics.Note = b.QuantNote(d.numerics.Note)
	rows, err := c.cacheRows(opt.Context)
	if err != nil {
		return fail(fmt.Errorf("%s: context %d: %w", f.Path, opt.Context, err))
	}
	if _, err := c.CacheBytes(opt.Context); err != nil {
		return fail(fmt.Errorf("%s: %w", f.Path, err))
	}
	d.cache = newKVCache(c.NLayer, rows, c.kvWidth())
	d.rope = newRope(c.HeadDim, c.RopeBase)
	n := max(min(opt.MaxBatch, kernels.MaxBatch), 1)
	g, E := c.BlockSize, c.NEmbd
	qw := c.NHead * c.HeadDim
	d.heads.Prepare(V)
	d.s = scratch{
		feat: make([]float32, n*len(c.TargetLayers)*E), ctx: make([]float32, n*E), maxRows: n,
		x: make([]float32, g*E), h: make([]float32, g*E), q: make([]float32, g*qw),
		attnOut: make([]float32, g*qw), ao: make([]float32, g*E),
		a: make([]float32, g*c.NFF), b: make([]float32, 2*g*c.NFF), ffo: make([]float32, g*E),
		logits: make([]float32, g*V), hidden: make([]float32, g*E),
	}
	d.s.att.init(&d.Config, rows)
	return d, nil
}

// checkPair validates that draft file f (config c) can run against target.
func checkPair(f *gguf.File, c Config, v *schema.Values, t runtime.Target) error {
	where := fmt.Sprintf("draft %s vs target %s", f.Path, t.Name())
	td := t.Dims()
	if c.NEmbd != td.NEmbd {
		return fmt.Errorf("%s: dflash.embedding_length %d != target hidden size %d (the draft's fc reads taps x its own width, so the two must be equal)", where, c.NEmbd, td.NEmbd)
	}
	if c.TargetBlocks != 0 && c.TargetBlocks != td.NLayer {
		return fmt.Errorf("%s: dflash.target_block_count %d != target block count %d", where, c.TargetBlocks, td.NLayer)
	}
	for _, l := range c.TargetLayers {
		if l >= td.NLayer-1 {
			return fmt.Errorf("%s: dflash.target_layers taps layer %d (stored %d) but the target has %d layers: the output of its last layer %d is no layer's input", where, l, l+1, td.NLayer, td.NLayer-1)
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
func (d *Draft) Len() int { return d.cache.n }

// Reset forgets all context.
func (d *Draft) Reset() { d.cache.n = 0 }

// Taps returns the target layers whose outputs the draft reads (HF convention).
func (d *Draft) Taps() []int { return d.Config.TargetLayers }

// AddContext injects n new context positions. hidden maps each tapped target layer to rows
// of NEmbd values (rows from..from+n-1 of a target Step are selected by from).
func (d *Draft) AddContext(hidden map[int][]float32, from, n int) error {
	c := &d.Config
	E := c.NEmbd
	width := len(c.TargetLayers) * E
	if from < 0 || n < 0 {
		return fmt.Errorf("draft context: rows %d..%d", from, from+n)
	}
	for n > 0 {
		m := min(n, d.s.maxRows)
		feat := d.s.feat[:m*width]
		for i := 0; i < m; i++ {
			for j, l := range c.TargetLayers {
				src, ok := hidden[l]
				if !ok || len(src) < (from+i+1)*E {
					return fmt.Errorf("draft context: hidden states of target layer %d missing", l)
				}
				copy(feat[i*width+j*E:], src[(from+i)*E:(from+i+1)*E])
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

// inject projects m feature rows with fc, normalizes them (hidden_norm) and writes their
// keys and values, through every layer's own k/v projections, k_norm and RoPE at their
// positions, into the cache at the next m positions. The context rows do not pass
// input_layernorm.
func (d *Draft) inject(feat []float32, m int) error {
	c := &d.Config
	E := c.NEmbd
	if d.cache.n+m+c.BlockSize > d.cache.rows {
		return fmt.Errorf("draft context full (%d positions)", d.cache.rows-c.BlockSize)
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
	for li := range d.layers {
		d.writeKV(li, ctx, m, d.cache.n)
	}
	d.cache.n += m
	return nil
}

// writeKV computes the keys (k_proj, k_norm per head, RoPE) and values (v_proj) of m rows
// of x at positions pos0.. and stores them in layer li's cache.
func (d *Draft) writeKV(li int, x []float32, m, pos0 int) {
	c := &d.Config
	l := &d.layers[li]
	w, D := c.kvWidth(), c.HeadDim
	ks := d.cache.k[li][pos0*w : (pos0+m)*w]
	vs := d.cache.v[li][pos0*w : (pos0+m)*w]
	l.k.MatMul(ks, x, m)
	l.v.MatMul(vs, x, m)
	for i := 0; i < m; i++ {
		for h := 0; h < c.NHeadKV; h++ {
			kh := ks[i*w+h*D : i*w+(h+1)*D]
			rmsNorm(kh, l.kNorm, c.Eps)
			d.rope.rotate(kh, pos0+i)
		}
	}
}

// Block runs the backbone on [anchor, MASK x (g-1)] at positions Len()..Len()+g-1 over the
// context and the block (every block row sees the whole block, or, for a causal draft, the
// block rows up to itself), and returns g rows of logits and g rows of normed hidden states.
// The block's keys are not kept.
func (d *Draft) Block(anchor int) (logits, hidden []float32, err error) {
	c := &d.Config
	g, E, V := c.BlockSize, c.NEmbd, c.NVocab
	if anchor < 0 || anchor >= V {
		return nil, nil, fmt.Errorf("draft: anchor token %d out of range", anchor)
	}
	s0 := d.cache.n
	if s0+g > d.cache.rows {
		return nil, nil, fmt.Errorf("draft context full (%d positions)", d.cache.rows-g)
	}
	x := d.s.x[:g*E]
	for k := 0; k < g; k++ {
		id := c.MaskToken
		if k == 0 {
			id = anchor
		}
		d.embed(id, x[k*E:(k+1)*E])
	}
	qw := c.NHead * c.HeadDim
	h := d.s.h[:g*E]
	p := d.probe
	p.Check(-1, "token embedding", schema.TokenEmbd+" (the target's unless the draft has its own)", x, g)
	for li := range d.layers {
		l := &d.layers[li]
		model.RMSRows(h, x, l.attnNorm, g, E, c.Eps)
		p.Check(li, "attention norm", schema.AttnNorm, h, g)
		q := d.s.q[:g*qw]
		l.q.MatMul(q, h, g)
		for k := 0; k < g; k++ {
			for hd := 0; hd < c.NHead; hd++ {
				qh := q[k*qw+hd*c.HeadDim : k*qw+(hd+1)*c.HeadDim]
				rmsNorm(qh, l.qNorm, c.Eps)
				d.rope.rotate(qh, s0+k)
			}
		}
		d.writeKV(li, h, g, s0) // the block's rows, after the context's; not kept
		window := 0
		if l.sliding {
			window = c.Window
		}
		d.s.att.run(d.s.attnOut[:g*qw], q, &d.cache, li, s0, g, c.Causal, window)
		l.o.MatMul(d.s.ao[:g*E], d.s.attnOut[:g*qw], g)
		p.Check(li, "attention over the context and the block", "blk.{i}.attn_q/k/v/q_norm/k_norm/output.weight", d.s.ao[:g*E], g)
		model.AddTo(x, d.s.ao[:g*E])
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
