package demo

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/synth"
	"github.com/dspark-dev/dspark/tokenizer"
)

// Lexicon is what the English target is planted with, all of it counted from the corpus:
// a byte-level BPE tokenizer trained on the corpus, the corpus bigram table of its tokens
// (add-alpha smoothing towards the unigram distribution) as a rank-r factorization, and one
// random unit code per token for the repetition penalty.
type Lexicon struct {
	Ranks    [][]byte       // BPE ranks (ids 0..len-1); ids len..Vocab-1 are reserved specials
	Vocab    int            // ranks + reserved
	Tok      *tokenizer.BPE // the tokenizer of Ranks plus the specials
	Docs     [][]int        // the corpus, tokenized, one sequence per document
	Tokens   int            // total tokens of Docs
	W1, W2   []float32      // Vocab x Rank each: centered log P(b | a) ≈ W1[a] · W2[b]
	Rank     int            //
	Codes    []float32      // Vocab x CodeDims unit vectors (zero rows for specials)
	CodeDims int            //
	Specials map[int]string // reserved ids and their names
	Unigram  []float64      // corpus token frequencies (sum 1)
}

// BuildLexicon trains the tokenizer and counts the corpus bigrams (see Lexicon).
func BuildLexicon(c *Corpus, r *EnglishRecipe) (*Lexicon, error) {
	ranks := r.Vocab - r.Reserved
	rk, err := tokenizer.TrainBPE(corpusText(c), ranks)
	if err != nil {
		return nil, fmt.Errorf("demo: training the tokenizer on the Go corpus: %w", err)
	}
	specials := synth.SpecialTokens(ranks, r.Vocab)
	voc, err := tokenizer.GGUFVocab(rk, specials, r.Vocab)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.NewBPE(voc.Tokens, voc.Merges, voc.Types)
	if err != nil {
		return nil, err
	}
	return countLexicon(c, lexiconParams{Vocab: r.Vocab, Reserved: r.Reserved, BigramRank: r.BigramRank, CodeDims: r.CodeDims,
		PowerIters: r.PowerIters, Alpha: r.Alpha, Seed: r.TargetSeed}, rk, tok, specials)
}

// corpusText is the corpus's documents, one after another, each followed by a newline: the
// text the tokenizers are trained on.
func corpusText(c *Corpus) []byte {
	text := make([]byte, 0, c.Bytes()+len(c.Docs))
	for _, d := range c.Docs {
		text = append(text, d...)
		text = append(text, '\n')
	}
	return text
}

// lexiconParams are the recipe's choices countLexicon reads (the same for every demo pair).
type lexiconParams struct {
	Vocab, Reserved, BigramRank, CodeDims, PowerIters int
	Alpha                                             float64
	Seed                                              uint64
}

// countLexicon tokenizes the corpus with tok (whose BPE ranks are rk, ids 0..len(rk)-1;
// specials the reserved ids above them) and counts, smooths and factors its bigrams, and
// draws the per-token codes (none when CodeDims is 0).
func countLexicon(c *Corpus, r lexiconParams, rk [][]byte, tok *tokenizer.BPE, specials map[int]string) (*Lexicon, error) {
	ranks := r.Vocab - r.Reserved
	var err error
	lx := &Lexicon{Ranks: rk, Vocab: r.Vocab, Tok: tok, Specials: specials, Rank: r.BigramRank, CodeDims: r.CodeDims}
	V := r.Vocab
	counts := make([]float64, V*V)
	uni := make([]float64, V)
	for _, d := range c.Docs {
		ids := tok.Encode(d)
		lx.Docs = append(lx.Docs, ids)
		lx.Tokens += len(ids)
		for i, b := range ids {
			uni[b]++
			if i > 0 {
				counts[ids[i-1]*V+b]++
			}
		}
	}
	var total float64
	for _, u := range uni {
		total += u
	}
	lx.Unigram = make([]float64, V)
	for b := range uni {
		lx.Unigram[b] = uni[b] / total
	}
	// log P(b | a) = log((C(a,b) + alpha*U(b)) / (N(a) + alpha)), U the unigram distribution
	// with a floor so that every normal token keeps some mass; rows centered (softmax ignores
	// a row constant). Specials stay out of the table (the lm_head bias silences them).
	table := make([]float32, V*V)
	floor := 0.1 / float64(ranks)
	for a := 0; a < ranks; a++ {
		row := counts[a*V : (a+1)*V]
		var n float64
		for _, x := range row[:ranks] {
			n += x
		}
		var mean float64
		lp := make([]float64, ranks)
		for b := 0; b < ranks; b++ {
			u := (lx.Unigram[b] + floor) / (1 + floor*float64(ranks))
			lp[b] = math.Log((row[b] + r.Alpha*u) / (n + r.Alpha))
			mean += lp[b]
		}
		mean /= float64(ranks)
		for b := 0; b < ranks; b++ {
			table[a*V+b] = float32(lp[b] - mean)
		}
	}
	if lx.W1, lx.W2, err = lowRank(table, V, r.BigramRank, r.PowerIters, r.Seed); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(r.Seed, 0xc0de))
	lx.Codes = make([]float32, V*r.CodeDims)
	for a := 0; a < ranks; a++ {
		row := lx.Codes[a*r.CodeDims : (a+1)*r.CodeDims]
		var n float64
		for i := range row {
			x := rng.NormFloat64()
			row[i] = float32(x)
			n += x * x
		}
		n = math.Sqrt(n)
		for i := range row {
			row[i] = float32(float64(row[i]) / n)
		}
	}
	return lx, nil
}
