package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Hand-derived splits of the new pre-tokenizers (each from its pattern, see the comments).
var preCases = []struct {
	pre  string
	in   string
	want []string
}{
	// qwen35: marks join letter runs; qwen2 would cut "\u0301s" off.
	{PreQwen35, "cafe\u0301s naïve", []string{"cafe\u0301s", " naïve"}},
	{PreQwen35, "\u0301x!", []string{"\u0301x", "!"}},
	{PreQwen2, "cafe\u0301s", []string{"cafe", "\u0301s"}},
	// llama-bpe: digits in threes.
	{PreLlama3, "12345 don't", []string{"123", "45", " don", "'t"}},
	// gpt-2: contractions case-sensitive, digits unbounded, a space joins the next run.
	{PreGPT2, "I'M 12345  x\n", []string{"I", "'", "M", " 12345", " ", " x", "\n"}},
	// starcoder: each digit isolated first, so the space before a digit is a piece.
	{PreStarcoder, "a 12", []string{"a", " ", "1", "2"}},
	// falcon: punctuation runs first, then GPT-2, then three ASCII digits.
	{PreFalcon, "x=1234;", []string{"x", "=", "123", "4", ";"}},
	// deepseek-coder: CR/LF alone, \s?\p{L}+, \s?\p{P}+, single digits.
	{PreDeepseekCoder, "a\n b,12", []string{"a", "\n", " b", ",", "1", "2"}},
	// deepseek-llm: Ä is in the letter class, but "pfel" is also in [!-/:-~], the third stage.
	{PreDeepseekLLM, "Äpfel  ", []string{"Ä", "pfel", "  "}},
}

func TestPreTokenizeHandDerived(t *testing.T) {
	for _, c := range preCases {
		got, err := PreTokenize(c.pre, c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("PreTokenize(%s, %q) = %q, %v; want %q", c.pre, c.in, got, err, c.want)
		}
	}
	var ue *UnsupportedError
	if _, err := PreTokenize("llama3", "x"); !errors.As(err, &ue) || !strings.Contains(err.Error(), `"qwen35"`) {
		t.Errorf("unknown pre: %v", err)
	}
}

// TestLlamaCppVectorsNeedTheirPreTokenizer is the negative control of TestLlamaCppVectors:
// each vocabulary encoded with another family's pre-tokenizer fails some vector, so the
// vectors do tell the pre-tokenizers apart.
func TestLlamaCppVectorsNeedTheirPreTokenizer(t *testing.T) {
	// The vectors do not tell deepseek-llm from deepseek-coder, nor qwen35 from qwen2 (no
	// input has a combining mark after a letter); TestPreTokenizeHandDerived does.
	wrong := map[string]string{PreLlama3: PreQwen2, PreDeepseekLLM: PreGPT2, PreDeepseekCoder: PreGPT2,
		PreGPT2: PreStarcoder, PreFalcon: PreGPT2, PreStarcoder: PreGPT2, PreRefact: PreGPT2, PreCommandR: PreGPT2,
		PreMPT: PreFalcon, PreQwen35: PreGPT2}
	for _, lv := range llamaVectors {
		if lv.name == "qwen2" {
			continue
		}
		v := readLlamaVocab(t, lv.vocab)
		b, err := NewBPEFor(wrong[lv.pre], v.tokens, v.merges, v.types)
		if err != nil {
			t.Fatal(err)
		}
		fails := 0
		for _, c := range readLlamaCases(t, lv.name) {
			if !slices.Equal(b.Encode(c.in), c.ids) {
				fails++
			}
		}
		if fails == 0 {
			t.Errorf("%s: every vector passes with %q too", lv.name, wrong[lv.pre])
		}
	}
}

// fuzzPre checks that a pre-tokenizer never panics, returns no empty piece and that its
// pieces concatenate back to the input.
func fuzzPre(f *testing.F, pre string) {
	for _, c := range preCases {
		f.Add(c.in)
	}
	f.Add("\xff\xfe 12\u0301 'S\r\n\u3000\u3000x")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := PreTokenize(pre, s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "") != s {
			t.Fatalf("pieces %q do not concatenate to %q", got, s)
		}
		for _, p := range got {
			if p == "" {
				t.Fatalf("empty piece in %q", got)
			}
		}
	})
}

func FuzzSplitQwen35(f *testing.F)        { fuzzPre(f, PreQwen35) }
func FuzzSplitLlama3(f *testing.F)        { fuzzPre(f, PreLlama3) }
func FuzzSplitGPT2(f *testing.F)          { fuzzPre(f, PreGPT2) }
func FuzzSplitStarcoder(f *testing.F)     { fuzzPre(f, PreStarcoder) }
func FuzzSplitFalcon(f *testing.F)        { fuzzPre(f, PreFalcon) }
func FuzzSplitDeepseekLLM(f *testing.F)   { fuzzPre(f, PreDeepseekLLM) }
func FuzzSplitDeepseekCoder(f *testing.F) { fuzzPre(f, PreDeepseekCoder) }
