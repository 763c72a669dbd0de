package model

import (
	"errors"
	"math"
	"testing"

	"github.com/dspark-dev/dspark/runtime"
)

// TestCheckContext: a finite context passes; the first non-finite value is located by row and
// index within the row, with the file, op and tensor named.
func TestCheckContext(t *testing.T) {
	ctx := make([]float32, 3*4) // 3 rows of 4
	if err := CheckContext("d.gguf", "context norm", "enc.output_norm.weight", ctx, 3); err != nil {
		t.Fatalf("finite context: %v", err)
	}
	ctx[9] = float32(math.Inf(-1)) // row 2, index 1
	ctx[10] = float32(math.NaN())
	err := CheckContext("d.gguf", "context projection", "fc.weight", ctx, 3)
	var nf *runtime.NonFiniteError
	if !errors.As(err, &nf) || nf.File != "d.gguf" || nf.Op != "context projection" || nf.Tensor != "fc.weight" ||
		nf.Row != 2 || nf.Index != 1 || !math.IsInf(float64(nf.Value), -1) || nf.Layer != -1 {
		t.Fatalf("got %#v (%v)", nf, err)
	}
}
