package demo

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

// The embedded demo pair, written by `go run ./internal/demo/gendemo` (make demo-assets)
// from DefaultRecipe; TestAssetsReproducible rebuilds it and compares the bytes.
var (
	//go:embed assets/target.gguf.zst
	targetZst []byte
	//go:embed assets/draft.gguf.zst
	draftZst []byte
)

// Extract decompresses the embedded pair into dir and returns the two paths.
func Extract(dir string) (target, draft string, err error) {
	target, draft = filepath.Join(dir, "demo-target.gguf"), filepath.Join(dir, "demo-draft.gguf")
	for _, f := range []struct {
		path string
		zst  []byte
	}{{target, targetZst}, {draft, draftZst}} {
		if err := unzstdFile(f.path, f.zst); err != nil {
			return "", "", err
		}
	}
	return target, draft, nil
}

func unzstdFile(path string, zst []byte) error {
	dec, err := zstd.NewReader(bytes.NewReader(zst), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, dec); err != nil {
		f.Close()
		return fmt.Errorf("embedded demo asset %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// Compress returns data zstd-compressed at the best level (deterministic for given bytes).
func Compress(data []byte) ([]byte, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	return enc.EncodeAll(data, nil), nil
}

// Decompress returns the bytes of one embedded asset ("target" or "draft").
func Decompress(which string) ([]byte, error) {
	src := targetZst
	if which == "draft" {
		src = draftZst
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return dec.DecodeAll(src, nil)
}
