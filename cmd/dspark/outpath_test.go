package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileBytes reads path or fails the test.
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOutputIsInput: convert, synth and calibrate refuse an output that is one of their
// inputs (the same file by identity: the path itself, a symlink or a hard link; a file of an
// input checkpoint directory), exit 2 with or without --force, and leave the input intact.
func TestOutputIsInput(t *testing.T) {
	root := t.TempDir()
	tgt, drf := filepath.Join(root, "tgt"), filepath.Join(root, "drf")
	if err := synthTiny(tgt, drf); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(tgt, "model.safetensors")
	if _, err := os.Stat(st); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link.safetensors")
	if err := os.Symlink(st, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(root, "hard.json")
	if err := os.Link(filepath.Join(tgt, "config.json"), hard); err != nil {
		t.Fatal(err)
	}
	before := fileBytes(t, st)
	cfg := fileBytes(t, filepath.Join(tgt, "config.json"))
	for _, args := range [][]string{
		{"convert", tgt, "-o", st, "--quiet"},
		{"convert", tgt, "-o", st, "--force", "--quiet"},
		{"convert", tgt, "-o", link, "--force", "--quiet"},
		{"convert", tgt, "-o", hard, "--force", "--quiet"},
		{"convert", tgt, "-o", filepath.Join(tgt, ".", "config.json"), "--force", "--dry-run"},
		{"convert", drf, "--target", tgt, "-o", st, "--force", "--quiet"},
		{"synth", "--kind", "dspark", "--preset", "tiny", "--target", tgt, "--out", tgt, "--force", "--quiet"},
		{"synth", "--kind", "dspark", "--preset", "tiny", "--target", tgt, "--out", tgt + "/", "--quiet"},
	} {
		out, code := runCLI(t, args...)
		if code != 2 || !strings.Contains(out, "would destroy the input") || !strings.Contains(out, "--force does not change this") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	if !bytes.Equal(fileBytes(t, st), before) || !bytes.Equal(fileBytes(t, filepath.Join(tgt, "config.json")), cfg) {
		t.Fatal("an input was changed")
	}

	// A re-run may replace its own earlier output inside the checkpoint directory.
	gg := filepath.Join(tgt, "out.gguf")
	for i := range 2 {
		if out, code := runCLI(t, "convert", tgt, "-o", gg, "--force", "--quiet"); code != 0 {
			t.Fatalf("convert #%d into the checkpoint directory: exit %d\n%s", i, code, out)
		}
	}

	// calibrate: an output that is the draft or the target, by name or through a symlink.
	target, draft := convertedPair(t)
	dlink := filepath.Join(root, "d-link.json")
	if err := os.Symlink(draft, dlink); err != nil {
		t.Fatal(err)
	}
	dsum := fileBytes(t, draft)
	for _, args := range [][]string{
		{"-o", draft},
		{"-o", dlink, "--force"},
		{"--write-gguf", target, "--force"},
		{"--plot", dlink + ".png", "-o", filepath.Join(root, "c.json"), "--write-gguf", dlink},
	} {
		full := append([]string{"calibrate", "--target", target, "--draft", draft, "-n", "4"}, args...)
		out, code := runCLI(t, full...)
		if code != 2 || !strings.Contains(out, "would destroy the input") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	if !bytes.Equal(fileBytes(t, draft), dsum) {
		t.Fatal("calibrate changed its draft")
	}
}
