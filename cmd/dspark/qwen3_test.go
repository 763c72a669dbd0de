package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/tokenizer"
)

// TestQwen3EndToEnd: a Qwen3 target goes synth -> convert --verify -> inspect --check -> run
// with the CLI alone: target-only decoding of a text prompt through the Qwen2 pre-tokenizer,
// and speculative decoding with a DSpark draft synthesized for it (greedy output identical to
// plain decoding). A file of the wrong role is refused naming what it is.
func TestQwen3EndToEnd(t *testing.T) {
	root := t.TempDir()
	hf, dhf := filepath.Join(root, "q"), filepath.Join(root, "d")
	tgt, drf := filepath.Join(root, "q.gguf"), filepath.Join(root, "d.gguf")
	for _, args := range [][]string{
		{"synth", "--kind", "target", "--arch", "qwen3", "--preset", "tiny", "--seed", "4", "--tied", "--out", hf, "--quiet"},
		{"synth", "--kind", "dspark", "--preset", "tiny", "--seed", "5", "--target", hf, "--out", dhf, "--quiet"},
		{"convert", hf, "-o", tgt, "--verify", "--quiet"},
		{"convert", dhf, "--target", hf, "-o", drf, "--quiet"},
		{"inspect", "--check", tgt},
		{"inspect", "--check", drf},
	} {
		if out, code := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	out, code := runCLI(t, "inspect", tgt, "--no-tensors")
	if code != exitOK || !strings.Contains(out, "qwen3.attention.head_count_kv") || !strings.Contains(out, `"qwen2"`) {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}

	const prompt = "The quick brown fox, 2026!"
	stdout, stderr, code := runRoot(t, "run", "--target", tgt, "--prompt", prompt, "-n", "12", "--json")
	if code != exitOK {
		t.Fatalf("target-only: exit %d\n%s%s", code, stdout, stderr)
	}
	var rep runReport
	decodeJSON(t, stdout, &rep)
	if rep.Mode != "target-only" || len(rep.Tokens) != 12 || rep.Text == nil {
		t.Fatalf("report %+v", rep)
	}
	// The prompt was encoded with the file's own tokenizer, the Qwen2 pre-tokenizer (single
	// digits: "2026" is four pieces), and decodes back to the text.
	f, err := gguf.Open(tgt)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := runtime.LoadTokenizer(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if tok.Pre() != tokenizer.PreQwen2 || !slices.Equal(rep.Prompt, tok.Encode(prompt)) || tok.Decode(rep.Prompt) != prompt {
		t.Fatalf("prompt %v, the qwen2 tokenizer gives %v (pre %q)", rep.Prompt, tok.Encode(prompt), tok.Pre())
	}
	for _, d := range []string{"2", "0", "6"} {
		if !slices.Contains(rep.Prompt, tok.Encode(d)[0]) {
			t.Errorf("digit %s is not a token of its own in %v", d, rep.Prompt)
		}
	}

	stdout, stderr, code = runRoot(t, "run", "--target", tgt, "--draft", drf, "--prompt", prompt, "-n", "16", "--json")
	if code != exitOK {
		t.Fatalf("speculative: exit %d\n%s%s", code, stdout, stderr)
	}
	decodeJSON(t, stdout, &rep)
	if rep.Mode != "speculative" || rep.MatchesPlain == nil || !*rep.MatchesPlain || !slices.Equal(rep.Tokens, rep.PlainTokens) || rep.Stats.Rounds == 0 {
		t.Fatalf("speculative report %+v", rep)
	}

	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"run", "--target", drf, "--tokens", "1"}, "is a draft, not a target", exitFailure},
		{[]string{"run", "--target", tgt, "--draft", tgt, "--tokens", "1"}, "is a target, not a draft", exitFailure},
		{[]string{"run", "--target", tgt, "--tokens", "1", "--ctx", "50000"}, "qwen3.context_length = 40960", exitUsage},
	} {
		out, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", c.args, code, c.code, c.want, out)
		}
	}
}
