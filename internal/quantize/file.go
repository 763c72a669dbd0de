package quantize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// Progress receives the progress of a file write (convert.Progress has the same methods).
type Progress interface {
	Start(totalBytes int64, tensors int)
	Tensor(index int, name string)
	Add(bytes int64)
	Done()
}

// FileOptions configure QuantizeFile.
type FileOptions struct {
	FileType FileType
	// LlamaCompat writes what llama-quantize writes, byte for byte: no draft defaults,
	// no dspark.quantize.* keys, dimensions trimmed of trailing 1s as ggml writes them.
	LlamaCompat     bool
	Overrides       []Override     // --tensor-type, first match wins
	OutputType      *gguf.GGMLType // --output-tensor-type
	LeaveOutput     bool           // --leave-output-tensor
	AllowRequantize bool           // quantize tensors that are already quantized (dequantized first)
	Overwrite       bool
	Progress        Progress
	// SlabValues bounds the values converted at once per tensor (memory: about 12 bytes
	// per value); 0 means 4M.
	SlabValues int
	// Workers quantize a slab's blocks in parallel; 0 means GOMAXPROCS.
	Workers int
}

// TensorReport is what one tensor became and what it cost.
type TensorReport struct {
	Choice
	Elements uint64
	InBytes  uint64
	OutBytes uint64
	// RelRMSE is the round-trip error sqrt(mean((dequant(q(x)) - x)^2)) / sqrt(mean(x^2))
	// of a converted tensor (0 for a copy and for an all-zero tensor, which every type stores
	// exactly).
	RelRMSE   float64
	Converted bool
}

// Report is the result of QuantizeFile.
type Report struct {
	In, Out  string
	FileType FileType
	Mode     string // "llama-compat" or "draft-aware"
	Tensors  []TensorReport
	InBytes  int64 // tensor data
	OutBytes int64
}

// KeyPrefix starts the keys dspark records its quantization choices under.
const KeyPrefix = "dspark.quantize."

// planFile builds the plan of in for opt.
func planFile(in *gguf.File, opt FileOptions) ([]Choice, error) {
	m, err := ModelOf(in)
	if err != nil {
		return nil, err
	}
	ts := make([]Tensor, len(in.Tensors))
	for i, t := range in.Tensors {
		ts[i] = Tensor{t.Name, t.Dims, t.Type}
	}
	Order(ts)
	po := Options{Overrides: opt.Overrides, OutputType: opt.OutputType, LeaveOutput: opt.LeaveOutput}
	if !opt.LlamaCompat {
		po.ExpertsOnlyMXFP4 = true
		if po.Protect, err = DraftProtect(gguf.TypeQ8_0); err != nil {
			return nil, err
		}
	}
	plan, err := Plan(m, opt.FileType, ts, po)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.Path, err)
	}
	for _, c := range plan {
		if c.To == c.From {
			continue
		}
		if !WritableType(c.To) {
			return nil, fmt.Errorf("%s: tensor %s: dspark cannot write type %v (%s)", in.Path, c.Name, c.To, c.Reason)
		}
		switch _, q := quantOf(c.From); {
		case c.From == gguf.TypeF32, c.From == gguf.TypeF16, c.From == gguf.TypeBF16:
		case q && opt.AllowRequantize:
		case q:
			return nil, fmt.Errorf("%s: tensor %s is already %v; quantizing it again to %v loses precision twice (--allow-requantize to do it anyway)", in.Path, c.Name, c.From, c.To)
		default:
			return nil, fmt.Errorf("%s: tensor %s has type %v, which cannot be converted to %v", in.Path, c.Name, c.From, c.To)
		}
	}
	return plan, nil
}

// PlanFile returns the choices QuantizeFile would make for in, without writing.
func PlanFile(in *gguf.File, opt FileOptions) ([]Choice, error) { return planFile(in, opt) }

// QuantizeFile writes in quantized to the mix opt.FileType at out, atomically, streaming
// each tensor in slabs of rows (memory stays bounded by SlabValues whatever the model's
// size). Tensors come in llama-quantize's order; metadata is in's in order, less
// general.quantization_version, general.file_type and the split.* keys, then those two
// set (2 and the mix's id); in draft-aware mode (not LlamaCompat) the dspark.quantize.*
// record follows. Nothing is dropped.
func QuantizeFile(in *gguf.File, out string, opt FileOptions) (*Report, error) {
	if in.BigEndian {
		return nil, fmt.Errorf("%s is a big-endian GGUF: dspark quantizes little-endian files only", in.Path)
	}
	plan, err := planFile(in, opt)
	if err != nil {
		return nil, err
	}
	rep := &Report{In: in.Path, Out: out, FileType: opt.FileType, Mode: "draft-aware"}
	if opt.LlamaCompat {
		rep.Mode = "llama-compat"
	}
	kvs := outputKVs(in, opt, plan)
	rep.Tensors = make([]TensorReport, len(plan))
	specs := make([]gguf.TensorSpec, len(plan))
	var total int64
	for i, c := range plan {
		ti, _ := in.Tensor(c.Name)
		dims := c.Dims
		if opt.LlamaCompat {
			dims = dims[:nDims(dims)]
		}
		size, err := gguf.TensorBytes(c.To, c.Dims)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", in.Path, c.Name, err)
		}
		tr := &rep.Tensors[i]
		*tr = TensorReport{Choice: c, Elements: ti.Elements(), InBytes: ti.Size, OutBytes: size, Converted: c.To != c.From}
		rep.InBytes += int64(ti.Size)
		rep.OutBytes += int64(size)
		total += int64(size)
		specs[i] = gguf.TensorSpec{Name: c.Name, Type: c.To, Dims: dims, Data: func(w io.Writer) error {
			if opt.Progress != nil {
				opt.Progress.Tensor(i, c.Name)
			}
			return writeTensor(w, in, ti, tr, opt)
		}}
	}
	if opt.Progress != nil {
		opt.Progress.Start(total, len(specs))
		defer opt.Progress.Done()
	}
	if err := gguf.WriteFile(out, kvs, specs, gguf.WriteOptions{Overwrite: opt.Overwrite, Alignment: in.Alignment}); err != nil {
		return nil, err
	}
	return rep, nil
}

