// Package memory estimates what a target, or a draft-target pair, needs in memory at a
// context of N tokens: weights (bytes by type, as mapped), the KV cache of the attention
// blocks, the recurrent state of the recurrent blocks (Gated DeltaNet: qwen35; KDA:
// kimi-k3, kimi-linear) and what its rollback keeps, the draft's context, and scratch. Everything is derived from the files' headers and
// their declarations in gguf/schema (the cache layout of a family is chosen by the keys a
// declaration declares, never by an architecture's name); no tensor data is read.
//
// It is an estimate of dspark's runtime (F32 caches and state, batches of at most Batch
// rows), not of any other loader's, and scratch counts the leading terms only.
package memory

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// Design is how a recurrent target returns to the state after an accepted row.
type Design string

// Rollback designs.
const (
	// Stash is dspark's runtime (runtime/internal/rollback): per recurrent block, besides
	// the current state, the state before the last forward and Checkpoints mid-forward
	// states, a second conv window, and per row of a forward (Batch rows) the stash the
	// accepted state is replayed from: the conv input, the keys, the decays and the deltas.
	Stash Design = "stash"
	// Snapshots keeps the state after each of the round's drafted rows (llama.cpp's
	// n_rs_seq): one full state copy per draft token.
	Snapshots Design = "snapshots"
)

// Checkpoints is the number of mid-forward states dspark's runtime keeps per recurrent
// block (runtime/internal/rollback.DefaultCheckpoints; runtime/qwen35's and
// runtime/kimik3's tests check that this package's estimate is their allocation).
const Checkpoints = 2

// DefaultBatch is the most rows one forward takes (runtime/kernels.MaxBatch): prefill
// chunks and the tapped hidden states published per forward.
const DefaultBatch = 64

// MaxCtx bounds the context an estimate takes (2^32 tokens).
const MaxCtx = 1 << 32

// Options parameterize an estimate.
type Options struct {
	Ctx       int           // context tokens (>= 1)
	CacheType gguf.GGMLType // KV cache element type: F32 (dspark's runtime; the zero value), F16 or BF16
	Rollback  Design        // "" = Stash
	Batch     int           // 0 = DefaultBatch
}

// Estimate is the memory of a target or a pair at Ctx tokens (the "memory" object of
// inspect's JSON).
type Estimate struct {
	Ctx       int    `json:"ctx"`
	CacheType string `json:"cache_type"`
	Batch     int    `json:"batch"`
	// Rollback is the design assumed for recurrent targets, RollbackRows the drafted rows
	// one verify round can reject (the draft's block; 0 without a draft).
	Rollback     Design   `json:"rollback"`
	RollbackRows int64    `json:"rollback_rows"`
	Parts        []Part   `json:"parts"`
	Total        uint64   `json:"total_bytes"`
	Notes        []string `json:"notes"`
}

// Part is one item of an estimate.
type Part struct {
	Model   string      `json:"model"` // "target" or "draft"
	Part    string      `json:"part"`  // weights, kv_cache, recurrent_state, rollback, tapped_hidden, scratch
	Bytes   uint64      `json:"bytes"`
	Formula string      `json:"formula"`
	ByType  []TypeBytes `json:"by_type,omitempty"`
}

// TypeBytes is the weight bytes of one ggml type.
type TypeBytes struct {
	Type    string `json:"type"`
	Tensors int    `json:"tensors"`
	Bytes   uint64 `json:"bytes"`
}

// cacheFamily is one architecture family's KV cache row, chosen for a declaration that
// declares all of its keys.
type cacheFamily struct {
	name string
	keys []string
	row  func(v *schema.Values) (elems int64, formula string, ok bool)
}

// cacheFamilies are tried in order: MLA declarations also declare head_count_kv.
var cacheFamilies = []cacheFamily{
	{name: "MLA latent", keys: []string{schema.KVLoraRank, schema.RopeDimensionCount}, row: func(v *schema.Values) (int64, string, bool) {
		r, ok1 := v.Eval(schema.KVLoraRank)
		d, ok2 := v.Eval(schema.RopeDimensionCount)
		return r + d, fmt.Sprintf("kv_lora_rank %d + rope dims %d", r, d), ok1 && ok2
	}},
	{name: "GQA", keys: []string{schema.HeadCountKV, schema.KeyLength, schema.ValueLength}, row: func(v *schema.Values) (int64, string, bool) {
		kv, ok1 := v.Eval(schema.HeadCountKV)
		k, ok2 := v.Eval(schema.KeyLength)
		vl, ok3 := v.Eval(schema.ValueLength)
		return kv * (k + vl), fmt.Sprintf("%d kv heads x (key %d + value %d)", kv, k, vl), ok1 && ok2 && ok3
	}},
}

