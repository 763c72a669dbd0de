package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// BPE encodes and decodes text with a GGUF "gpt2" vocabulary (the tokenizer.ggml.tokens,
// merges and token_type arrays): a pre-tokenizer (chosen by tokenizer.ggml.pre), then
// byte-level BPE by merge rank inside each pre-token, as llama.cpp does. A BPE is immutable
// and safe for concurrent use.
type BPE struct {
	pre      string
	split    preTokenizer
	wholeID  map[string]int32 // with split.ignoreMerges: the normal tokens by their bytes
	tokens   []string
	types    []int32
	bytesOf  [][]byte           // per id: the bytes the token stands for
	byteID   [256]int32         // id of each single-byte token
	merges   map[uint64]mergeTo // (left id, right id) -> merge rank and result id
	bytePair []mergeTo          // [c1<<8|c2]: the merge of two single-byte tokens (rank -1: none)
	specials []special          // control and user-defined tokens, longest first
	first    [256]bool          // first bytes of the specials
}

type mergeTo struct{ rank, id int32 }

// noToken is the id of a byte the vocabulary has no token for; Encode drops such bytes.
const noToken = -2

type special struct {
	text string
	id   int
}

// NewBPE builds a BPE with Kimi's pre-tokenizer; it is NewBPEFor(PreKimi, ...).
func NewBPE(tokens []string, merges []string, types []int32) (*BPE, error) {
	return NewBPEFor(PreKimi, tokens, merges, types)
}

// NewBPEFor builds a BPE from GGUF arrays with the pre-tokenizer named pre (the value of
// tokenizer.ggml.pre: one of PreTokenizers(); any other name is an *UnsupportedError).
// types may be empty (all normal). Normal tokens must be non-empty and unique; those that
// are GPT-2 byte-to-unicode text are what BPE builds from, and the others (Command R's raw
// emoji) are accepted as llama.cpp accepts them, never produced, and decode to their text.
// A single byte without a token is dropped by Encode, as in llama.cpp. Every merge must be
// "left right" with left, right and their concatenation byte-level normal tokens, no pair
// listed twice. Control and user-defined tokens are matched literally in text by Encode;
// unknown and unused tokens are never produced and decode to their raw text.
func NewBPEFor(pre string, tokens []string, merges []string, types []int32) (*BPE, error) {
	split, err := lookupPre(pre)
	if err != nil {
		return nil, err
	}
	if len(types) != 0 && len(types) != len(tokens) {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(types), len(tokens))
	}
	if len(tokens) > MaxRank+1<<16 {
		return nil, fmt.Errorf("tokenizer: %d tokens is too many", len(tokens))
	}
	b := &BPE{
		pre:     pre,
		split:   split,
		tokens:  tokens,
		types:   make([]int32, len(tokens)),
		bytesOf: make([][]byte, len(tokens)),
		merges:  make(map[uint64]mergeTo, len(merges)),
	}
	idOf := make(map[string]int32, len(tokens))
	for id, s := range tokens {
		t := TypeNormal
		if len(types) != 0 {
			t = types[id]
		}
		b.types[id] = t
		switch t {
		case TypeNormal:
			if s == "" {
				return nil, fmt.Errorf("tokenizer: normal token %d is empty", id)
			}
			raw, ok := unmap(s)
			if !ok {
				// Text outside GPT-2's byte-to-unicode table (Command R has 1,403 such tokens,
				// emoji among them): no merge can produce it, so Encode never does; it
				// decodes to its own bytes where a rune is not a mapped byte.
				b.bytesOf[id] = looseUnmap(s)
				continue
			}
			if prev, dup := idOf[s]; dup {
				return nil, fmt.Errorf("tokenizer: tokens %d and %d are both %q", prev, id, s)
			}
			idOf[s] = int32(id)
			b.bytesOf[id] = raw
		case TypeControl, TypeUserDefined:
			if s == "" {
				return nil, fmt.Errorf("tokenizer: special token %d is empty", id)
			}
			b.bytesOf[id] = []byte(s)
			b.specials = append(b.specials, special{s, id})
			b.first[s[0]] = true
		case TypeUnknown, TypeUnused:
			b.bytesOf[id] = []byte(s)
		default:
			return nil, &UnsupportedError{Offset: -1, Field: fmt.Sprintf("tokenizer.ggml.token_type[%d]", id), Msg: fmt.Sprintf("type %d of token %q (this package implements 1 normal, 2 unknown, 3 control, 4 user-defined and 5 unused)", t, s)}
		}
	}
	for c := range 256 {
		id, ok := idOf[string(byteRune[c])]
		if !ok {
			id = noToken
		}
		b.byteID[c] = id
	}
	var buf []byte
	for i, m := range merges {
		sp := strings.IndexByte(m, ' ')
		if sp < 0 || strings.IndexByte(m[sp+1:], ' ') >= 0 {
			return nil, fmt.Errorf("tokenizer: merges[%d] %q is not \"left right\"", i, m)
		}
		l, lok := idOf[m[:sp]]
		r, rok := idOf[m[sp+1:]]
		buf = append(append(buf[:0], m[:sp]...), m[sp+1:]...)
		res, resok := idOf[string(buf)]
		if !lok || !rok || !resok {
			return nil, fmt.Errorf("tokenizer: merges[%d] %q: left, right and their concatenation must all be normal tokens", i, m)
		}
		k := pairKey(l, r)
		if prev, dup := b.merges[k]; dup {
			return nil, fmt.Errorf("tokenizer: merges[%d] %q repeats merges[%d]", i, m, prev.rank)
		}
		b.merges[k] = mergeTo{rank: int32(i), id: res}
	}
	b.bytePair = make([]mergeTo, 1<<16)
	for c1 := range 256 {
		for c2 := range 256 {
			m, ok := b.merges[pairKey(b.byteID[c1], b.byteID[c2])]
			if !ok || b.byteID[c1] < 0 || b.byteID[c2] < 0 {
				m.rank = -1
			}
			b.bytePair[c1<<8|c2] = m
		}
	}
	if split.ignoreMerges {
		b.wholeID = make(map[string]int32, len(idOf))
		for _, id := range idOf {
			b.wholeID[string(b.bytesOf[id])] = id
		}
	}
	sort.SliceStable(b.specials, func(i, j int) bool { return len(b.specials[i].text) > len(b.specials[j].text) })
	return b, nil
}

