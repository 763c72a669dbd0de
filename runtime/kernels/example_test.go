package kernels_test

import (
	"encoding/binary"
	"fmt"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

func ExampleMat_MatVec() {
	// A 2 x 3 BF16 matrix [[1 2 3] [4 5 6]], as stored in a GGUF (little-endian, row-major).
	bits := []uint16{0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0}
	data := make([]byte, 2*len(bits))
	for i, b := range bits {
		binary.LittleEndian.PutUint16(data[2*i:], b)
	}
	m, err := kernels.NewMat(kernels.BF16, 2, 3, data)
	if err != nil {
		panic(err)
	}
	p, err := m.Pack() // the fast layout; optional
	if err != nil {
		panic(err)
	}
	defer p.Release()

	dst := make([]float32, 2)
	p.MatVec(dst, []float32{1, 0.5, -1})
	fmt.Println(dst)

	batch := make([]float32, 2*2) // two input rows at once
	p.MatMul(batch, []float32{1, 0.5, -1, 0, 0, 2}, 2)
	fmt.Println(batch)
	// Output:
	// [-1 0.5]
	// [-1 0.5 6 12]
}
