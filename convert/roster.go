package convert

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/safetensors"
)

// SrcTensor describes one tensor of a checkpoint, by its original name.
type SrcTensor struct {
	Name  string
	Dtype safetensors.Dtype
	Shape []int64
	File  string // the file holding it (for messages; "" when unknown)
}

// Elements returns the element count (1 for a scalar).
func (t SrcTensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// roster is a checkpoint's tensor list keyed by normalized name (an optional "model."
// prefix removed).
type roster struct {
	byName map[string]SrcTensor // normalized name -> tensor (original name inside)
}

// normalizeName removes the optional "model." prefix of HF checkpoints and the
// "language_model." of a multimodal wrapper's text model, in either order (Qwen3.5's
// model.language_model.*, as llama.cpp's filter_tensors; Kimi-K3's language_model.model.*).
func normalizeName(name string) string {
	name = strings.TrimPrefix(strings.TrimPrefix(name, "model."), "language_model.")
	return strings.TrimPrefix(name, "model.")
}

// renamed returns the roster with every normalized name passed through rename (an
// architecture's own source names, such as Qwen3.5's mtp.* block as layer N).
func (r *roster) renamed(rename func(string) string) (*roster, error) {
	out := &roster{byName: make(map[string]SrcTensor, len(r.byName))}
	for n, t := range r.byName {
		m := rename(n)
		if prev, ok := out.byName[m]; ok {
			return nil, fmt.Errorf("tensor names %s and %s both map to %s", prev.Name, t.Name, m)
		}
		out.byName[m] = t
	}
	return out, nil
}

func newRoster(tensors []SrcTensor) (*roster, error) {
	r := &roster{byName: make(map[string]SrcTensor, len(tensors))}
	var dups []string
	for _, t := range tensors {
		n := normalizeName(t.Name)
		if prev, ok := r.byName[n]; ok {
			dups = append(dups, fmt.Sprintf("%s and %s", prev.Name, t.Name))
			continue
		}
		r.byName[n] = t
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		return nil, fmt.Errorf("tensor names collide once the optional \"model.\" prefix is removed: %s", strings.Join(dups, "; "))
	}
	return r, nil
}

func (r *roster) has(name string) bool { _, ok := r.byName[name]; return ok }

// srcFormat says what a transform reads from one of its sources beyond the roster's
// defaults: its own expected shape, and a required raw dtype (U8 for packed MXFP4).
type srcFormat struct {
	shape []int64
	dtype safetensors.Dtype // "" = a float dtype of srcDtypes
	// anyFloat: the source's float dtype may differ from the checkpoint's weights (KDA
	// convolutions are F32 beside BF16 matrices, and are written F32).
	anyFloat bool
}

// supported source element types.
var srcDtypes = map[safetensors.Dtype]int64{safetensors.BF16: 2, safetensors.F16: 2, safetensors.F32: 4, safetensors.F8_E4M3: 1}

// rosterProblems collects every difference between a checkpoint and its config.
type rosterProblems struct {
	missing, extra, shape, dtype []string
}

func (p *rosterProblems) count() int {
	return len(p.missing) + len(p.extra) + len(p.shape) + len(p.dtype)
}

func (p *rosterProblems) err(dir string) error {
	if p.count() == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %s does not match its config.json (%d problem(s)):", dir, p.count())
	section := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		sort.Strings(items)
		fmt.Fprintf(&b, "\n  %s (%d):", title, len(items))
		for _, s := range items {
			b.WriteString("\n    " + s)
		}
	}
	section("missing tensors", p.missing)
	section("unexpected tensors", p.extra)
	section("wrong shape", p.shape)
	section("wrong dtype", p.dtype)
	return fmt.Errorf("%s", b.String())
}

// fp8Block is the block size of FP8 weight scales ([rows, cols]), zero when the checkpoint
// is not FP8-quantized.
type fp8Block [2]int64

