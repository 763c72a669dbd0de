package convert

import (
	"fmt"

	"github.com/dspark-dev/dspark/tokenizer"
)

// A stand-in for the tokenizer.json reader until it lands.
func init() {
	hfTokenizer = func(dir string, vocabSize int64) (*tokenizerInfo, error) {
		v := &tokenizer.Vocab{Tokens: make([]string, vocabSize), Types: make([]int32, vocabSize), Merges: []string{"t 1"}}
		for i := range v.Tokens {
			v.Tokens[i], v.Types[i] = fmt.Sprintf("t%d", i), tokenizer.TypeNormal
		}
		f := false
		return &tokenizerInfo{pre: preQwen2, maxID: int(vocabSize) - 1, defines: "fake", vocab: v, addBOS: &f}, nil
	}
}