// recFamily is one kind of recurrent block's state, chosen for a declaration that
// declares all of its keys: per block, the conv window and the state (values, one
// sequence), and the rollback stash per forward row.
type recFamily struct {
	name string
	keys []string
	read func(v *schema.Values) (conv, state, stash int64, formula, stashFormula string)
}

// recFamilies are tried in order.
var recFamilies = []recFamily{
	{name: "Gated DeltaNet", keys: []string{schema.SSMConvKernel, schema.SSMStateSize, schema.SSMInnerSize, schema.SSMTimeStepRank, schema.SSMGroupCount},
		read: func(v *schema.Values) (int64, int64, int64, string, string) {
			ck, _ := v.Eval(schema.SSMConvKernel)
			d, _ := v.Eval(schema.SSMStateSize)
			inner, _ := v.Eval(schema.SSMInnerSize)
			nv, _ := v.Eval(schema.SSMTimeStepRank)
			g, _ := v.Eval(schema.SSMGroupCount)
			ch, ok := v.Eval("conv_channels")
			if !ok {
				ch = 2*g*d + inner
			}
			return (ck - 1) * ch, d * inner, ch + g*d + nv + inner,
				fmt.Sprintf("conv (%d - 1) x %d channels + state %d x %d", ck, ch, d, inner),
				fmt.Sprintf("conv input %d + keys %d x %d + decays %d + deltas %d", ch, g, d, nv, inner)
		}},
	{name: "KDA", keys: []string{schema.SSMConvKernel, schema.KDAHeadDim, schema.HeadCount},
		read: func(v *schema.Values) (int64, int64, int64, string, string) {
			ck, _ := v.Eval(schema.SSMConvKernel)
			d, _ := v.Eval(schema.KDAHeadDim)
			h, _ := v.Eval(schema.HeadCount)
			D := h * d
			return (ck - 1) * 3 * D, D * d, 6 * D,
				fmt.Sprintf("conv (%d - 1) x 3 x %d channels (q, k, v) + state %d heads x %d x %d", ck, D, h, d, d),
				fmt.Sprintf("conv input 3 x %d + keys, per-channel decays and deltas 3 x %d", D, D)
		}},
}

func declares(s *schema.Schema, keys []string) bool {
	for _, k := range keys {
		if _, ok := s.Key(k); !ok {
			return false
		}
	}
	return true
}

// model is one file read for an estimate.
type model struct {
	f                   *gguf.File
	s                   *schema.Schema
	v                   *schema.Values
	attn, rec, other    int64 // blocks of the attention kind (or all, without kinds), recurrent, neither
	row                 int64 // KV cache values per token and attention block
	rowFormula, rowName string
	conv, state, stash  int64 // recurrent values per block: conv window, state, stash per row
	recFormula, recName string
	stashFormula        string
}

func read(f *gguf.File) (*model, error) {
	m := &model{f: f}
	src := schema.FileSource(f)
	m.s = schema.For(src)
	if m.s == nil {
		return m, nil
	}
	m.v, _ = m.s.Resolve(src)
	n, ok := m.v.Eval(m.s.Layers)
	if !ok || n < 0 {
		return nil, fmt.Errorf("%s: block count unknown (%s)", f.Path, m.s.Layers)
	}
	if m.v.TooManyLayers() {
		return nil, fmt.Errorf("%s: %d blocks, more than %d", f.Path, n, schema.MaxLayers)
	}
	if len(m.s.Kinds) == 0 {
		m.attn = n
	} else {
		for _, k := range m.v.Kinds() {
			switch k {
			case schema.KindAttention:
				m.attn++
			case schema.KindRecurrent:
				m.rec++
			default:
				m.other++
			}
		}
	}
	for _, c := range cacheFamilies {
		if declares(m.s, c.keys) {
			if r, fm, ok := c.row(m.v); ok && r > 0 {
				m.row, m.rowFormula, m.rowName = r, fm, c.name
			}
			break
		}
	}
	if m.rec > 0 {
		for _, r := range recFamilies {
			if declares(m.s, r.keys) {
				m.conv, m.state, m.stash, m.recFormula, m.stashFormula = r.read(m.v)
				m.recName = r.name
				break
			}
		}
	}
	return m, nil
}

// intOf evaluates an integer key (0 when undeclared or unknown).
func (m *model) intOf(name string) int64 {
	if m.v == nil {
		return 0
	}
	x, _ := m.v.Eval(name)
	return x
}

type builder struct {
	e   *Estimate
	err error
}

