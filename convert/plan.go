package convert

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/quantize"
	"github.com/dspark-dev/dspark/safetensors"
)

// Options configure a conversion.
type Options struct {
	// OutType is the type of the weight matrices (Auto = the checkpoint's dtype).
	OutType OutType
	// Target is the draft's target checkpoint directory: it supplies the tokenizer and is
	// checked against the draft (hidden size, layer count, vocabulary, embedding table).
	Target string
	// KeepEmbeddings keeps a draft's embed_tokens as token_embd (dropped by default).
	KeepEmbeddings bool
	// SkipEmbeddingCheck skips reading both embedding tables when Target is set.
	SkipEmbeddingCheck bool
	// QuantizeHeads lists the draft heads a quantized OutType (Q8_0) applies to; the others
	// keep their checkpoint dtype (FP8 as BF16), as --quantize-heads says.
	QuantizeHeads Heads
}

// Plan is a validated conversion: every GGUF tensor with its source and type, and every
// metadata key with its exact type. It owns open checkpoints; Close releases them.
type Plan struct {
	Dir      string        // source checkpoint
	HFArch   string        // config.json architectures[0]
	Arch     string        // GGUF general.architecture
	Family   string        // tensor-name family seen in the checkpoint
	OutType  gguf.GGMLType // the weight matrices' type (Auto resolved)
	Name     string        // general.name
	Size     string        // llama.cpp size label
	Meta     []gguf.KV     // every key with its declared type, in the declaration's order
	Tensors  []PlanTensor
	Dropped  []string // source tensors deliberately not converted
	Notes    []string // warnings worth a user's attention
	Params   uint64   // elements written
	SrcBytes uint64   // source bytes read (once per source tensor)
	Embed    *EmbeddingDiff
	// RoundTrips holds, after a successful Write, the round-trip error of every tensor whose
	// stored values can differ from the source's (Q8_0, F16/BF16 from another dtype), in plan
	// order, measured on the bytes written.
	RoundTrips []RoundTrip

	closers    []checkpoint
	quantHeads Heads
	mix        *quantize.FileType // --outtype names a llama-quantize mix
}

// PlanTensor is one GGUF tensor of a plan.
type PlanTensor struct {
	Name     string
	Type     gguf.GGMLType
	Dims     []uint64
	Bytes    int64
	Sources  []string // original checkpoint names (several for stacked experts)
	SrcDtype safetensors.Dtype
	SrcShape []int64 // shape of one source
	Xform    Transform
	prod     *producer
}

// Elements returns the tensor's element count.
func (t *PlanTensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Close releases the plan's checkpoints.
func (p *Plan) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c.Close())
	}
	p.closers = nil
	return errors.Join(errs...)
}