// Pre returns the tokenizer.ggml.pre name of the BPE's pre-tokenizer.
func (b *BPE) Pre() string { return b.pre }

// Len returns the number of token ids.
func (b *BPE) Len() int { return len(b.tokens) }

// Token returns token id's GGUF text and type; ok is false if id is out of range.
func (b *BPE) Token(id int) (text string, typ int32, ok bool) {
	if id < 0 || id >= len(b.tokens) {
		return "", 0, false
	}
	return b.tokens[id], b.types[id], true
}

// SpecialID returns the id of the control or user-defined token with the given text.
func (b *BPE) SpecialID(text string) (int, bool) {
	for _, s := range b.specials {
		if s.text == text {
			return s.id, true
		}
	}
	return 0, false
}

// TokenBytes returns the bytes token id stands for (a special's raw text for non-normal
// tokens), or nil if id is out of range. The result must not be modified.
func (b *BPE) TokenBytes(id int) []byte {
	if id < 0 || id >= len(b.bytesOf) {
		return nil
	}
	return b.bytesOf[id]
}

// Decode concatenates the bytes of ids. The result may be invalid UTF-8 when ids end or
// start in the middle of a character; bytes are kept exactly. Ids out of range contribute
// nothing (use Len to validate ids first).
func (b *BPE) Decode(ids []int) string {
	n := 0
	for _, id := range ids {
		n += len(b.TokenBytes(id))
	}
	out := make([]byte, 0, n)
	for _, id := range ids {
		out = append(out, b.TokenBytes(id)...)
	}
	return string(out)
}

// Encode tokenizes text: control and user-defined tokens appearing literally in text become
// their ids (the longest one wins where several start at the same byte), and the text
// between them is cut with the pre-tokenizer and each pre-token encoded by byte-level BPE, merging the
// adjacent pair with the lowest merge rank first (leftmost on ties); with "llama-bpe", a
// pre-token that is itself a normal token is that token. Any string encodes, including
// invalid UTF-8, and Decode(Encode(s)) == s when the vocabulary has a token for every byte
// of s: a byte it lacks is dropped, as llama.cpp drops it (vocabularies built from UTF-8
// text often lack 0xC0, 0xC1 and 0xF5..0xFF, which valid UTF-8 never holds; Falcon's also
// lacks some ASCII control bytes).
func (b *BPE) Encode(text string) []int {
	var (
		out []int
		sc  bpeScratch
	)
	plain := 0
	if len(b.specials) > 0 {
		for i := 0; i < len(text); i++ {
			if !b.first[text[i]] {
				continue
			}
			for _, s := range b.specials {
				if strings.HasPrefix(text[i:], s.text) {
					out = b.encodePlain(out, text[plain:i], &sc)
					out = append(out, s.id)
					i += len(s.text) - 1
					plain = i + 1
					break
				}
			}
		}
	}
	return b.encodePlain(out, text[plain:], &sc)
}

