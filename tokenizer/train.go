package tokenizer

import (
	"container/heap"
	"fmt"
)

// TrainBPE learns a byte-level BPE vocabulary with Kimi's pre-tokenizer; it is
// TrainBPEFor(PreKimi, text, nRanks).
func TrainBPE(text []byte, nRanks int) ([][]byte, error) {
	return TrainBPEFor(PreKimi, text, nRanks)
}

// TrainBPEFor learns a deterministic byte-level BPE vocabulary of nRanks tokens from text and
// returns it indexed by rank: ranks 0..255 are the single bytes 0x00..0xFF, and every later
// rank is the concatenation of two earlier ones. Text is first cut into pre-tokens with the
// pre-tokenizer named pre (one of PreTokenizers()), so merges never cross a pre-token boundary. Each step merges the most frequent adjacent
// pair (ties: the pair with the smaller left rank, then the smaller right rank); a pair whose
// bytes already form a token is merged into that token without adding a rank. If the text
// runs out of pairs before nRanks tokens exist, TrainBPE fails and asks for more text.
//
// Pair counts are updated incrementally and the best pair comes from a lazily refreshed
// max-heap, so each merge costs time proportional to the pre-tokens it touches.
func TrainBPEFor(pre string, text []byte, nRanks int) ([][]byte, error) {
	split, err := lookupPre(pre)
	if err != nil {
		return nil, err
	}
	if nRanks < 256 {
		return nil, fmt.Errorf("tokenizer: TrainBPE needs nRanks >= 256 (the single bytes), got %d", nRanks)
	}
	if nRanks > MaxRank+1 {
		return nil, fmt.Errorf("tokenizer: TrainBPE nRanks %d exceeds %d", nRanks, MaxRank+1)
	}
	tokens := make([][]byte, 256, nRanks)
	byBytes := make(map[string]int32, nRanks)
	for b := range 256 {
		tokens[b] = []byte{byte(b)}
		byBytes[string(tokens[b])] = int32(b)
	}
	if nRanks == 256 {
		return tokens, nil
	}
	t := newTrainer(string(text), split.ends(nil, string(text)))
	for len(tokens) < nRanks {
		p, ok := t.best()
		if !ok {
			return nil, fmt.Errorf("tokenizer: TrainBPE ran out of pairs after %d of %d ranks (%d bytes of text, %d distinct pre-tokens); supply more text",
				len(tokens), nRanks, len(text), len(t.words))
		}
		a, b := int32(p>>32), int32(uint32(p))
		cat := make([]byte, 0, len(tokens[a])+len(tokens[b]))
		cat = append(append(cat, tokens[a]...), tokens[b]...)
		id, exists := byBytes[string(cat)]
		if !exists {
			id = int32(len(tokens))
			tokens = append(tokens, cat)
			byBytes[string(cat)] = id
		}
		t.merge(p, id)
	}
	return tokens, nil
}

// pairKey packs an adjacent pair of token ids.
func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// trainWord is one distinct pre-token: its current token ids and how often it occurs.
type trainWord struct {
	ids  []int32
	freq int64
}

// trainer holds the incremental pair statistics of TrainBPE.
type trainer struct {
	words   []trainWord
	count   map[uint64]int64   // pair -> occurrences weighted by word frequency
	where   map[uint64][]int32 // pair -> words that may contain it (may repeat or be stale)
	h       pairHeap
	seen    []int32 // per word: last merge step that visited it (dedupes where lists)
	step    int32
	touched map[uint64]struct{} // pairs whose count rose during the current merge
}

func newTrainer(text string, ends []int) *trainer {
	index := make(map[string]int32)
	t := &trainer{count: make(map[uint64]int64), where: make(map[uint64][]int32), touched: make(map[uint64]struct{})}
	start := 0
	for _, e := range ends {
		piece := text[start:e]
		start = e
		if w, ok := index[piece]; ok {
			t.words[w].freq++
			continue
		}
		ids := make([]int32, len(piece))
		for k := range len(piece) {
			ids[k] = int32(piece[k])
		}
		index[piece] = int32(len(t.words))
		t.words = append(t.words, trainWord{ids: ids, freq: 1})
	}
	for w, word := range t.words {
		for k := 0; k+1 < len(word.ids); k++ {
			p := pairKey(word.ids[k], word.ids[k+1])
			t.count[p] += word.freq
			if l := t.where[p]; len(l) == 0 || l[len(l)-1] != int32(w) {
				t.where[p] = append(l, int32(w))
			}
		}
	}
	t.h = make(pairHeap, 0, len(t.count))
	for p, c := range t.count {
		t.h = append(t.h, pairEntry{count: c, pair: p})
	}
	heap.Init(&t.h)
	t.seen = make([]int32, len(t.words))
	for i := range t.seen {
		t.seen[i] = -1
	}
	return t
}

// best pops the most frequent pair, refreshing stale heap entries on the way.
func (t *trainer) best() (uint64, bool) {
	for t.h.Len() > 0 {
		e := heap.Pop(&t.h).(pairEntry)
		cur := t.count[e.pair]
		if cur == e.count && cur > 0 {
			return e.pair, true
		}
		if cur > 0 && cur < e.count {
			heap.Push(&t.h, pairEntry{count: cur, pair: e.pair})
		}
	}
	return 0, false
}

// merge replaces every occurrence of pair p by token id in all words containing it.
func (t *trainer) merge(p uint64, id int32) {
	a, b := int32(p>>32), int32(uint32(p))
	step := t.step
	t.step++
	for _, w := range t.where[p] {
		if t.seen[w] == step {
			continue
		}
		t.seen[w] = step
		word := &t.words[w]
		seq, f := word.ids, word.freq
		o := 0
		for r := 0; r < len(seq); {
			if r+1 < len(seq) && seq[r] == a && seq[r+1] == b {
				if o > 0 {
					left := seq[o-1]
					t.add(pairKey(left, a), -f, w)
					t.add(pairKey(left, id), f, w)
				}
				if r+2 < len(seq) {
					right := seq[r+2]
					t.add(pairKey(b, right), -f, w)
					t.add(pairKey(id, right), f, w)
				}
				seq[o] = id
				o++
				r += 2
				continue
			}
			seq[o] = seq[r]
			o++
			r++
		}
		word.ids = seq[:o]
	}
	delete(t.count, p)
	delete(t.where, p)
	for q := range t.touched {
		if c := t.count[q]; c > 0 {
			heap.Push(&t.h, pairEntry{count: c, pair: q})
		}
		delete(t.touched, q)
	}
}

// add changes pair q's count by d for word w, recording new occurrences and rises.
func (t *trainer) add(q uint64, d int64, w int32) {
	c := t.count[q] + d
	if c <= 0 {
		delete(t.count, q)
	} else {
		t.count[q] = c
	}
	if d > 0 {
		if l := t.where[q]; len(l) == 0 || l[len(l)-1] != w {
			t.where[q] = append(l, w)
		}
		t.touched[q] = struct{}{}
	}
}

// pairEntry is a heap entry: a pair and its count when pushed (possibly stale).
type pairEntry struct {
	count int64
	pair  uint64
}

// pairHeap orders entries by count descending, then pair ascending (left rank, right rank).
type pairHeap []pairEntry

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count > h[j].count
	}
	return h[i].pair < h[j].pair
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairEntry)) }
func (h *pairHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
