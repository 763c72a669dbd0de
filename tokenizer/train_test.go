package tokenizer

import (
	"bytes"
	"strings"
	"testing"
)

// slowTrain is an independent reference trainer: it recounts every pair from scratch at each
// step and picks the most frequent one with the same tie-break (smaller left, then right id).
func slowTrain(text string, nRanks int) [][]byte {
	tokens := make([][]byte, 256)
	for b := range 256 {
		tokens[b] = []byte{byte(b)}
	}
	var words [][]int
	for _, piece := range Split(text) {
		w := make([]int, len(piece))
		for i := range len(piece) {
			w[i] = int(piece[i])
		}
		words = append(words, w)
	}
	for len(tokens) < nRanks {
		counts := map[[2]int]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w); i++ {
				counts[[2]int{w[i], w[i+1]}]++
			}
		}
		best, bestN := [2]int{}, 0
		for p, n := range counts {
			if n > bestN || n == bestN && (p[0] < best[0] || p[0] == best[0] && p[1] < best[1]) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			return nil
		}
		cat := append(append([]byte{}, tokens[best[0]]...), tokens[best[1]]...)
		id := -1
		for i, tk := range tokens {
			if bytes.Equal(tk, cat) {
				id = i
			}
		}
		if id < 0 {
			id = len(tokens)
			tokens = append(tokens, cat)
		}
		for wi, w := range words {
			var out []int
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best[0] && w[i+1] == best[1] {
					out = append(out, id)
					i++
				} else {
					out = append(out, w[i])
				}
			}
			words[wi] = out
		}
	}
	return tokens
}

func TestTrainBPEMatchesSlowTrainer(t *testing.T) {
	for _, text := range []string{sampleText, syntheticText(6000, 3), "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabababababab abab aaaa aaa aa"} {
		n := 256 + 60
		if len(text) > 1000 {
			n = 256 + 300
		}
		want := slowTrain(text, n)
		got, err := TrainBPE([]byte(text), n)
		if want == nil {
			if err == nil {
				t.Errorf("slow trainer ran out of pairs, TrainBPE did not")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("rank %d = %q, slow trainer %q", i, got[i], want[i])
			}
		}
	}
}

func TestTrainBPEProperties(t *testing.T) {
	text := []byte(syntheticText(100_000, 1))
	a, err := TrainBPE(text, 3000)
	if err != nil {
		t.Fatal(err)
	}
	b, err := TrainBPE(text, 3000)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 3000 {
		t.Fatalf("len %d", len(a))
	}
	seen := map[string]int{}
	for r, tok := range a {
		if !bytes.Equal(tok, b[r]) {
			t.Fatalf("not deterministic at rank %d: %q vs %q", r, tok, b[r])
		}
		if prev, dup := seen[string(tok)]; dup {
			t.Fatalf("ranks %d and %d share bytes %q", prev, r, tok)
		}
		seen[string(tok)] = r
		if r < 256 {
			if len(tok) != 1 || tok[0] != byte(r) {
				t.Fatalf("rank %d = %q, want the single byte", r, tok)
			}
			continue
		}
		ok := false
		for k := 1; k < len(tok) && !ok; k++ {
			l, lok := seen[string(tok[:k])]
			rr, rok := seen[string(tok[k:])]
			ok = lok && rok && l < r && rr < r
		}
		if !ok {
			t.Fatalf("rank %d %q is not the concatenation of two earlier ranks", r, tok)
		}
	}
	// Merges stay inside pre-tokens: every learned token occurs inside one pre-token.
	uniq := map[string]bool{}
	var joined strings.Builder
	for _, p := range Split(string(text)) {
		if !uniq[p] {
			uniq[p] = true
			joined.WriteString(p)
			joined.WriteByte(0) // text has no NUL, so no token can span two pieces
		}
	}
	for r := 256; r < len(a); r++ {
		if !strings.Contains(joined.String(), string(a[r])) {
			t.Fatalf("rank %d %q spans a pre-token boundary", r, a[r])
		}
	}
}

func TestTrainBPEErrors(t *testing.T) {
	if _, err := TrainBPE([]byte("abc"), 255); err == nil {
		t.Error("nRanks 255 accepted")
	}
	if _, err := TrainBPE([]byte("ab ab"), 400); err == nil || !strings.Contains(err.Error(), "more text") {
		t.Errorf("running out of pairs: err = %v", err)
	}
	r, err := TrainBPE(nil, 256)
	if err != nil || len(r) != 256 {
		t.Errorf("256 ranks from no text: %d, %v", len(r), err)
	}
}
