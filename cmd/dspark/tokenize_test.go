package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// gpt2Vocab is llama.cpp's GPT-2 vocabulary test file; its vectors (ggml-vocab-gpt-2.gguf.out)
// give "Hello world" as 15496 995 and " Hello, world!" as 18435 11 995 0.
var gpt2Vocab = filepath.Join("..", "..", "tokenizer", "testdata", "llamacpp", "ggml-vocab-gpt-2.gguf.zst")

func TestTokenizeTable(t *testing.T) {
	out, err := execFresh(t, newTokenizeCmd(), gpt2Vocab, "Hello world")
	if err != nil {
		t.Fatal(err, out)
	}
	for _, want := range []string{"15496", `"Hello"`, "995", `" world"`, "2 tokens, 11 bytes", `"gpt-2"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestTokenizeJSONFromStdin(t *testing.T) {
	cmd := newTokenizeCmd()
	cmd.SetIn(strings.NewReader(" Hello, world!"))
	out, err := execFresh(t, cmd, "--json", gpt2Vocab, "-")
	if err != nil {
		t.Fatal(err, out)
	}
	var got struct {
		Pre    string
		IDs    []int
		Tokens []struct {
			ID    int
			Piece string
			Bytes string
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err, out)
	}
	want := []int{18435, 11, 995, 0}
	if got.Pre != "gpt-2" || len(got.IDs) != len(want) || len(got.Tokens) != len(want) {
		t.Fatalf("%+v", got)
	}
	var text strings.Builder
	for k, id := range want {
		if got.IDs[k] != id || got.Tokens[k].ID != id {
			t.Errorf("token %d: %+v, want id %d", k, got.Tokens[k], id)
		}
		text.WriteString(got.Tokens[k].Piece)
	}
	if text.String() != " Hello, world!" || got.Tokens[1].Bytes != "2c" {
		t.Errorf("pieces %q, bytes of ',' %q", text.String(), got.Tokens[1].Bytes)
	}
}

func TestTokenizeErrors(t *testing.T) {
	cases := []struct {
		args  []string
		code  int
		where string
	}{
		{[]string{gpt2Vocab}, exitUsage, "takes 2 argument(s)"},
		{[]string{"--jsn", gpt2Vocab, "x"}, exitUsage, "--jsn"},
		{[]string{"-", "x"}, exitUsage, "FILE cannot be standard input"},
		{[]string{filepath.Join(t.TempDir(), "none.gguf"), "x"}, exitFailure, "none.gguf"},
	}
	for _, c := range cases {
		out, err := execFresh(t, newTokenizeCmd(), c.args...)
		if err == nil || exitCode(err) != c.code || !strings.Contains(err.Error(), c.where) {
			t.Errorf("%q: err %v (exit %d), want exit %d naming %q; output %s", c.args, err, exitCode(err), c.code, c.where, out)
		}
	}
}