// encodePlain appends the ids of text, which holds no special tokens.
func (b *BPE) encodePlain(out []int, text string, sc *bpeScratch) []int {
	sc.ends = b.split.ends(sc.ends[:0], text)
	start := 0
	for _, e := range sc.ends {
		piece := text[start:e]
		start = e
		if b.wholeID != nil {
			if id, ok := b.wholeID[piece]; ok {
				out = append(out, int(id))
				continue
			}
		}
		out = b.encodePiece(out, piece, sc)
	}
	return out
}

// bpeScratch holds the buffers of one Encode call.
type bpeScratch struct {
	ids  []int32 // per byte position: current symbol id, or -1 once merged into its left
	next []int32 // per live position: position of the next live symbol (len = none)
	prev []int32 // per live position: position of the previous live symbol (-1 = none)
	heap []mergeCand
	ends []int // the pre-tokens' end offsets
}

// mergeCand is a candidate merge of the live symbols at pos and next[pos], valid while they
// still hold the ids left and right.
type mergeCand struct {
	rank, pos, left, right int32
	id                     int32 // the merged token
}

func (c mergeCand) less(d mergeCand) bool {
	return c.rank < d.rank || c.rank == d.rank && c.pos < d.pos
}

// encodePiece appends the BPE ids of one pre-token.
func (b *BPE) encodePiece(out []int, piece string, sc *bpeScratch) []int {
	n := len(piece)
	if n == 1 {
		if id := b.byteID[piece[0]]; id >= 0 {
			out = append(out, int(id))
		}
		return out
	}
	sc.ids, sc.next, sc.prev, sc.heap = sc.ids[:0], sc.next[:0], sc.prev[:0], sc.heap[:0]
	for i := range n {
		sc.ids = append(sc.ids, b.byteID[piece[i]])
		sc.next = append(sc.next, int32(i+1))
		sc.prev = append(sc.prev, int32(i-1))
	}
	for i := 0; i+1 < n; i++ {
		if m := b.bytePair[int(piece[i])<<8|int(piece[i+1])]; m.rank >= 0 {
			sc.push(mergeCand{rank: m.rank, pos: int32(i), left: sc.ids[i], right: sc.ids[i+1], id: m.id})
		}
	}
	for len(sc.heap) > 0 {
		c := sc.popCand()
		r := sc.next[c.pos]
		if sc.ids[c.pos] != c.left || int(r) >= n || sc.ids[r] != c.right {
			continue // stale: one side was merged since
		}
		sc.ids[c.pos] = c.id
		sc.ids[r] = -1
		nr := sc.next[r]
		sc.next[c.pos] = nr
		if int(nr) < n {
			sc.prev[nr] = c.pos
			b.pushCand(sc, c.pos, nr)
		}
		if p := sc.prev[c.pos]; p >= 0 {
			b.pushCand(sc, p, c.pos)
		}
	}
	for i := int32(0); int(i) < n; i = sc.next[i] {
		if id := sc.ids[i]; id >= 0 {
			out = append(out, int(id))
		}
	}
	return out
}

// pushCand adds the merge of the symbols at positions p and q, if the vocabulary has one.
func (b *BPE) pushCand(sc *bpeScratch, p, q int32) {
	l, r := sc.ids[p], sc.ids[q]
	if m, ok := b.merges[pairKey(l, r)]; ok {
		sc.push(mergeCand{rank: m.rank, pos: p, left: l, right: r, id: m.id})
	}
}

// push adds a candidate to the heap.
func (sc *bpeScratch) push(c mergeCand) {
	h := append(sc.heap, c)
	for i := len(h) - 1; i > 0; { // sift up
		parent := (i - 1) / 2
		if !h[i].less(h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	sc.heap = h
}

// popCand removes and returns the best candidate (lowest rank, then leftmost).
func (sc *bpeScratch) popCand() mergeCand {
	h := sc.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; { // sift down
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	sc.heap = h
	return top
}
