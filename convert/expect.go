package convert

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/safetensors"
)

// Expectation is what a checkpoint with a given config.json must hold and what converting
// it writes, derived from the config alone: no checkpoint is opened and nothing is read or
// written. It lets a full-size variant (hundreds of GB of weights) be checked from its
// config: its source roster against an independent one, its keys and tensors against the
// GGUF declaration.
type Expectation struct {
	HFArch, Arch string
	// Sources are the tensors the checkpoint must hold (names without the optional
	// "model." prefix, DSpark names for a draft; Dtype is empty: any supported one, U8 for
	// packed MXFP4 data).
	Sources []SrcTensor
	// Tensors are the GGUF tensors written (BF16 unless Options.OutType says otherwise;
	// 1-D tensors F32), without data.
	Tensors []PlanTensor
	// Meta are the keys written, except the tokenizer's.
	Meta []gguf.KV
	// Params counts the elements written.
	Params uint64
}

// Expect derives the expectation of config.json bytes (path names them in errors). The
// declaration conformance check of NewPlan runs on the result: an expectation is only
// returned for a config whose converted file would pass inspect --check.
func Expect(path string, config []byte, opt Options) (*Expectation, error) {
	cfg, err := ParseConfig(path, config)
	if err != nil {
		return nil, err
	}
	hf, _, err := cfg.Architecture()
	if err != nil {
		return nil, err
	}
	arch, err := LookupArch(hf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ro := &roster{byName: map[string]SrcTensor{}}
	kv := newKeyValues(arch.Schema)
	spec, err := arch.read(cfg, ro, opt, kv)
	if err != nil {
		return nil, err
	}
	exp, err := expand(arch, spec.dims, spec.features, spec.layers)
	if err != nil {
		return nil, err
	}
	ex := &Expectation{HFArch: hf, Arch: arch.GGUF()}
	p := &Plan{Dir: path, HFArch: hf, Arch: arch.GGUF(), OutType: resolveAuto(opt.OutType, safetensors.BF16)}
	seen := map[string]bool{}
	for _, e := range exp {
		for i, s := range e.srcs {
			if !seen[s] {
				seen[s] = true
				st := SrcTensor{Name: s, Shape: e.shape}
				if e.formats != nil {
					st.Shape, st.Dtype = e.formats[i].shape, e.formats[i].dtype
				}
				ex.Sources = append(ex.Sources, st)
			}
		}
		if e.dst == "" {
			continue
		}
		t := PlanTensor{Name: e.dst, Dims: e.dims, Xform: e.rule.xform(), SrcShape: e.shape, Sources: e.srcs}
		t.Type, _ = tensorType(p.OutType, e.decl, e.dst, e.dims)
		if pe, ok := e.rule.xform().(preEncoded); ok {
			t.Type = pe.outType()
		}
		t.Bytes = typeBytes(t.Type, t.Elements())
		p.Params += uint64(t.Elements())
		p.Tensors = append(p.Tensors, t)
	}
	p.Name = modelName(cfg, ".")
	p.Size = p.sizeLabel(spec.experts)
	setGeneral(kv, p)
	if p.Meta, err = kv.kvs(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := p.conform(arch.Schema); err != nil {
		return nil, err
	}
	ex.Tensors, ex.Meta, ex.Params = p.Tensors, p.Meta, p.Params
	return ex, nil
}
