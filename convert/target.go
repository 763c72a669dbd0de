package convert

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
)

// EmbeddingDiff compares a draft's embed_tokens with its target's embedding table.
type EmbeddingDiff struct {
	Elements  int64
	MaxAbs    float64 // largest |draft - target|
	Differing int64   // elements that differ beyond rounding
}

// Beyond reports whether any element differs by more than rounding to 8 mantissa bits
// (BF16) could explain.
func (d *EmbeddingDiff) Beyond() bool { return d.Differing > 0 }

// checkTargetConfig validates a draft against its target's config.json; it returns the
// target's bos/eos/pad ids.
func (p *Plan) checkTargetConfig(opt Options, spec *archSpec) (specialIDs, error) {
	tcfg, err := LoadConfig(opt.Target)
	if err != nil {
		return specialIDs{}, fmt.Errorf("--target: %w", err)
	}
	r := &cfgReader{c: textConfig(tcfg)} // a multimodal wrapper's language model
	hidden := r.Positive("hidden_size")
	layers := r.Positive("num_hidden_layers")
	vocab := r.Positive("vocab_size")
	sp := readSpecials(r)
	if err := r.err(); err != nil {
		return sp, fmt.Errorf("--target: %w", err)
	}
	ds := spec.draft
	var probs []string
	if hidden != ds.targetHidden {
		probs = append(probs, fmt.Sprintf("the draft's target_hidden_size is %d, the target's hidden_size is %d", ds.targetHidden, hidden))
	}
	if layers != ds.targetLayers {
		probs = append(probs, fmt.Sprintf("the draft's target_num_hidden_layers is %d, the target has %d layers", ds.targetLayers, layers))
	}
	if vocab != ds.vocab {
		probs = append(probs, fmt.Sprintf("the draft's vocab_size is %d, the target's is %d", ds.vocab, vocab))
	}
	for _, id := range ds.layerIDs {
		switch {
		case id >= layers:
			probs = append(probs, fmt.Sprintf("target_layer_ids entry %d is not a layer of the %d-layer target", id, layers))
		case ds.noLastTap && id == layers-1:
			probs = append(probs, fmt.Sprintf("target_layer_ids entry %d is the last layer of the %d-layer target: upstream taps the input of layer id + 1, and the last layer's output is no layer's input", id, layers))
		}
	}
	if len(probs) > 0 {
		return sp, fmt.Errorf("draft %s does not fit target %s:\n  - %s", p.Dir, opt.Target, strings.Join(probs, "\n  - "))
	}
	return sp, nil
}

// compareTargetEmbedding compares the draft's embed_tokens with the target's embedding and
// records the result (and a loud warning when they differ beyond rounding).
func (p *Plan) compareTargetEmbedding(opt Options, spec *archSpec, ro *roster) error {
	if opt.SkipEmbeddingCheck {
		return nil
	}
	if spec.draft.exactTables {
		return p.compareTargetTables(opt, spec, ro)
	}
	tcfg, err := LoadConfig(opt.Target)
	if err != nil {
		return fmt.Errorf("--target: %w", err)
	}
	tck, err := openCheckpoint(opt.Target)
	if err != nil {
		return fmt.Errorf("--target: %w", err)
	}
	p.closers = append(p.closers, tck)
	tro, err := newRoster(tck.Tensors())
	if err != nil {
		return fmt.Errorf("--target %s: %w", opt.Target, err)
	}
	de, ok1 := ro.byName["embed_tokens.weight"]
	te, ok2 := tro.byName["embed_tokens.weight"]
	if !ok1 || !ok2 {
		return nil // a missing draft embedding was reported by the roster check
	}
	if !equalShape(de.Shape, te.Shape) {
		return fmt.Errorf("draft %s embed_tokens is %s but the target's is %s", p.Dir, shapeStr(de.Shape), shapeStr(te.Shape))
	}
	dsrc, err := loadSrc(p.closers[0], ro, de, spec.fp8)
	if err != nil {
		return err
	}
	tsrc, err := loadSrc(tck, tro, te, targetFP8(tcfg))
	if err != nil {
		return err
	}
	diff := compareEmbeddings(dsrc, tsrc)
	dsrc.release()
	tsrc.release()
	p.Embed = diff
	switch {
	case diff.Beyond() && !opt.KeepEmbeddings:
		p.Notes = append(p.Notes, fmt.Sprintf("WARNING: the draft's embed_tokens differs from the target's embedding beyond rounding (max abs diff %g; %d of %d elements). Dropping embed_tokens CHANGES WHAT THE DRAFT SEES: the runtime would embed with the target's table. Convert with --keep-embeddings to keep the draft's own table.", diff.MaxAbs, diff.Differing, diff.Elements))
	case diff.Beyond():
		p.Notes = append(p.Notes, fmt.Sprintf("the draft's embed_tokens differs from the target's (max abs diff %g; %d of %d elements); kept as token_embd (--keep-embeddings)", diff.MaxAbs, diff.Differing, diff.Elements))
	default:
		p.Notes = append(p.Notes, fmt.Sprintf("the draft's embed_tokens matches the target's embedding (max abs diff %g)", diff.MaxAbs))
	}
	return nil
}

