package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestByteToUnicode(t *testing.T) {
	tab := ByteToUnicode()
	seen := map[rune]bool{}
	for b, r := range tab {
		if seen[r] {
			t.Fatalf("rune %U used twice", r)
		}
		seen[r] = true
		printable := b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE
		if printable && r != rune(b) {
			t.Errorf("byte 0x%02x maps to %U, want itself", b, r)
		}
		if !printable && r < 256 {
			t.Errorf("byte 0x%02x maps to %U, want a rune >= U+0100", b, r)
		}
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			t.Errorf("byte 0x%02x maps to non-printable %U", b, r)
		}
	}
	// Known fixed points of GPT-2's table.
	for b, want := range map[byte]rune{' ': 'Ġ', '\n': 'Ċ', '\t': 'ĉ', 0: 'Ā', 0x7F: 'ġ', 0xAD: 'Ń'} {
		if tab[b] != want {
			t.Errorf("byte 0x%02x -> %U, want %U", b, tab[b], want)
		}
	}
	// The non-printable bytes map to consecutive runes in byte order.
	next := rune(256)
	for b := range 256 {
		if tab[b] >= 256 {
			if tab[b] != next {
				t.Fatalf("byte 0x%02x -> %U, want %U", b, tab[b], next)
			}
			next++
		}
	}
	if next != 256+68 {
		t.Errorf("%d remapped bytes, want 68", next-256)
	}
}

// handRanks is a tiny vocabulary: the 256 bytes, then hand-chosen tokens.
func handRanks(extra ...string) [][]byte {
	r := make([][]byte, 256, 256+len(extra))
	for b := range 256 {
		r[b] = []byte{byte(b)}
	}
	for _, e := range extra {
		if e == "" {
			r = append(r, nil)
			continue
		}
		r = append(r, []byte(e))
	}
	return r
}

func TestGGUFVocabHandDerived(t *testing.T) {
	// 256 "bc", 257 "ab", 258 "abc": for "abc", bc (256) beats ab (257), giving "a bc".
	// 259 " a"; 260 "xyz" has no lower-rank pair (unmerged); 261 is a hole; 262 "\n\n".
	// 263 " abc": pairs " a" 259, "ab" 257, "bc" 256 -> join bc: " ", "a", "bc"; then
	// " a" 259 vs "abc" 258 -> join abc: " ", "abc", two parts: "Ġ abc".
	ranks := handRanks("bc", "ab", "abc", " a", "xyz", "", "\n\n", " abc")
	specials := map[int]string{261: "[BOS]", 265: "<|im_end|>"}
	v, err := GGUFVocab(ranks, specials, 267)
	if err != nil {
		t.Fatal(err)
	}
	wantMerges := []string{"b c", "a b", "a bc", "Ġ a", "Ċ Ċ", "Ġ abc"}
	if !slices.Equal(v.Merges, wantMerges) {
		t.Errorf("merges %q, want %q", v.Merges, wantMerges)
	}
	if !slices.Equal(v.Unmerged, []int{260}) {
		t.Errorf("unmerged %v, want [260]", v.Unmerged)
	}
	wantTok := map[int]string{0: "Ā", 32: "Ġ", 65: "A", 256: "bc", 259: "Ġa", 261: "[BOS]", 262: "ĊĊ", 263: "Ġabc", 264: "[PAD264]", 265: "<|im_end|>", 266: "[PAD266]"}
	wantType := map[int]int32{0: 1, 65: 1, 256: 1, 261: 3, 262: 1, 264: 5, 265: 3, 266: 5}
	for id, s := range wantTok {
		if v.Tokens[id] != s {
			t.Errorf("token %d = %q, want %q", id, v.Tokens[id], s)
		}
	}
	for id, ty := range wantType {
		if v.Types[id] != ty {
			t.Errorf("type %d = %d, want %d", id, v.Types[id], ty)
		}
	}
	if len(v.Tokens) != 267 || len(v.Types) != 267 || len(v.Specials) != 2 {
		t.Errorf("sizes %d %d %d", len(v.Tokens), len(v.Types), len(v.Specials))
	}
}

func TestGGUFVocabErrors(t *testing.T) {
	ranks := handRanks("ab")
	cases := []struct {
		name     string
		ranks    [][]byte
		specials map[int]string
		size     int
		want     string
	}{
		{"size below ranks", ranks, nil, 200, "smaller"},
		{"special collides", ranks, map[int]string{256: "[X]"}, 300, "collides"},
		{"special outside", ranks, map[int]string{300: "[X]"}, 300, "outside"},
		{"negative special", ranks, map[int]string{-1: "[X]"}, 300, "outside"},
		{"empty special", ranks, map[int]string{280: ""}, 300, "empty"},
		{"missing byte", append([][]byte{nil}, ranks[1:]...), nil, 300, "byte 0x00"},
	}
	for _, c := range cases {
		if _, err := GGUFVocab(c.ranks, c.specials, c.size); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ~%q", c.name, err, c.want)
		}
	}
}

// slowMerges is an independent rebuild of the merges with plain strings: for each token,
// repeatedly join the leftmost adjacent pair of lowest rank below the token's own.
func slowMerges(ranks [][]byte) []string {
	rank := map[string]int{}
	for r, tok := range ranks {
		if tok != nil {
			rank[string(tok)] = r
		}
	}
	tab := ByteToUnicode()
	mapped := func(s string) string {
		var sb strings.Builder
		for i := 0; i < len(s); i++ {
			sb.WriteRune(tab[s[i]])
		}
		return sb.String()
	}
	var out []string
	for r, tok := range ranks {
		if len(tok) < 2 {
			continue
		}
		var parts []string
		for _, c := range tok {
			parts = append(parts, string([]byte{c}))
		}
		for {
			best, bestRank := -1, r
			for i := 0; i+1 < len(parts); i++ {
				if x, ok := rank[parts[i]+parts[i+1]]; ok && x < bestRank {
					best, bestRank = i, x
				}
			}
			if best < 0 {
				break
			}
			parts = append(parts[:best], append([]string{parts[best] + parts[best+1]}, parts[best+2:]...)...)
		}
		if len(parts) == 2 {
			out = append(out, mapped(parts[0])+" "+mapped(parts[1]))
		}
	}
	return out
}

func TestGGUFVocabMergesMatchSlowBPE(t *testing.T) {
	for _, ranks := range [][][]byte{mustTrain(t, syntheticText(100_000, 9), 2500), synthRanks(8000, 4)} {
		v, err := GGUFVocab(ranks, nil, len(ranks))
		if err != nil {
			t.Fatal(err)
		}
		want := slowMerges(ranks)
		if !slices.Equal(v.Merges, want) {
			for i := range min(len(want), len(v.Merges)) {
				if v.Merges[i] != want[i] {
					t.Fatalf("merge %d = %q, slow BPE %q", i, v.Merges[i], want[i])
				}
			}
			t.Fatalf("%d merges, slow BPE %d", len(v.Merges), len(want))
		}
		if len(v.Merges)+len(v.Unmerged) != len(ranks)-256 {
			t.Errorf("%d merges + %d unmerged != %d multi-byte ranks", len(v.Merges), len(v.Unmerged), len(ranks)-256)
		}
	}
}

func mustTrain(t testing.TB, text string, n int) [][]byte {
	t.Helper()
	r, err := TrainBPE([]byte(text), n)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
