package convert

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// Rope is the rotary-embedding configuration read from config.json. YaRN parameters live
// under rope_parameters (transformers 5) or rope_scaling (older releases); both are read,
// because losing the YaRN block silently drops the attention-softmax mscale.
type Rope struct {
	Theta        float64
	Scaling      string // "" (none) or "yarn"
	Factor       float64
	OrigCtx      int64
	BetaFast     float64
	BetaSlow     float64
	HasBeta      bool
	MscaleAllDim float64
	HasMscale    bool
	From         string // config block the scaling came from
}

// readRope reads rope_theta and the scaling block. Unknown scaling types are errors.
func readRope(r *cfgReader) Rope {
	var rp Rope
	theta, hasTop := r.OptFloat(0, "rope_theta")
	nested, hasNested := r.OptFloat(0, "rope_parameters.rope_theta")
	switch {
	case hasTop && hasNested && theta != nested:
		r.fail("rope_theta %v disagrees with rope_parameters.rope_theta %v", theta, nested)
	case hasTop:
		rp.Theta = theta
	case hasNested:
		rp.Theta = nested
	default:
		r.fail("missing number field rope_theta or rope_parameters.rope_theta")
	}
	if rp.Theta <= 0 && (hasTop || hasNested) {
		r.fail("rope_theta must be > 0, got %v", rp.Theta)
	}
	block := ""
	for _, b := range []string{"rope_parameters", "rope_scaling"} {
		if r.c.Has(b) {
			block = b
			break
		}
	}
	if block == "" {
		return rp
	}
	// A scaling block that is not an object, or one without a type, would silently lose
	// YaRN (and with it the softmax mscale): both are errors, never "no scaling".
	v, _ := r.c.lookup(block)
	obj, ok := v.(map[string]any)
	if !ok {
		r.fail("field %s: want an object {rope_type or type, factor, original_max_position_embeddings, ...}, got %s", block, describe(v))
		return rp
	}
	if !r.c.Has(block+".rope_type", block+".type") {
		var params []string
		for k := range obj {
			if k != "rope_theta" {
				params = append(params, k)
			}
		}
		if len(params) > 0 {
			sort.Strings(params)
			r.fail("field %s has %s but neither rope_type nor type: the scaling kind is unknown (a YaRN block without its type would be dropped)", block, strings.Join(params, ", "))
		}
		return rp
	}
	kind := r.OptStr("", block+".rope_type", block+".type")
	if t1, t2 := r.OptStr("", block+".rope_type"), r.OptStr("", block+".type"); t1 != "" && t2 != "" && t1 != t2 {
		r.fail("field %s.rope_type %q disagrees with %s.type %q", block, t1, block, t2)
	}
	switch kind {
	case "default", "none":
		return rp
	case "yarn":
	default:
		r.fail("%s: rope type %q is not supported (supported: yarn, default)", block, kind)
		return rp
	}
	rp.Scaling = "yarn"
	rp.From = block
	rp.Factor = r.Float(block + ".factor")
	if rp.Factor <= 0 && r.c.Has(block+".factor") {
		r.fail("%s.factor must be > 0, got %v", block, rp.Factor)
	}
	rp.OrigCtx = r.Positive(block + ".original_max_position_embeddings")
	bf, hasBF := r.OptFloat(0, block+".beta_fast")
	bs, hasBS := r.OptFloat(0, block+".beta_slow")
	if hasBF != hasBS {
		r.fail("%s: beta_fast and beta_slow must be given together", block)
	}
	rp.BetaFast, rp.BetaSlow, rp.HasBeta = bf, bs, hasBF && hasBS
	rp.MscaleAllDim, rp.HasMscale = r.OptFloat(0, block+".mscale_all_dim")
	return rp
}

// setRope sets the rope keys.
func setRope(kv *keyValues, rp Rope, dim int64) {
	kv.set(schema.RopeDimensionCount, dim)
	kv.set(schema.RopeFreqBase, rp.Theta)
	if rp.Scaling != "yarn" {
		return
	}
	kv.set(schema.RopeScalingType, "yarn")
	kv.set(schema.RopeScalingFactor, rp.Factor)
	kv.set(schema.RopeScalingOrigCtx, rp.OrigCtx)
	if rp.HasBeta {
		kv.set(schema.YarnBetaFast, rp.BetaFast)
		kv.set(schema.YarnBetaSlow, rp.BetaSlow)
	}
	if rp.HasMscale {
		kv.set(schema.YarnLogMultiplier, schema.YarnLogMultiplierOf(rp.MscaleAllDim))
	}
}

// String summarizes the configuration for messages.
func (rp Rope) String() string {
	if rp.Scaling == "" {
		return fmt.Sprintf("theta %v, no scaling", rp.Theta)
	}
	return fmt.Sprintf("theta %v, yarn factor %v from %s", rp.Theta, rp.Factor, rp.From)
}
