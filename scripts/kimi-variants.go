//go:build ignore

// kimi-variants: writes tiny kimi-k3 and kimi-linear GGUFs (F32) built by internal/testmodel
// with every optional feature switched on or off, for scripts/llamacpp-kimi.sh's parity check
// with llama.cpp. The tokenizer keys are copied from a converted file (llama.cpp needs a
// vocabulary), whose vocabulary size the variants take. A check helper (`go run
// scripts/kimi-variants.go`), never part of `make test` or CI.
//
// Usage: go run scripts/kimi-variants.go --tokenizer CONVERTED.gguf --out DIR
// Prints the written file names, one a line.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
)

func main() {
	tok := flag.String("tokenizer", "", "a converted GGUF whose tokenizer.* keys the variants take")
	out := flag.String("out", "", "output directory")
	flag.Parse()
	if *tok == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/kimi-variants.go --tokenizer CONVERTED.gguf --out DIR")
		os.Exit(2)
	}
	if err := run(*tok, *out); err != nil {
		fmt.Fprintln(os.Stderr, "kimi-variants:", err)
		os.Exit(1)
	}
}

func variants() map[string]testmodel.KimiSpec {
	v := map[string]testmodel.KimiSpec{}
	k3 := testmodel.DefaultKimiK3()
	add := func(name string, f func(s *testmodel.KimiSpec)) {
		s := k3
		f(&s)
		v[name] = s
	}
	add("k3-all", func(*testmodel.KimiSpec) {})
	add("k3-no-qlora", func(s *testmodel.KimiSpec) { s.QLora = 0 })
	add("k3-no-attn-res", func(s *testmodel.KimiSpec) { s.ResBlock = 0 })
	add("k3-no-latent", func(s *testmodel.KimiSpec) { s.Latent, s.RoutedNorm = 0, false })
	add("k3-latent-no-norm", func(s *testmodel.KimiSpec) { s.RoutedNorm = false })
	add("k3-no-shared", func(s *testmodel.KimiSpec) { s.Shared = 0 })
	add("k3-softplus-gate", func(s *testmodel.KimiSpec) { s.LowerBound = 0 })
	add("k3-no-mla-gate", func(s *testmodel.KimiSpec) { s.MLAGate = false })
	add("k3-no-norm-no-scale", func(s *testmodel.KimiSpec) { s.Norm, s.Scale = false, 1 })
	add("k3-situ-linear-off", func(s *testmodel.KimiSpec) { s.SituLin = 0 })
	v["linear"] = testmodel.DefaultKimiLinear()
	return v
}

func run(tokPath, dir string) error {
	tf, err := gguf.Open(tokPath)
	if err != nil {
		return err
	}
	defer tf.Close()
	var tokKVs []gguf.KV
	vocab := 0
	for _, kv := range tf.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			tokKVs = append(tokKVs, kv)
		}
	}
	if toks, err := tf.Strings("tokenizer.ggml.tokens"); err == nil {
		vocab = len(toks)
	}
	if vocab == 0 {
		return fmt.Errorf("%s: no tokenizer.ggml.tokens", tokPath)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, s := range variants() {
		s.Vocab = vocab
		m := testmodel.BuildKimi(s, 7)
		var specs []gguf.TensorSpec
		for _, n := range m.Names {
			w := m.T[n]
			data := make([]byte, 4*len(w.Vals))
			for i, x := range w.Vals {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
			}
			specs = append(specs, gguf.TensorSpec{Name: n, Type: gguf.TypeF32, Dims: w.Dims,
				Data: func(w io.Writer) error { _, err := w.Write(data); return err }})
		}
		path := filepath.Join(dir, name+".gguf")
		if err := gguf.WriteFile(path, append(m.KVs, tokKVs...), specs, gguf.WriteOptions{}); err != nil {
			return err
		}
		fmt.Println(path)
	}
	return nil
}