// mul multiplies non-negative factors, recording an overflow.
func (b *builder) mul(xs ...int64) uint64 {
	p := uint64(1)
	for _, x := range xs {
		if x < 0 {
			x = 0
		}
		hi, lo := bits.Mul64(p, uint64(x))
		if hi != 0 {
			b.err = fmt.Errorf("memory estimate overflows 64 bits")
			return 0
		}
		p = lo
	}
	return p
}

func (b *builder) add(p Part) {
	b.e.Parts = append(b.e.Parts, p)
	b.e.Total += p.Bytes
}

func (b *builder) weights(who string, m *model) {
	p := Part{Model: who, Part: "weights", Formula: "every tensor's bytes as stored (mapped, not copied)"}
	idx := map[string]int{}
	for i := range m.f.Tensors {
		t := &m.f.Tensors[i]
		name := t.Type.String()
		j, ok := idx[name]
		if !ok {
			j = len(p.ByType)
			idx[name] = j
			p.ByType = append(p.ByType, TypeBytes{Type: name})
		}
		p.ByType[j].Tensors++
		p.ByType[j].Bytes += t.Size
		p.Bytes += t.Size
	}
	slices.SortStableFunc(p.ByType, func(a, c TypeBytes) int {
		switch {
		case a.Bytes > c.Bytes:
			return -1
		case a.Bytes < c.Bytes:
			return 1
		}
		return 0
	})
	b.add(p)
}

func cacheElemBytes(t gguf.GGMLType) (int64, error) {
	switch t {
	case gguf.TypeF32:
		return 4, nil
	case gguf.TypeF16, gguf.TypeBF16:
		return 2, nil
	}
	return 0, fmt.Errorf("cache type %s: F32, F16 or BF16", t)
}

// kv adds a model's KV cache of rows positions.
func (b *builder) kv(who string, m *model, rows int64, rowsWhy string, elem int64) {
	if m.attn == 0 {
		return
	}
	if m.row == 0 {
		b.e.Notes = append(b.e.Notes, fmt.Sprintf("%s: %s declares no KV cache layout known here: its KV cache is not counted", who, m.f.Path))
		return
	}
	b.add(Part{Model: who, Part: "kv_cache", Bytes: b.mul(rows, m.attn, m.row, elem),
		Formula: fmt.Sprintf("%s: %s x %d attention blocks x %s = %d values x %d B", m.rowName, rowsWhy, m.attn, m.rowFormula, m.row, elem)})
}

// Target estimates a target alone at opt.Ctx tokens.
func Target(t *gguf.File, opt Options) (*Estimate, error) { return Pair(t, nil, opt) }

