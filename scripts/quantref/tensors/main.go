// Command tensors writes the raw bytes of every tensor of a GGUF file of a block type dspark
// reads into DIR, one file per tensor named NAME.ID.bin (ID: the ggml type id), for
// dequant_ref to decode (scripts/quant-fixtures.sh).
//
// Usage: go run ./scripts/quantref/tensors FILE.gguf DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: tensors FILE.gguf DIR")
		os.Exit(2)
	}
	f, err := gguf.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "tensors:", err)
		os.Exit(1)
	}
	defer f.Close()
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if _, ok := dtype.QuantOf(uint32(t.Type)); !ok {
			continue
		}
		data, err := f.TensorData(t)
		if err == nil {
			err = os.WriteFile(filepath.Join(os.Args[2], fmt.Sprintf("%s.%d.bin", t.Name, uint32(t.Type))), data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "tensors:", err)
			os.Exit(1)
		}
	}
}
