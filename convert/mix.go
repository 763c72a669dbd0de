package convert

import (
	"fmt"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/quantize"
)

// applyMix gives every planned tensor the type llama-quantize's mix p.mix would give it
// (quantize.Plan over the tensors in llama-quantize's order, with the hyperparameters of
// the planned metadata), with dspark's draft defaults: a draft's fc, Markov and confidence
// heads stay at Q8_0 or better, and MXFP4_MOE gives MXFP4 to expert stacks only. Convert
// then writes each tensor in one pass, quantizing chunk by chunk.
func (p *Plan) applyMix() error {
	m, err := quantize.ModelFromKVs(p.Meta)
	if err != nil {
		return fmt.Errorf("%s: --outtype %s: %w", p.Dir, p.mix.Name, err)
	}
	ts := make([]quantize.Tensor, len(p.Tensors))
	for i, t := range p.Tensors {
		ts[i] = quantize.Tensor{Name: t.Name, Dims: t.Dims, Type: t.Type}
	}
	quantize.Order(ts)
	protect, err := quantize.DraftProtect(gguf.TypeQ8_0)
	if err != nil {
		return err
	}
	plan, err := quantize.Plan(m, *p.mix, ts, quantize.Options{Protect: protect, ExpertsOnlyMXFP4: true})
	if err != nil {
		return fmt.Errorf("%s: --outtype %s: %w", p.Dir, p.mix.Name, err)
	}
	to := make(map[string]quantize.Choice, len(plan))
	for _, c := range plan {
		to[c.Name] = c
	}
	var kept []string
	for i := range p.Tensors {
		t := &p.Tensors[i]
		c := to[t.Name]
		if c.To != t.Type && !quantize.WritableType(c.To) {
			return fmt.Errorf("%s: --outtype %s: tensor %s: type %v cannot be written", p.Dir, p.mix.Name, t.Name, c.To)
		}
		t.Type = c.To
		t.Bytes = typeBytes(t.Type, t.Elements())
		if strings.Contains(c.Reason, "dspark draft default") {
			kept = append(kept, fmt.Sprintf("%s (%s)", t.Name, t.Type))
		}
	}
	if len(kept) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("kept at Q8_0 or better by dspark's draft defaults (llama-quantize's %s would give them fewer bits): %s", p.mix.Name, strings.Join(kept, ", ")))
	}
	return nil
}
