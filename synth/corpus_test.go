package synth

import (
	"bytes"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCorpus(t *testing.T) {
	a := Corpus(100000)
	if !bytes.Equal(a, Corpus(100000)) {
		t.Fatal("corpus not deterministic")
	}
	if len(a) > 100000 || len(a) < 100000-3 || !utf8.Valid(a) {
		t.Fatalf("corpus of %d bytes, valid UTF-8 %v", len(a), utf8.Valid(a))
	}
	var han, latin, digit, punct int
	for _, r := range string(a) {
		switch {
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.IsLetter(r):
			latin++
		case unicode.IsDigit(r):
			digit++
		case unicode.IsPunct(r):
			punct++
		}
	}
	if han < 1000 || latin < 10000 || digit < 1000 || punct < 1000 {
		t.Fatalf("mix: %d Han, %d letters, %d digits, %d punctuation", han, latin, digit, punct)
	}
	for _, n := range []int{0, 1, 2, 5} {
		if c := Corpus(n); len(c) > n || !utf8.Valid(c) {
			t.Fatalf("Corpus(%d) = %q", n, c)
		}
	}
}

func TestTrainTokenizer(t *testing.T) {
	ranks, err := TrainTokenizer(992)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranks) != 992 {
		t.Fatalf("%d ranks", len(ranks))
	}
	seen := map[string]bool{}
	for i, r := range ranks {
		if seen[string(r)] {
			t.Fatalf("rank %d duplicates %q", i, r)
		}
		seen[string(r)] = true
		if i >= 256 && len(r) < 2 {
			t.Fatalf("learned rank %d = %q is a single byte", i, r)
		}
	}
}