// NewPlan reads dir's config.json and checkpoint, validates them against the architecture's
// tables (config, vocabulary, roster, target) and returns the plan. Nothing is written.
func NewPlan(dir string, opt Options) (*Plan, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	hf, _, err := cfg.Architecture()
	if err != nil {
		return nil, err
	}
	arch, err := LookupArch(hf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	if opt.Target != "" && !arch.Draft {
		return nil, fmt.Errorf("--target is for draft models; %s is a %s target", dir, hf)
	}
	ck, err := openCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	p := &Plan{Dir: dir, HFArch: hf, Arch: arch.GGUF(), closers: []checkpoint{ck}}
	if err := p.build(cfg, arch, ck, opt); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Plan) build(cfg *Config, arch *Arch, ck checkpoint, opt Options) error {
	ro, err := newRoster(ck.Tensors())
	if err != nil {
		return fmt.Errorf("%s: %w", p.Dir, err)
	}
	kv := newKeyValues(arch.Schema)
	spec, err := arch.read(cfg, ro, opt, kv)
	if err != nil {
		return err
	}
	p.Notes = append(p.Notes, spec.notes...)
	if spec.rename != nil {
		if ro, err = ro.renamed(spec.rename); err != nil {
			return fmt.Errorf("%s: %w", p.Dir, err)
		}
	}
	p.Family = familyName(arch, spec.layers.familyAlts)
	exp, err := expand(arch, spec.dims, spec.features, spec.layers)
	if err != nil {
		return err
	}

	// Tokenizer: the target's own, or the draft's target.
	tokDir := p.Dir
	if arch.Draft {
		tokDir = opt.Target
	}
	var tok *tokenizerInfo
	if tokDir != "" {
		load := arch.tokenizerLoader()
		if arch.Draft {
			if load, err = targetTokenizer(tokDir); err != nil {
				return err
			}
		}
		if tok, err = load(tokDir, spec.vocab); err != nil {
			return err
		}
	} else {
		p.Notes = append(p.Notes, "no --target: the draft is written without tokenizer.* arrays (only tokenizer.ggml.mask_token_id); pass --target DIR to embed the target's tokenizer")
	}
	if err := checkVocab(p.Dir, spec.vocab, ro, tok, tokDir); err != nil {
		return err
	}
	sp := spec.special
	var tsp specialIDs
	if arch.Draft && opt.Target != "" {
		if tsp, err = p.checkTargetConfig(opt, spec); err != nil {
			return err
		}
	}
	if spec.cross != nil {
		if err := spec.cross(ro); err != nil {
			return err
		}
	}
	main, err := checkRoster(p.Dir, ro, exp, spec.dropped, spec.fp8)
	if err != nil {
		return err
	}
	if arch.Draft && opt.Target != "" {
		if err := p.compareTargetEmbedding(opt, spec, ro); err != nil {
			return err
		}
		if differ(sp.bos, tsp.bos) || differ(sp.eos, tsp.eos) || differ(sp.pad, tsp.pad) {
			p.Notes = append(p.Notes, fmt.Sprintf("bos/eos/pad ids of the draft's config.json (%d/%d/%d) differ from the target's (%d/%d/%d); the target's are written, since its tokenizer is", sp.bos, sp.eos, sp.pad, tsp.bos, tsp.eos, tsp.pad))
		}
		sp = tsp
	}
	p.OutType = resolveAuto(opt.OutType, main)
	if m, ok := opt.OutType.Mix(); ok {
		p.mix = &m
	}
	p.quantHeads = opt.QuantizeHeads
	if err := p.addTensors(ck, ro, exp, spec); err != nil {
		return err
	}
	if arch.Draft && p.OutType.BlockSize() > 1 {
		p.Notes = append(p.Notes, quantizedDraftNote(p.OutType))
	}
	p.Name = modelName(cfg, p.Dir)
	p.Size = p.sizeLabel(spec.experts)
	setGeneral(kv, p)
	if tok != nil {
		tok.set(kv, sp)
	}
	if p.Meta, err = kv.kvs(); err != nil {
		return fmt.Errorf("%s: %w", p.Dir, err)
	}
	if p.mix != nil {
		if err := p.applyMix(); err != nil {
			return err
		}
	}
	return p.conform(arch.Schema)
}

// differ reports whether a draft's special id (-1: its config names none) differs from the
// target's.
func differ(draft, target int64) bool { return draft >= 0 && draft != target }

// setGeneral plans the general.* keys of p.
func setGeneral(kv *keyValues, p *Plan) {
	kv.set(schema.Architecture, p.Arch)
	kv.set(schema.GeneralType, "model")
	kv.set(schema.GeneralName, p.Name)
	kv.set(schema.SizeLabel, p.Size)
	if p.mix != nil {
		kv.set(schema.FileType, int64(p.mix.ID))
	} else {
		kv.set(schema.FileType, fileType(p.OutType))
	}
	kv.set(schema.QuantizationVersion, int64(2))
}

// conform checks the plan against the declaration it writes, as inspect --check would
// check the file: keys, rules and every tensor's presence and dims. A failure is refused
// before anything is written (a config value that slipped past the config checks, or a
// converter bug).
func (p *Plan) conform(s *schema.Schema) error {
	src := &schema.PlannedSource{KVs: p.Meta}
	for i := range p.Tensors {
		src.Tensors = append(src.Tensors, schema.PlannedTensor{Name: p.Tensors[i].Name, Dims: p.Tensors[i].Dims})
	}
	vals, probs := s.Resolve(src)
	probs = append(probs, vals.Violations()...)
	claimed := map[string]bool{}
	for _, in := range vals.Instances() {
		claimed[in.Name] = true
		dims, ok := src.TensorDims(in.Name)
		switch {
		case !ok && in.Required:
			probs = append(probs, schema.Problem{Subject: in.Name, Msg: "not planned, but the declaration requires it"})
		case ok && !slices.Equal(dims, toUint(in.Dims)):
			probs = append(probs, schema.Problem{Subject: in.Name, Msg: fmt.Sprintf("planned with dims %s, the declaration implies %v (%s)", dimsStr(dims), in.Dims, in.Decl.Why)})
		}
	}
	for _, t := range src.Tensors {
		if !claimed[t.Name] {
			probs = append(probs, schema.Problem{Subject: t.Name, Msg: "planned, but not a tensor of the declaration for these keys"})
		}
	}
	if len(probs) == 0 {
		return nil
	}
	lines := make([]string, len(probs))
	for i, pr := range probs {
		lines[i] = pr.String()
	}
	return fmt.Errorf("%s: the planned %s file would not conform to its declaration (%s):\n  - %s", p.Dir, p.Arch, s.Name, strings.Join(lines, "\n  - "))
}

// toUint converts known declared dims (unknown ones become a value no tensor has).
func toUint(d []int64) []uint64 {
	out := make([]uint64, len(d))
	for i, x := range d {
		out[i] = uint64(x)
	}
	return out
}

func familyName(a *Arch, fam int) string {
	if !a.Draft {
		return "HF"
	}
	if fam < len(a.families) {
		return a.families[fam]
	}
	if fam == 1 {
		return "DFlash (fc/hidden_norm/norm)"
	}
	return "DSpark (context_proj/context_norm/final_norm)"
}

// checkVocab compares vocab_size, the embedding's rows and the tokenizer's ids.
func checkVocab(dir string, vocab int64, ro *roster, tok *tokenizerInfo, tokDir string) error {
	var probs []string
	if e, ok := ro.byName["embed_tokens.weight"]; ok && len(e.Shape) == 2 && e.Shape[0] != vocab {
		probs = append(probs, fmt.Sprintf("%s has %d rows", e.Name, e.Shape[0]))
	}
	if tok != nil && int64(tok.maxID) >= vocab {
		probs = append(probs, fmt.Sprintf("the tokenizer in %s defines ids up to %d (%s)", tokDir, tok.maxID, tok.defines))
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: vocabulary mismatch: config.json vocab_size is %d but %s", dir, vocab, strings.Join(probs, " and "))
}

// addTensors turns the expanded rules into planned tensors with producers.
func (p *Plan) addTensors(ck checkpoint, ro *roster, exp []expected, spec *archSpec) error {
	readSrc := map[string]bool{}
	var fallback, kept []string
	defer func() {
		if len(fallback) > 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("%d tensor(s) written F16 instead of Q8_0 because their row length is not a multiple of 32: %s", len(fallback), strings.Join(fallback, ", ")))
		}
		if len(kept) > 0 {
			p.Notes = append(p.Notes, keptHeadsNote(p.OutType, kept))
		}
	}()
	for _, e := range exp {
		if e.dst == "" {
			for _, s := range e.srcs {
				p.Dropped = append(p.Dropped, ro.byName[s].Name+" (not written; --keep-embeddings keeps it)")
			}
			continue
		}
		t := PlanTensor{Name: e.dst, Dims: e.dims, Xform: e.rule.xform(), SrcShape: e.shape}
		var note string
		t.Type, note = tensorType(p.OutType, e.decl, e.dst, e.dims)
		if pe, ok := e.rule.xform().(preEncoded); ok {
			t.Type, note = pe.outType(), ""
		}
		prod := &producer{xform: e.rule.xform(), nope: e.dimEnv["nope"], v: e.dimEnv["v"], rkv: e.dimEnv["r_kv"], h: e.dimEnv["heads"]}
		for _, s := range e.srcs {
			st := ro.byName[s]
			sd, err := loadSrc(ck, ro, st, spec.fp8)
			if err != nil {
				return err
			}
			prod.srcs = append(prod.srcs, sd)
			t.Sources = append(t.Sources, st.Name)
			if !readSrc[st.Name] {
				readSrc[st.Name] = true
				p.SrcBytes += uint64(len(sd.data))
				if sd.scale != nil {
					p.SrcBytes += uint64(len(sd.scale.data))
				}
			}
		}
		t.SrcDtype = prod.srcs[0].t.Dtype
		if p.mix != nil {
			// Stored as the checkpoint's dtype for now; applyMix picks the mix's types.
			t.Type, note = tensorType(resolveAuto(Auto, t.SrcDtype), e.decl, e.dst, e.dims)
		} else if typ, ok := keptHeadType(p.OutType, t.Type, t.Name, t.SrcDtype, p.quantHeads); ok {
			t.Type, note = typ, ""
			kept = append(kept, fmt.Sprintf("%s (%s)", t.Name, typ))
		}
		if note != "" {
			fallback = append(fallback, e.dst)
		}
		prod.per = prod.srcs[0].t.Elements()
		prod.n = t.Elements()
		if pr, ok := prod.xform.(preparer); ok {
			pr.prepare(prod, e.dimEnv, e.shape)
		}
		t.prod = prod
		t.Bytes = typeBytes(t.Type, prod.n)
		p.Params += uint64(prod.n)
		p.Tensors = append(p.Tensors, t)
	}
	if spec.dropped != nil {
		var skipped []string
		for n, st := range ro.byName {
			switch {
			case !spec.dropped(n):
			case n == "lm_head.weight":
				skipped = append(skipped, st.Name+" (tie_word_embeddings: the output is token_embd)")
			case qwen35Vision(n) || strings.HasPrefix(n, "vision_tower.") || strings.HasPrefix(n, "mm_projector."):
				skipped = append(skipped, st.Name+" (vision tower: the language model only)")
			default:
				skipped = append(skipped, st.Name+" (MTP layer)")
			}
		}
		sort.Strings(skipped)
		p.Dropped = append(p.Dropped, skipped...)
	}
	scales := 0
	for n := range ro.byName {
		if strings.HasSuffix(n, "_scale_inv") && readSrc[ro.byName[strings.TrimSuffix(n, "_scale_inv")].Name] {
			scales++
		}
	}
	if scales > 0 {
		p.Dropped = append(p.Dropped, fmt.Sprintf("%d FP8 block-scale tensors (*.weight_scale_inv): applied while dequantizing their weights", scales))
	}
	return nil
}

