// Command gendemo rebuilds the embedded demo pair from demo.DefaultRecipe and writes it,
// zstd-compressed, into internal/demo/assets (run from the module root: make demo-assets).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dspark-dev/dspark/internal/demo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gendemo:", err)
		os.Exit(1)
	}
}

func run() error {
	work, err := os.MkdirTemp("", "dspark-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	p, err := demo.Build(work, demo.DefaultRecipe)
	if err != nil {
		return err
	}
	for _, f := range []struct{ src, dst string }{
		{p.TargetPath, "internal/demo/assets/target.gguf.zst"},
		{p.DraftPath, "internal/demo/assets/draft.gguf.zst"},
	} {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return err
		}
		z, err := demo.Compress(b)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.FromSlash(f.dst), z, 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: %d bytes (%d compressed)\n", f.dst, len(b), len(z))
	}
	fmt.Printf("markov fit: rank %d, energy %.4f\n", p.Fit.Rank, p.Fit.Energy)
	return nil
}