// outputKVs is llama-quantize's metadata (gguf_set_kv, then the two keys set, which moves
// them to the end) plus, in draft-aware mode, dspark's record.
func outputKVs(in *gguf.File, opt FileOptions, plan []Choice) []gguf.KV {
	drop := map[string]bool{
		"general.quantization_version": true, "general.file_type": true,
		"split.no": true, "split.count": true, "split.tensors.count": true,
	}
	var kvs []gguf.KV
	for _, kv := range in.KVs {
		if !drop[kv.Key] && !(!opt.LlamaCompat && strings.HasPrefix(kv.Key, KeyPrefix)) {
			kvs = append(kvs, kv)
		}
	}
	kvs = append(kvs,
		gguf.KV{Key: "general.quantization_version", Value: gguf.U32(2)},
		gguf.KV{Key: "general.file_type", Value: gguf.U32(opt.FileType.ID)})
	if opt.LlamaCompat {
		return kvs
	}
	var changed, overrides []string
	for _, c := range plan {
		if strings.Contains(c.Reason, "dspark") || strings.HasPrefix(c.Reason, "--") {
			changed = append(changed, c.Name+"="+c.To.String())
		}
	}
	for _, o := range opt.Overrides {
		overrides = append(overrides, o.Pattern+"="+o.Type.String())
	}
	kvs = append(kvs,
		gguf.KV{Key: KeyPrefix + "file_type", Value: gguf.Str(opt.FileType.Name)},
		gguf.KV{Key: KeyPrefix + "draft_defaults", Value: gguf.Strs(draftDefaultStrings())},
		gguf.KV{Key: KeyPrefix + "tensor_type", Value: gguf.Strs(nonNil(overrides))},
		gguf.KV{Key: KeyPrefix + "changed", Value: gguf.Strs(nonNil(changed))})
	return kvs
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func draftDefaultStrings() []string {
	out := make([]string, len(draftPatterns))
	for i, p := range draftPatterns {
		out[i] = p + "=Q8_0"
	}
	return out
}

// writeTensor writes one tensor's output bytes: a copy, or a conversion in slabs of rows
// whose round-trip error it accumulates into tr.
func writeTensor(w io.Writer, in *gguf.File, ti *gguf.TensorInfo, tr *TensorReport, opt FileOptions) error {
	r, err := in.TensorReader(ti)
	if err != nil {
		return err
	}
	if !tr.Converted {
		return copyTensor(w, r, in, ti, opt)
	}
	ne0 := int(ti.Dims[0])
	rows := int(ti.Elements()) / ne0
	srcRow := int(ti.Size) / rows
	slab := opt.SlabValues
	if slab <= 0 {
		slab = 4 << 20
	}
	perSlab := max(1, slab/ne0)
	dstRow, _ := gguf.TensorBytes(tr.To, []uint64{uint64(ne0)})
	src := make([]byte, min(perSlab, rows)*srcRow)
	x := make([]float32, min(perSlab, rows)*ne0)
	y := make([]byte, min(perSlab, rows)*int(dstRow))
	back := make([]float32, len(x))
	var se, ss float64
	for r0 := 0; r0 < rows; r0 += perSlab {
		n := min(perSlab, rows-r0)
		if k, err := r.ReadAt(src[:n*srcRow], int64(r0*srcRow)); k != n*srcRow || err != nil && err != io.EOF {
			return fmt.Errorf("%s: tensor %s: %w", in.Path, ti.Name, err)
		}
		xs, ys := x[:n*ne0], y[:n*int(dstRow)]
		if err := toF32(xs, src[:n*srcRow], ti.Type); err != nil {
			return fmt.Errorf("%s: tensor %s: %w", in.Path, ti.Name, err)
		}
		if err := finite(in, ti, xs, r0*ne0); err != nil {
			return err
		}
		convert(tr.To, ys, xs, opt.Workers)
		bs := back[:len(xs)]
		if err := toF32(bs, ys, tr.To); err != nil {
			return err
		}
		for i, v := range xs {
			d := float64(bs[i]) - float64(v)
			se += float64(d * d) // no FMA: the same report on every architecture
			ss += float64(float64(v) * float64(v))
		}
		if _, err := w.Write(ys); err != nil {
			return err
		}
		if opt.Progress != nil {
			opt.Progress.Add(int64(len(ys)))
		}
	}
	if ss > 0 {
		tr.RelRMSE = math.Sqrt(se / ss)
	} else if se > 0 { // an all-zero tensor comes back as zeros from every type; never here
		tr.RelRMSE = math.Sqrt(se)
	} // an all-zero tensor: no error (0, not the NaN of 0/0, which JSON cannot carry)
	return nil
}

// finite refuses a NaN or an infinity among the values of a tensor (first the element
// index first of xs), as llama-quantize does: its loader validates every tensor it reads
// (ggml_validate_row_data: "tensor 'NAME' has invalid data").
func finite(in *gguf.File, ti *gguf.TensorInfo, xs []float32, first int) error {
	for i, v := range xs {
		if v != v || math.IsInf(float64(v), 0) {
			k := first + i
			elem := ti.Type.TypeSize()
			if ti.Type.BlockSize() != 1 {
				elem = 0 // a block type: no byte of its own
			}
			where := fmt.Sprintf("element %d", k)
			if elem > 0 {
				where += fmt.Sprintf(" (byte %d of the file)", ti.AbsOffset+int64(k)*int64(elem))
			}
			return fmt.Errorf("%s: tensor %s: %s is %v: a weight must be finite (llama-quantize refuses it too: \"has invalid data\")", in.Path, ti.Name, where, v)
		}
	}
	return nil
}

// copyTensor copies a tensor's bytes unchanged, in slabs; F32, F16 and BF16 data are
// checked for NaN and infinities on the way, as llama-quantize checks what it copies.
func copyTensor(w io.Writer, r *io.SectionReader, in *gguf.File, ti *gguf.TensorInfo, opt FileOptions) error {
	isFloat := ti.Type == gguf.TypeF32 || ti.Type == gguf.TypeF16 || ti.Type == gguf.TypeBF16
	const slab = 1 << 20 // a multiple of every element size
	buf := make([]byte, min(int64(slab), max(r.Size(), 1)))
	var vals []float32
	for off := int64(0); off < r.Size(); off += slab {
		n := min(int64(slab), r.Size()-off)
		b := buf[:n]
		if k, err := r.ReadAt(b, off); int64(k) != n || err != nil && err != io.EOF {
			return fmt.Errorf("%s: tensor %s: %w", in.Path, ti.Name, err)
		}
		if isFloat {
			es := int(ti.Type.TypeSize())
			if cap(vals) < len(b)/es {
				vals = make([]float32, len(b)/es)
			}
			vs := vals[:len(b)/es]
			if err := toF32(vs, b, ti.Type); err != nil {
				return err
			}
			if err := finite(in, ti, vs, int(off)/es); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if opt.Progress != nil {
			opt.Progress.Add(n)
		}
	}
	return nil
}

// toF32 widens src of type t into dst exactly (ggml's *_to_fp32 rows and dequantize_row_*).
func toF32(dst []float32, src []byte, t gguf.GGMLType) error {
	le := binary.LittleEndian
	switch t {
	case gguf.TypeF32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case gguf.TypeF16:
		for i := range dst {
			dst[i] = dtype.F16ToF32(le.Uint16(src[2*i:]))
		}
	case gguf.TypeBF16:
		for i := range dst {
			dst[i] = dtype.BF16ToF32(le.Uint16(src[2*i:]))
		}
	default:
		q, ok := quantOf(t)
		if !ok {
			return errors.New("cannot read type " + t.String())
		}
		dtype.Dequantize(q, dst, src)
	}
	return nil
}

// convert writes x as type t into y (ggml_quantize_chunk; F16 and BF16 rows rounded to
// nearest even as ggml_fp32_to_fp16_row and ggml_fp32_to_bf16_row_ref round them).
func convert(t gguf.GGMLType, y []byte, x []float32, workers int) {
	le := binary.LittleEndian
	switch t {
	case gguf.TypeF32:
		for i, v := range x {
			le.PutUint32(y[4*i:], math.Float32bits(v))
		}
		return
	case gguf.TypeF16:
		for i, v := range x {
			le.PutUint16(y[2*i:], fp16(v))
		}
		return
	case gguf.TypeBF16:
		for i, v := range x {
			le.PutUint16(y[2*i:], dtype.F32ToBF16(v))
		}
		return
	}
	q, _ := quantOf(t)
	nb := len(x) / q.BlockElems()
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, max(1, nb/64))
	if workers == 1 {
		Blocks(q, y, x)
		return
	}
	var wg sync.WaitGroup
	per := (nb + workers - 1) / workers
	for b0 := 0; b0 < nb; b0 += per {
		b1 := min(nb, b0+per)
		wg.Add(1)
		go func() {
			defer wg.Done()
			Blocks(q, y[b0*q.BlockBytes():b1*q.BlockBytes()], x[b0*q.BlockElems():b1*q.BlockElems()])
		}()
	}
	wg.Wait()
}