// targetFP8 reads a target's FP8 block size, zero when absent or malformed (the target is
// only read for its embedding here, which is never FP8 in practice).
func targetFP8(c *Config) fp8Block {
	r := &cfgReader{c: c}
	if r.OptStr("", "quantization_config.quant_method") != "fp8" {
		return fp8Block{}
	}
	bs := r.Ints("quantization_config.weight_block_size")
	if len(bs) != 2 || r.err() != nil {
		return fp8Block{}
	}
	return fp8Block{bs[0], bs[1]}
}

// compareEmbeddings streams both tables in chunks and measures their difference.
func compareEmbeddings(a, b *srcData) *EmbeddingDiff {
	const chunk = 1 << 18
	n := a.t.Elements()
	d := &EmbeddingDiff{Elements: n}
	ab := make([]byte, chunk*4)
	bb := make([]byte, chunk*4)
	af := make([]float32, chunk)
	bf := make([]float32, chunk)
	for start := int64(0); start < n; start += chunk {
		k := min(chunk, n-start)
		decodeInto(af[:k], ab, a, start, k)
		decodeInto(bf[:k], bb, b, start, k)
		for i := range k {
			x, y := float64(af[i]), float64(bf[i])
			diff := math.Abs(x - y)
			if math.IsNaN(diff) {
				if !(math.IsNaN(x) && math.IsNaN(y)) {
					d.Differing++
					d.MaxAbs = math.Inf(1)
				}
				continue
			}
			d.MaxAbs = max(d.MaxAbs, diff)
			if diff > math.Ldexp(max(math.Abs(x), math.Abs(y)), -8) {
				d.Differing++
			}
		}
	}
	return d
}

func decodeInto(dst []float32, buf []byte, s *srcData, start, n int64) {
	dt := s.elemDtype()
	raw := buf[:n*elemSize(dt)]
	s.readRange(raw, start, n)
	switch dt {
	case safetensors.BF16:
		dtype.DecodeBF16(dst, raw)
	case safetensors.F16:
		dtype.DecodeF16(dst, raw)
	default:
		dtype.DecodeF32(dst, raw)
	}
}