// Pair estimates target t with draft d (nil: the target alone) at opt.Ctx tokens.
func Pair(t, d *gguf.File, opt Options) (*Estimate, error) {
	if opt.Ctx < 1 || opt.Ctx > MaxCtx {
		return nil, fmt.Errorf("context %d: must be in [1, %d]", opt.Ctx, int64(MaxCtx))
	}
	elem, err := cacheElemBytes(opt.CacheType)
	if err != nil {
		return nil, err
	}
	if opt.Rollback == "" {
		opt.Rollback = Stash
	}
	if opt.Rollback != Stash && opt.Rollback != Snapshots {
		return nil, fmt.Errorf("rollback design %q: %s or %s", opt.Rollback, Stash, Snapshots)
	}
	if opt.Batch <= 0 {
		opt.Batch = DefaultBatch
	}
	b := &builder{e: &Estimate{Ctx: opt.Ctx, CacheType: opt.CacheType.String(), Batch: opt.Batch, Rollback: opt.Rollback,
		Parts: []Part{}, Notes: []string{}}}
	tm, err := read(t)
	if err != nil {
		return nil, err
	}
	var dm *model
	if d != nil {
		if dm, err = read(d); err != nil {
			return nil, err
		}
	}
	ctx := int64(opt.Ctx)
	batch := min(int64(opt.Batch), ctx)
	b.weights("target", tm)
	if tm.s == nil {
		b.e.Notes = append(b.e.Notes, fmt.Sprintf("target: gguf/schema declares no %q architecture: only its weights are counted", t.Architecture()))
	} else {
		if n := tm.intOf(schema.ContextLength); n > 0 && ctx > n {
			b.e.Notes = append(b.e.Notes, fmt.Sprintf("target: context %d exceeds its trained context_length %d", ctx, n))
		}
		b.kv("target", tm, ctx, fmt.Sprintf("%d positions", ctx), elem)
		if tm.other > 0 {
			b.e.Notes = append(b.e.Notes, fmt.Sprintf("target: %d blocks of neither kind (nextn: multi-token prediction) are not run by dspark: no cache counted for them", tm.other))
		}
	}
	// The drafted rows a verify round can reject: the draft's block (DSpark: every row
	// drafts a token; DFlash: row 0 is the anchor).
	var rows int64
	if dm != nil && dm.v != nil {
		g := dm.intOf(schema.BlockSize)
		rows = g
		if _, ok := dm.s.Key(schema.SampleFromAnchor); ok && !dm.v.Bool(schema.SampleFromAnchor) {
			rows = g - 1
		}
		b.e.RollbackRows = rows
	}
	if tm.rec > 0 {
		if tm.state == 0 {
			b.e.Notes = append(b.e.Notes, fmt.Sprintf("target: %d recurrent blocks whose declaration declares no recurrent state layout known here: their state is not counted", tm.rec))
		} else {
			per := tm.conv + tm.state
			b.add(Part{Model: "target", Part: "recurrent_state", Bytes: b.mul(tm.rec, per, 4),
				Formula: fmt.Sprintf("%d %s blocks x (%s) = %d values x 4 B (F32) per sequence", tm.rec, tm.recName, tm.recFormula, per)})
			switch {
			case opt.Rollback == Snapshots:
				if rows > 0 {
					b.add(Part{Model: "target", Part: "rollback", Bytes: b.mul(rows, tm.rec, per, 4),
						Formula: fmt.Sprintf("snapshots: the state after each of %d drafted rows: %d x the recurrent state", rows, rows)})
				}
			default:
				// dspark's runtime allocates it whether a draft runs or not: every forward
				// stashes its rows.
				sb := int64(opt.Batch)
				b.add(Part{Model: "target", Part: "rollback", Bytes: b.mul(tm.rec, Checkpoints+1, tm.state, 4) + b.mul(tm.rec, tm.conv, 4) + b.mul(sb, tm.rec, tm.stash, 4),
					Formula: fmt.Sprintf("stash: %d recurrent blocks x (%d states (the pre-forward one and %d checkpoints) + 1 conv window + %d forward rows x (%s) = %d values per row) x 4 B",
						tm.rec, Checkpoints+1, Checkpoints, sb, tm.stashFormula, tm.stash)})
			}
		}
	}
	te, tv, tf := tm.intOf(schema.EmbeddingLength), tm.intOf(schema.VocabSize), ffnWidth(tm)
	if tm.s != nil {
		b.add(Part{Model: "target", Part: "scratch", Bytes: b.mul(batch, tv+4*te+3*tf, 4),
			Formula: fmt.Sprintf("one forward of %d rows: logits %d + 4 x hidden %d + 3 x FFN %d, F32 (leading terms)", batch, tv, te, tf)})
	}
	if dm != nil {
		b.weights("draft", dm)
		if dm.s == nil {
			b.e.Notes = append(b.e.Notes, fmt.Sprintf("draft: gguf/schema declares no %q architecture: only its weights are counted", d.Architecture()))
		} else {
			g := dm.intOf(schema.BlockSize)
			b.kv("draft", dm, ctx+g, fmt.Sprintf("(%d context + %d block) positions", ctx, g), 4)
			taps, _ := dm.v.Eval("len(" + schema.TargetLayers + ")")
			th := te
			if th == 0 {
				th = dm.intOf(schema.TargetHiddenSize)
			}
			b.add(Part{Model: "draft", Part: "tapped_hidden", Bytes: b.mul(2, batch, taps, th, 4),
				Formula: fmt.Sprintf("the taps of one forward, published by the target and copied by the draft: 2 x %d rows x %d taps x target hidden %d x 4 B (the context itself lives in the draft's KV cache)", batch, taps, th)})
			de, dv, df := dm.intOf(schema.EmbeddingLength), dm.intOf(schema.VocabSize), ffnWidth(dm)
			b.add(Part{Model: "draft", Part: "scratch", Bytes: b.mul(g, dv+4*de+3*df, 4),
				Formula: fmt.Sprintf("one block of %d rows: logits %d + 4 x hidden %d + 3 x FFN %d, F32 (leading terms)", g, dv, de, df)})
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	return b.e, nil
}

// ffnWidth is a model's widest per-row feed-forward activation: the dense FFN, or the
// routed experts a row uses plus the shared expert.
func ffnWidth(m *model) int64 {
	f := m.intOf(schema.FeedForwardLength)
	if e := m.intOf(schema.ExpertFeedForwardLength) * m.intOf(schema.ExpertUsedCount); e > 0 {
		f = max(f, e+m.intOf(schema.ExpertSharedFeedForwardLength))
	}
	return f
}
