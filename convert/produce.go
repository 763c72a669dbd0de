package convert

import (
	"encoding/binary"
	"math"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/mmap"
	"github.com/dspark-dev/dspark/internal/quantize"
	"github.com/dspark-dev/dspark/safetensors"
)

// srcData is one source tensor with its bytes (a zero-copy view of the checkpoint's mmap)
// and, for an FP8 weight, its block scales.
type srcData struct {
	t     SrcTensor
	data  []byte
	scale *srcData
	blk   fp8Block
	// mapped is true when data is a view of a read-only shared file mapping, whose pages
	// may be dropped from the resident set after use (never true for heap memory).
	mapped bool
}

// release drops the pages of the source (and its scales) from the resident set.
func (s *srcData) release() {
	if s.mapped {
		mmap.DropPages(s.data)
		if s.scale != nil {
			mmap.DropPages(s.scale.data)
		}
	}
}

// releaseRange drops the pages of elements [start, start+n) of a non-FP8 source.
func (s *srcData) releaseRange(start, n int64) {
	if s.mapped && s.t.Dtype != safetensors.F8_E4M3 {
		es := elemSize(s.t.Dtype)
		mmap.DropPages(s.data[start*es : (start+n)*es])
	}
}

// viewable reports whether the source's bytes are its elements (not FP8 to dequantize).
func (s *srcData) viewable() bool { return s.t.Dtype != safetensors.F8_E4M3 }

// elemDtype is the dtype of the elements readRange yields: the source dtype, or F32 for a
// dequantized FP8 weight.
func (s *srcData) elemDtype() safetensors.Dtype {
	if s.t.Dtype == safetensors.F8_E4M3 {
		return safetensors.F32
	}
	return s.t.Dtype
}

func elemSize(d safetensors.Dtype) int64 {
	if d == safetensors.U8 {
		return 1 // packed MXFP4 codes and E8M0 scales, repacked as bytes
	}
	return srcDtypes[d]
}

// readRange writes elements [start, start+n) (row-major) into dst in elemDtype.
func (s *srcData) readRange(dst []byte, start, n int64) {
	if s.t.Dtype != safetensors.F8_E4M3 {
		es := elemSize(s.t.Dtype)
		copy(dst[:n*es], s.data[start*es:(start+n)*es])
		return
	}
	s.dequantFP8(dst, start, n)
}

// dequantFP8 computes w * scale_inv for elements [start, start+n), the scale repeated over
// its block and cropped at the matrix edges, in float32 (as the reference loaders do).
func (s *srcData) dequantFP8(dst []byte, start, n int64) {
	cols := s.t.Shape[1]
	scols := ceilDiv(cols, s.blk[1])
	row, col := start/cols, start%cols
	for k := int64(0); k < n; k++ {
		w := dtype.F8E4M3ToF32(s.data[start+k])
		sc := s.scale.scaleAt((row/s.blk[0])*scols + col/s.blk[1])
		binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(w*sc))
		col++
		if col == cols {
			col = 0
			row++
		}
	}
}

// scaleAt reads element i of an F32 or BF16 scale tensor.
func (s *srcData) scaleAt(i int64) float32 {
	if s.t.Dtype == safetensors.BF16 {
		return dtype.BF16ToF32(binary.LittleEndian.Uint16(s.data[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(s.data[4*i:]))
}

// producer yields the elements of one GGUF tensor in GGUF (output) order.
type producer struct {
	xform           Transform
	srcs            []*srcData // one per expert for Stack, else one
	n               int64      // output elements
	per             int64      // elements per source (Stack)
	nope, v, rkv, h int64      // kv_b split geometry
	// The hybrid transforms (xform_hybrid.go): a row or column permutation over rows of
	// cols elements, a value op (its output is F32), the expert count of a fused tensor.
	perm    []int64
	cols    int64
	byCol   bool
	op      valueOp
	experts int64
	scratch []byte
}

// preparer is a transform that derives per-tensor geometry for its producer.
type preparer interface {
	prepare(p *producer, d dims, shape []int64)
}

// dtype is the element dtype read yields: a computed transform's own, F32 when a value op
// computes the elements, else the source's.
func (p *producer) dtype() safetensors.Dtype {
	if c, ok := p.xform.(computed); ok {
		return c.outDtype()
	}
	if p.op != opNone {
		return safetensors.F32
	}
	return p.srcs[0].elemDtype()
}

// view returns a zero-copy slice of the output elements [start, start+n) when they are
// contiguous source bytes (Copy, or Stack within one expert, of a non-FP8 source).
func (p *producer) view(start, n int64) ([]byte, bool) { return p.xform.view(p, start, n) }

// releaseChunk drops source pages of output elements [start, start+n) that no other chunk
// of this tensor reads (Copy and Stack); gathers (kv_b splits, FP8) are released per tensor.
func (p *producer) releaseChunk(start, n int64) { p.xform.releaseChunk(p, start, n) }

// releaseAll drops every source page of the tensor.
func (p *producer) releaseAll() {
	for _, s := range p.srcs {
		s.release()
	}
}

// read writes the output elements [start, start+n) into dst in p.dtype().
func (p *producer) read(dst []byte, start, n int64) { p.xform.read(p, dst, start, n) }

// encoder converts chunks of source elements into an output type, with reusable buffers.
type encoder struct {
	f32  []float32 // the source values of the last chunk encoded through float32
	back []float32 // the stored values decoded again (measure)
}

// sameEncoding reports whether source elements of dtype d are already encoded as t.
func sameEncoding(d safetensors.Dtype, t gguf.GGMLType) bool {
	g, ok := storedAs[d]
	return ok && g == t
}

// encode converts src (elements of dtype d) into dst (type t); len(dst) = typeBytes(t, n).
func (e *encoder) encode(dst []byte, t gguf.GGMLType, src []byte, d safetensors.Dtype) {
	if sameEncoding(d, t) {
		copy(dst, src)
		return
	}
	n := int64(len(src)) / elemSize(d)
	if int64(cap(e.f32)) < n {
		e.f32 = make([]float32, n)
	}
	e.f32 = e.f32[:n]
	f := e.f32
	switch d {
	case safetensors.BF16:
		dtype.DecodeBF16(f, src)
	case safetensors.F16:
		dtype.DecodeF16(f, src)
	case safetensors.F32:
		dtype.DecodeF32(f, src)
	default:
		panic("convert: encode from unsupported dtype " + string(d))
	}
	switch t {
	case gguf.TypeBF16:
		dtype.EncodeBF16(dst, f)
	case gguf.TypeF16:
		dtype.EncodeF16(dst, f)
	case gguf.TypeF32:
		dtype.EncodeF32(dst, f)
	case gguf.TypeQ8_0:
		dtype.QuantizeQ8_0(dst, f)
	default:
		q, ok := dtype.QuantOf(uint32(t))
		if !ok || !quantize.Supported(q) {
			panic("convert: encode to unsupported type " + t.String())
		}
		quantize.Blocks(q, dst, f) // whole blocks: chunks are multiples of 256 values of rows of whole blocks
	}
}