// compareTargetTables checks a GQA draft's embed_tokens and lm_head (DeepSpec ships frozen
// copies of its target's) against the target's embedding and output head (its embedding when
// tied): byte for byte when the dtypes agree, value for value otherwise. Equal tables are
// dropped (the runtime uses the target's); a table that differs is refused unless
// --keep-embeddings keeps the draft's own, since dropping it would change what the draft
// computes.
func (p *Plan) compareTargetTables(opt Options, spec *archSpec, ro *roster) error {
	_, hasE := ro.byName["embed_tokens.weight"]
	_, hasH := ro.byName["lm_head.weight"]
	if !hasE && !hasH {
		return nil
	}
	tcfg, err := LoadConfig(opt.Target)
	if err != nil {
		return fmt.Errorf("--target: %w", err)
	}
	tck, err := openCheckpoint(opt.Target)
	if err != nil {
		return fmt.Errorf("--target: %w", err)
	}
	p.closers = append(p.closers, tck)
	tro, err := newRoster(tck.Tensors())
	if err != nil {
		return fmt.Errorf("--target %s: %w", opt.Target, err)
	}
	targetHead := "lm_head.weight"
	if !tro.has(targetHead) {
		targetHead = "embed_tokens.weight" // tied: the target's head is its embedding
	}
	var diffs []string
	for _, c := range []struct{ draft, target string }{{"embed_tokens.weight", "embed_tokens.weight"}, {"lm_head.weight", targetHead}} {
		de, ok := ro.byName[c.draft]
		if !ok {
			continue
		}
		te, ok := tro.byName[c.target]
		if !ok {
			return fmt.Errorf("draft %s has %s but target %s has no %s to compare it with", p.Dir, de.Name, opt.Target, c.target)
		}
		if !equalShape(de.Shape, te.Shape) {
			return fmt.Errorf("draft %s: %s is %s but the target's %s is %s", p.Dir, located(de), shapeStr(de.Shape), located(te), shapeStr(te.Shape))
		}
		dsrc, err := loadSrc(p.closers[0], ro, de, spec.fp8)
		if err != nil {
			return err
		}
		tsrc, err := loadSrc(tck, tro, te, targetFP8(tcfg))
		if err != nil {
			return err
		}
		n, first := exactDiff(dsrc, tsrc)
		dsrc.release()
		tsrc.release()
		if n == 0 {
			how := "byte for byte"
			if de.Dtype != te.Dtype {
				how = fmt.Sprintf("value for value (%s vs %s)", de.Dtype, te.Dtype)
			}
			p.Notes = append(p.Notes, fmt.Sprintf("the draft's %s equals the target's %s %s", de.Name, te.Name, how))
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s differs from the target's %s in %d of %d elements (first at element %d)", located(de), located(te), n, de.Elements(), first))
	}
	switch {
	case len(diffs) == 0:
	case opt.KeepEmbeddings:
		p.Notes = append(p.Notes, "kept as the draft's own tables (--keep-embeddings): "+strings.Join(diffs, "; "))
	default:
		return fmt.Errorf("draft %s vs target %s: %s; dropping them would change what the draft computes (the runtime would use the target's tables): convert with --keep-embeddings to keep the draft's own", p.Dir, opt.Target, strings.Join(diffs, "; "))
	}
	return nil
}

// exactDiff counts the elements of a and b (same element count) that differ, and the first
// one: bytes when both have the same dtype, float32 values otherwise (NaN equals NaN).
func exactDiff(a, b *srcData) (n, first int64) {
	first = -1
	total := a.t.Elements()
	const chunk = 1 << 18
	if a.elemDtype() == b.elemDtype() {
		es := elemSize(a.elemDtype())
		ab, bb := make([]byte, chunk*es), make([]byte, chunk*es)
		for start := int64(0); start < total; start += chunk {
			k := min(chunk, total-start)
			a.readRange(ab[:k*es], start, k)
			b.readRange(bb[:k*es], start, k)
			if bytes.Equal(ab[:k*es], bb[:k*es]) {
				continue
			}
			for i := int64(0); i < k; i++ {
				if !bytes.Equal(ab[i*es:(i+1)*es], bb[i*es:(i+1)*es]) {
					if n == 0 {
						first = start + i
					}
					n++
				}
			}
		}
		return n, first
	}
	ab, bb := make([]byte, chunk*4), make([]byte, chunk*4)
	af, bf := make([]float32, chunk), make([]float32, chunk)
	for start := int64(0); start < total; start += chunk {
		k := min(chunk, total-start)
		decodeInto(af[:k], ab, a, start, k)
		decodeInto(bf[:k], bb, b, start, k)
		for i := range k {
			x, y := af[i], bf[i]
			if x == y && math.Signbit(float64(x)) == math.Signbit(float64(y)) || x != x && y != y {
				continue
			}
			if n == 0 {
				first = start + i
			}
			n++
		}
	}
	return n, first
}
