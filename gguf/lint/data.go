package lint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// NonFinite is a tensor whose stored values include NaN or ±Inf (for Q8_0, its block scales).
type NonFinite struct {
	Tensor string
	// Offset is the absolute byte offset, in the tensor's shard, of the first non-finite
	// value (for Q8_0: of the scale of the first such block); Element is that value's
	// (or block's first value's) index in the tensor.
	Offset  int64
	Element int64
	Value   float32 // the first non-finite value, as float32
	Count   int64   // non-finite values (Q8_0: block scales)
	Q8      bool    // the tensor is Q8_0: Count counts block scales
}

// Message describes the finding in one line.
func (n NonFinite) Message() string {
	what := "values"
	if n.Q8 {
		what = "Q8_0 block scales"
	}
	return fmt.Sprintf("%d non-finite %s, the first (%v) at element %d, byte offset %d", n.Count, what, n.Value, n.Element, n.Offset)
}

// scanChunk is how much of a tensor ScanData reads at a time.
const scanChunk = 1 << 20

// ScanData reads the data of every F32, F16, BF16 and Q8_0 tensor of f (every byte of them:
// the cost of reading the file once) and returns those that hold NaN or ±Inf, in file order.
// Other types (integer, other quantizations) are skipped. It is `inspect --check --data`;
// lint itself reads headers only.
func ScanData(f *gguf.File) ([]NonFinite, error) {
	var out []NonFinite
	for i := range f.Tensors {
		t := &f.Tensors[i]
		var elem, unit int // bytes per element, elements per unit
		switch t.Type {
		case gguf.TypeF32:
			elem, unit = 4, 1
		case gguf.TypeF16, gguf.TypeBF16:
			elem, unit = 2, 1
		case gguf.TypeQ8_0:
			elem, unit = dtype.Q8_0BlockBytes, dtype.Q8_0BlockElems
		default:
			continue
		}
		r, err := f.TensorReader(t)
		if err != nil {
			return out, err
		}
		var order binary.ByteOrder = binary.LittleEndian
		if f.BigEndian {
			order = binary.BigEndian
		}
		nf := NonFinite{Tensor: t.Name, Q8: t.Type == gguf.TypeQ8_0}
		buf := make([]byte, scanChunk/elem*elem)
		var pos int64
		for pos < r.Size() {
			n := int(min(int64(len(buf)), r.Size()-pos))
			n -= n % elem
			if n == 0 {
				break
			}
			if _, err := io.ReadFull(io.NewSectionReader(r, pos, int64(n)), buf[:n]); err != nil {
				return out, fmt.Errorf("gguf: %s: tensor %q: byte offset %d: %w", f.Path, t.Name, t.AbsOffset+pos, err)
			}
			for j := 0; j < n; j += elem {
				var v float32
				switch t.Type {
				case gguf.TypeF32:
					v = math.Float32frombits(order.Uint32(buf[j:]))
				case gguf.TypeF16, gguf.TypeQ8_0:
					v = dtype.F16ToF32(order.Uint16(buf[j:]))
				case gguf.TypeBF16:
					v = dtype.BF16ToF32(order.Uint16(buf[j:]))
				}
				if v-v == 0 {
					continue
				}
				if nf.Count == 0 {
					nf.Offset, nf.Element, nf.Value = t.AbsOffset+pos+int64(j), (pos+int64(j))/int64(elem)*int64(unit), v
				}
				nf.Count++
			}
			pos += int64(n)
		}
		if nf.Count > 0 {
			out = append(out, nf)
		}
	}
	return out, nil
}
