package tokenizer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

var trainedQwen2 struct {
	once sync.Once
	hf   *HFTokenizer
	v    *Vocab
	b    *BPE
	slow *slowEncoder
	err  error
}

// qwen2BPE returns a 2,000-token Qwen2-style vocabulary trained on synthetic text with the
// Qwen2 pre-tokenizer, taken through the whole tokenizer.json path (ranks -> HFTokenizer ->
// tokenizer.json -> parse -> GGUF arrays -> BPE), with Qwen's first added tokens after it.
func qwen2BPE(t testing.TB) (*BPE, *slowEncoder) {
	q := &trainedQwen2
	q.once.Do(func() {
		ranks, err := TrainBPEFor(PreQwen2, []byte(syntheticText(120_000, 2)+sampleText), 2000)
		if err != nil {
			q.err = err
			return
		}
		added := []HFAddedToken{{ID: 2000, Content: "<|endoftext|>", Special: true}, {ID: 2001, Content: "<|im_start|>", Special: true},
			{ID: 2002, Content: "<|im_end|>", Special: true}, {ID: 2003, Content: "<think>"}}
		hf, err := NewHFTokenizer(ranks, added)
		if err != nil {
			q.err = err
			return
		}
		js, err := MarshalTokenizerJSON(hf)
		if err != nil {
			q.err = err
			return
		}
		if q.hf, q.err = ParseTokenizerJSON("tokenizer.json", js); q.err != nil {
			return
		}
		if q.v, q.err = q.hf.GGUF(2048); q.err != nil {
			return
		}
		q.b, q.err = NewBPEFor(PreQwen2, q.v.Tokens, q.v.Merges, q.v.Types)
		q.slow = newSlowEncoder(q.v)
		q.slow.split = SplitQwen2
		for id, typ := range q.v.Types { // user-defined tokens are matched literally too
			if typ == TypeUserDefined {
				q.slow.spec = append(q.slow.spec, q.v.Tokens[id])
				q.slow.sid[q.v.Tokens[id]] = id
			}
		}
		slices.SortFunc(q.slow.spec, func(a, b string) int { return len(b) - len(a) })
	})
	if q.err != nil {
		t.Fatal(q.err)
	}
	return q.b, q.slow
}

func TestQwen2EncodeMatchesSlowEncoder(t *testing.T) {
	b, slow := qwen2BPE(t)
	if b.Pre() != PreQwen2 {
		t.Fatalf("Pre = %q", b.Pre())
	}
	texts := []string{sampleText, syntheticText(3000, 77), "<|im_start|>user\nHello<think>x</think><|im_end|>", strings.Repeat("the 1234 ", 50)}
	rng := rand.New(rand.NewPCG(8, 10))
	for range 400 {
		texts = append(texts, randomQwen2Input(rng, rng.IntN(40)))
	}
	for _, s := range texts {
		got, want := b.Encode(s), slow.encode(s)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, slow encoder %v", s, got, want)
		}
		if d := b.Decode(got); d != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, d)
		}
	}
	s := syntheticText(20_000, 123)
	if n := len(b.Encode(s)); n*2 > len(s) {
		t.Errorf("%d tokens for %d bytes: merges are not being applied", n, len(s))
	}
}

func TestPreTokenizerSelection(t *testing.T) {
	// The Kimi-trained arrays (which merge digits and contractions into words) under both
	// pre-tokenizers: Kimi's keeps "123" and "don't" whole as pre-tokens, Qwen2 cuts off
	// every digit and the "'t".
	kimi, _ := trainedBPE(t)
	v := trained.v
	q, err := NewBPEFor(PreQwen2, v.Tokens, v.Merges, v.Types)
	if err != nil {
		t.Fatal(err)
	}
	if kimi.Pre() != PreKimi || q.Pre() != PreQwen2 {
		t.Errorf("Pre = %q, %q", kimi.Pre(), q.Pre())
	}
	multiDigit := func(b *BPE, ids []int) bool {
		for _, id := range ids {
			n := 0
			for _, c := range b.TokenBytes(id) {
				if c >= '0' && c <= '9' {
					n++
				}
			}
			if n > 1 {
				return true
			}
		}
		return false
	}
	text := syntheticText(5000, 31) + " don't 2025"
	if !multiDigit(kimi, kimi.Encode(text)) {
		t.Fatal("the Kimi vocabulary merges no digits: the test proves nothing")
	}
	if ids := q.Encode(text); multiDigit(q, ids) {
		t.Error("the Qwen2 pre-tokenizer let a token span two digits")
	}
	for _, s := range []string{text, "don't", "I'll 123"} {
		// Each Qwen2 piece is encoded on its own.
		var want []int
		for _, p := range SplitQwen2(s) {
			want = append(want, q.Encode(p)...)
		}
		if got := q.Encode(s); !slices.Equal(got, want) {
			t.Errorf("%q: %v, piece by piece %v", s, got, want)
		}
		if q.Decode(q.Encode(s)) != s {
			t.Errorf("%q does not round-trip", s)
		}
	}
	for _, pre := range []string{"", "llama3", "default", "Qwen2", "chatglm-bpe"} {
		var ue *UnsupportedError
		if _, err := NewBPEFor(pre, v.Tokens, v.Merges, v.Types); !errors.As(err, &ue) || ue.Field != "tokenizer.ggml.pre" || !errors.Is(err, ErrUnsupported) {
			t.Errorf("pre %q: %v", pre, err)
		}
		if _, err := TrainBPEFor(pre, []byte("abc"), 300); err == nil {
			t.Errorf("TrainBPEFor(%q) accepted", pre)
		}
	}
}

func FuzzEncodeDecodeQwen2(f *testing.F) {
	for _, c := range qwen2Cases {
		f.Add(c.in)
	}
	f.Add("<|im_start|>Hello<|im_end|><|im_")
	f.Fuzz(func(t *testing.T, s string) {
		b, slow := qwen2BPE(t)
		ids := b.Encode(s)
		if d := b.Decode(ids); d != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, d, ids)
		}
		if len(s) <= 128 {
			if want := slow.encode(s); !slices.Equal(ids, want) {
				t.Fatalf("Encode(%q) = %v, slow encoder %v", s, ids, want)
			}
		}
	})
}