// checkRoster compares the expected tensors with the checkpoint: missing, unexpected, wrong
// shape and wrong dtype, all at once. dropped reports names that are known and deliberately
// not converted (MTP layers). It returns the checkpoint's weight dtype (the dtype shared by
// every matrix).
func checkRoster(dir string, r *roster, exp []expected, dropped func(string) bool, blk fp8Block) (safetensors.Dtype, error) {
	var p rosterProblems
	want := map[string][]int64{}
	raw := map[string]safetensors.Dtype{}
	free := map[string]bool{}
	var order []string
	for _, e := range exp {
		for i, s := range e.srcs {
			if _, seen := want[s]; !seen {
				order = append(order, s)
			}
			want[s] = e.shape
			if e.formats != nil {
				want[s] = e.formats[i].shape
				if e.formats[i].dtype != "" {
					raw[s] = e.formats[i].dtype
				}
				free[s] = e.formats[i].anyFloat
			}
		}
	}
	// The majority dtype among non-FP8 matrices is the checkpoint's dtype; FP8 matrices
	// (with their scales) may sit beside it, as in DeepSeek-V3's official weights.
	votes := map[safetensors.Dtype]int{}
	for _, n := range order {
		if t, ok := r.byName[n]; ok && len(t.Shape) >= 2 && raw[n] == "" && !free[n] {
			if _, known := srcDtypes[t.Dtype]; known {
				votes[t.Dtype]++
			}
		}
	}
	main := safetensors.Dtype("")
	for _, d := range []safetensors.Dtype{safetensors.BF16, safetensors.F16, safetensors.F32} { // deterministic tie-break
		if votes[d] > votes[main] {
			main = d
		}
	}
	if main == "" && votes[safetensors.F8_E4M3] > 0 {
		main = safetensors.F8_E4M3
	}
	scales := map[string]bool{}
	perLayer, missingLayer := map[int64]int{}, map[int64]int{}
	for _, n := range order {
		if l, ok := layerOf(n); ok {
			perLayer[l]++
			if !r.has(n) {
				missingLayer[l]++
			}
		}
	}
	for l, n := range missingLayer {
		if n == perLayer[l] {
			p.missing = append(p.missing, fmt.Sprintf("layers.%d.* (all %d tensors of layer %d: config.json declares more layers than the checkpoint holds)", l, n, l))
		}
	}
	for _, n := range order {
		t, ok := r.byName[n]
		if !ok {
			if l, isLayer := layerOf(n); isLayer && missingLayer[l] == perLayer[l] {
				continue // reported once for the whole layer
			}
			p.missing = append(p.missing, fmt.Sprintf("%s (shape %s)", n, shapeStr(want[n])))
			continue
		}
		if !equalShape(t.Shape, want[n]) {
			p.shape = append(p.shape, fmt.Sprintf("%s is %s, config.json implies %s", t.Name, shapeStr(t.Shape), shapeStr(want[n])))
		}
		if d := raw[n]; d != "" {
			if t.Dtype != d {
				p.dtype = append(p.dtype, fmt.Sprintf("%s is %s, packed MXFP4 data is %s", t.Name, t.Dtype, d))
			}
			continue
		}
		if _, known := srcDtypes[t.Dtype]; !known {
			p.dtype = append(p.dtype, fmt.Sprintf("%s is %s (supported: BF16, F16, F32, F8_E4M3 with weight_scale_inv)", t.Name, t.Dtype))
			continue
		}
		if len(t.Shape) >= 2 && t.Dtype != main && t.Dtype != safetensors.F8_E4M3 && !free[n] {
			p.dtype = append(p.dtype, fmt.Sprintf("%s is %s but the checkpoint's other weights are %s", t.Name, t.Dtype, main))
		}
		if len(t.Shape) < 2 && t.Dtype == safetensors.F8_E4M3 {
			p.dtype = append(p.dtype, fmt.Sprintf("%s is F8_E4M3; only matrices may be FP8-quantized", t.Name))
		}
		if t.Dtype == safetensors.F8_E4M3 && len(t.Shape) == 2 {
			sn := n + "_scale_inv"
			scales[sn] = true
			s, ok := r.byName[sn]
			switch {
			case blk[0] == 0:
				p.dtype = append(p.dtype, fmt.Sprintf("%s is F8_E4M3 but config.json has no quantization_config.weight_block_size", t.Name))
			case !ok:
				p.missing = append(p.missing, fmt.Sprintf("%s (the scales of FP8 weight %s)", sn, t.Name))
			default:
				ws := []int64{ceilDiv(t.Shape[0], blk[0]), ceilDiv(t.Shape[1], blk[1])}
				if !equalShape(s.Shape, ws) {
					p.shape = append(p.shape, fmt.Sprintf("%s is %s, the %dx%d blocks of %s need %s", s.Name, shapeStr(s.Shape), blk[0], blk[1], t.Name, shapeStr(ws)))
				}
				if s.Dtype != safetensors.F32 && s.Dtype != safetensors.BF16 {
					p.dtype = append(p.dtype, fmt.Sprintf("%s is %s (FP8 scales must be F32 or BF16)", s.Name, s.Dtype))
				}
			}
		}
	}
	for n, t := range r.byName {
		if _, ok := want[n]; ok || scales[n] || (dropped != nil && dropped(n)) {
			continue
		}
		p.extra = append(p.extra, fmt.Sprintf("%s (%s %s)", t.Name, t.Dtype, shapeStr(t.Shape)))
	}
	if err := p.err(dir); err != nil {
		return "", err
	}
	return main, nil
}

// layerOf returns L for a normalized name "layers.L. ...".
func layerOf(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "layers.")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	l, err := strconv.ParseInt(num, 10, 64)
	return l, err == nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func shapeStr(s []int64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func dimsStr(d []uint64) string {
	parts := make([]string, len(d))
	for i, v := range d {
		parts[i] = fmt.Sprint(v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