// loadSrc fetches a source tensor's bytes (and FP8 scales) and checks their length.
func loadSrc(ck checkpoint, ro *roster, st SrcTensor, blk fp8Block) (*srcData, error) {
	data, err := ck.Data(st.Name)
	if err != nil {
		return nil, err
	}
	if want := st.Elements() * elemSize(st.Dtype); int64(len(data)) != want {
		return nil, fmt.Errorf("tensor %s: %d data bytes, %s %s needs %d", st.Name, len(data), st.Dtype, shapeStr(st.Shape), want)
	}
	sd := &srcData{t: st, data: data, blk: blk, mapped: ck.Mapped()}
	if st.Dtype == safetensors.F8_E4M3 {
		sc := ro.byName[normalizeName(st.Name)+"_scale_inv"]
		sdata, err := ck.Data(sc.Name)
		if err != nil {
			return nil, err
		}
		if want := sc.Elements() * elemSize(sc.Dtype); int64(len(sdata)) != want {
			return nil, fmt.Errorf("tensor %s: %d data bytes, %s %s needs %d", sc.Name, len(sdata), sc.Dtype, shapeStr(sc.Shape), want)
		}
		sd.scale = &srcData{t: sc, data: sdata, mapped: ck.Mapped()}
	}
	return sd, nil
}

// sizeLabel computes llama.cpp's size label from the planned tensors.
func (p *Plan) sizeLabel(experts int64) string {
	var shared, perExpert uint64
	for i := range p.Tensors {
		t := &p.Tensors[i]
		n := uint64(t.Elements())
		if t.Xform.perExpert() && experts > 0 {
			perExpert += n / uint64(experts)
		} else {
			shared += n
		}
	}
	return SizeLabel(p.Params, shared, perExpert, experts)
}

// DataBytes returns the sum of the tensors' encoded sizes (without alignment padding).
func (p *Plan) DataBytes() int64 {
	var n int64
	for i := range p.Tensors {
		n += p.Tensors[i].Bytes
	}
	return n
}

// DefaultOutName returns the llama.cpp-style default output file name.
func (p *Plan) DefaultOutName() string { return DefaultOutName(p.Name, p.Size, p.OutType) }
