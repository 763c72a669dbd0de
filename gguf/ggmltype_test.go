package gguf

import (
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// TestQuantTraitsAtTheirIds checks that each block quantization internal/dtype defines sits
// at its own ggml id in the type table, with dtype's geometry and name.
func TestQuantTraitsAtTheirIds(t *testing.T) {
	for _, q := range dtype.Quants() {
		g := GGMLType(q.GGMLType())
		if g.String() != q.String() || g.BlockSize() != uint64(q.BlockElems()) || g.TypeSize() != uint64(q.BlockBytes()) {
			t.Errorf("id %d: %s %d/%d, dtype says %s %d/%d", q.GGMLType(), g, g.BlockSize(), g.TypeSize(), q, q.BlockElems(), q.BlockBytes())
		}
	}
	if TypeQ4_K.BlockSize() != 256 || TypeQ4_K.TypeSize() != 144 || TypeMXFP4.TypeSize() != 17 {
		t.Errorf("Q4_K %d/%d, MXFP4 %d", TypeQ4_K.BlockSize(), TypeQ4_K.TypeSize(), TypeMXFP4.TypeSize())
	}
}
