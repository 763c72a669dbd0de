package tokenizer

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp numbers them.
const (
	TypeNormal      int32 = 1 // an ordinary BPE token
	TypeUnknown     int32 = 2 // the unknown token (not produced by byte-level BPE)
	TypeControl     int32 = 3 // a special token such as [BOS] or <|im_end|>
	TypeUserDefined int32 = 4 // an added token matched literally in text
	TypeUnused      int32 = 5 // a hole in the id space, named [PAD{id}]
)

// Vocab is a tokenizer in the shape of GGUF's "gpt2" model: the tokenizer.ggml.tokens,
// tokenizer.ggml.token_type and tokenizer.ggml.merges arrays, plus the special tokens.
type Vocab struct {
	Tokens   []string       // per id: GPT-2 byte-to-unicode text, a special's raw text, or [PAD{id}]
	Types    []int32        // per id: TypeNormal, TypeControl, TypeUserDefined or TypeUnused
	Merges   []string       // "left right" in rank order
	Specials map[int]string // the control tokens, id -> raw text
	// Unmerged lists the ranks of multi-byte tokens for which no merge could be emitted
	// because BPE over their bytes with the lower ranks did not end in exactly two parts.
	// Such tokens are unreachable by merge-based encoding; real vocabularies have none.
	Unmerged []int
}

// GGUFVocab builds the GGUF "gpt2" vocabulary of vocabSize ids from tiktoken ranks (index =
// id, nil = hole) and special tokens. Token strings are the rank bytes through GPT-2's
// byte-to-unicode table (specials stay raw; ids in neither become "[PAD{id}]"); types are
// TypeNormal, TypeControl for specials and TypeUnused for holes. Merges are rebuilt from the
// ranks: for each multi-byte token of rank R, in rank order, BPE over its single bytes using
// only tokens of rank < R (repeatedly merging the leftmost adjacent pair whose concatenation
// has the lowest rank); if exactly two parts remain, "<left> <right>" is emitted.
//
// It fails if vocabSize is smaller than the ranks, a special id is outside [0, vocabSize) or
// holds a rank, a special's text is empty, or one of the 256 single bytes has no rank (a
// byte-level vocabulary must cover every byte).
func GGUFVocab(ranks [][]byte, specials map[int]string, vocabSize int) (*Vocab, error) {
	if vocabSize <= 0 || vocabSize < len(ranks) {
		return nil, fmt.Errorf("tokenizer: vocab size %d is smaller than the %d tiktoken ranks", vocabSize, len(ranks))
	}
	ids := make([]int, 0, len(specials))
	for id := range specials {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		switch {
		case id < 0 || id >= vocabSize:
			return nil, fmt.Errorf("tokenizer: special token %d %q is outside the vocabulary [0, %d)", id, specials[id], vocabSize)
		case id < len(ranks) && ranks[id] != nil:
			return nil, fmt.Errorf("tokenizer: special token %d %q collides with tiktoken rank %d %q", id, specials[id], id, ranks[id])
		case specials[id] == "":
			return nil, fmt.Errorf("tokenizer: special token %d has empty text", id)
		}
	}
	rankOf := make(map[string]int32, len(ranks))
	for r, tok := range ranks {
		if tok != nil {
			rankOf[string(tok)] = int32(r)
		}
	}
	for b := range 256 {
		if _, ok := rankOf[string([]byte{byte(b)})]; !ok {
			return nil, fmt.Errorf("tokenizer: byte 0x%02x has no tiktoken rank; a byte-level vocabulary needs all 256 single bytes", b)
		}
	}
	v := &Vocab{
		Tokens:   make([]string, vocabSize),
		Types:    make([]int32, vocabSize),
		Specials: make(map[int]string, len(specials)),
	}
	for id := range vocabSize {
		switch {
		case id < len(ranks) && ranks[id] != nil:
			v.Tokens[id], v.Types[id] = mappedString(ranks[id]), TypeNormal
		case specials[id] != "":
			v.Tokens[id], v.Types[id] = specials[id], TypeControl
			v.Specials[id] = specials[id]
		default:
			v.Tokens[id], v.Types[id] = padToken(id), TypeUnused
		}
	}
	v.Merges, v.Unmerged = rebuildMerges(ranks, rankOf)
	return v, nil
}

// rebuildMerges derives the merges list from the ranks (see GGUFVocab). Tokens are
// independent, so contiguous rank ranges are processed in parallel and joined in rank order.
func rebuildMerges(ranks [][]byte, rankOf map[string]int32) (merges []string, unmerged []int) {
	var pair2 [1 << 16]int32 // rank+1 of each two-byte token, 0 if none
	for r, tok := range ranks {
		if len(tok) == 2 {
			pair2[int(tok[0])<<8|int(tok[1])] = int32(r) + 1
		}
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), len(ranks)/4096))
	type part struct {
		merges   []string
		unmerged []int
	}
	parts := make([]part, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := len(ranks)*w/workers, len(ranks)*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[w].merges, parts[w].unmerged = rebuildRange(ranks, lo, hi, rankOf, &pair2)
		}()
	}
	wg.Wait()
	for _, p := range parts {
		merges = append(merges, p.merges...)
		unmerged = append(unmerged, p.unmerged...)
	}
	return merges, unmerged
}

// rebuildRange rebuilds the merges of ranks lo..hi-1 (see GGUFVocab).
func rebuildRange(ranks [][]byte, lo, hi int, rankOf map[string]int32, pair2 *[1 << 16]int32) (merges []string, unmerged []int) {
	merges = make([]string, 0, hi-lo)
	var (
		bounds []int   // part i is tok[bounds[i]:bounds[i+1]]
		pr     []int32 // pr[i]: rank of parts i and i+1 joined, if below R, else noRank
		buf    []byte
	)
	const noRank = int32(1<<31 - 1)
	for r := lo; r < hi; r++ {
		tok := ranks[r]
		if len(tok) < 2 {
			continue
		}
		R := int32(r)
		if len(tok) > 2 {
			bounds = bounds[:0]
			for i := 0; i <= len(tok); i++ {
				bounds = append(bounds, i)
			}
			joined := func(i int) int32 { // rank of parts i and i+1 joined, if < R
				a, b := bounds[i], bounds[i+2]
				if b-a == 2 {
					if x := pair2[int(tok[a])<<8|int(tok[a+1])] - 1; x >= 0 && x < R {
						return x
					}
					return noRank
				}
				if x, ok := rankOf[string(tok[a:b])]; ok && x < R {
					return x
				}
				return noRank
			}
			pr = pr[:0]
			for i := 0; i+2 < len(bounds); i++ {
				pr = append(pr, joined(i))
			}
			for len(bounds) > 3 {
				best := 0
				for i := 1; i < len(pr); i++ {
					if pr[i] < pr[best] {
						best = i
					}
				}
				if pr[best] == noRank {
					break
				}
				// join parts best and best+1: drop the boundary between them
				bounds = append(bounds[:best+1], bounds[best+2:]...)
				pr = append(pr[:best], pr[best+1:]...)
				if best < len(pr) {
					pr[best] = joined(best)
				}
				if best > 0 {
					pr[best-1] = joined(best - 1)
				}
			}
			if len(bounds) != 3 {
				unmerged = append(unmerged, r)
				continue
			}
		} else {
			bounds = append(bounds[:0], 0, 1, 2)
		}
		buf = appendMapped(buf[:0], tok[:bounds[1]])
		buf = append(buf, ' ')
		buf = appendMapped(buf, tok[bounds[1]:])
		merges = append(merges, string(buf))
	}
	return merges, unmerged
}
