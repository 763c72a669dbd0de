package tokenizer

import "math/rand/v2"

// synthRanks builds n ranks quickly without training: the 256 bytes, then tokens that each
// concatenate two earlier ones (biased towards recent, short tokens), at most 16 bytes long (about 8 on average, like a real vocabulary),
// all distinct. Used for vocabulary-scale tests and benchmarks.
func synthRanks(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	ranks := make([][]byte, 256, n)
	seen := make(map[string]bool, n)
	for b := range 256 {
		ranks[b] = []byte{byte(b)}
		seen[string(ranks[b])] = true
	}
	letters := []byte(" etaoinshrdlucmfwypvbgkjqxz.,'0123456789\n\xe4\xb8\xad")
	pick := func() []byte {
		m := len(ranks) - 256
		switch {
		case m == 0 || rng.IntN(2) == 0:
			return ranks[letters[rng.IntN(len(letters))]]
		case rng.IntN(2) == 0:
			return ranks[len(ranks)-1-rng.IntN(min(m, 1000))] // a recent token
		default:
			return ranks[256+rng.IntN(m)]
		}
	}
	for len(ranks) < n {
		a, b := pick(), pick()
		if len(a)+len(b) > 4+rng.IntN(13) { // lengths like a real vocabulary's: mostly short
			continue
		}
		cat := append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
		if seen[string(cat)] {
			continue
		}
		seen[string(cat)] = true
		ranks = append(ranks, cat)
	}
	return ranks
}
