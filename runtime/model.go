package runtime

import (
	"fmt"

	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Dims are a target's sizes a draft and the decode loop depend on.
type Dims struct {
	NEmbd  int // hidden size (width of embeddings and hidden states)
	NVocab int // vocabulary (rows of the output head)
	NLayer int // decoder layers (valid hidden-state taps are 0..NLayer-1)
}

// Head is a target's output head: a vocab x NEmbd matrix whose MatMul gives logits (and
// whose rows are bit-identical whether computed alone or in a batch).
type Head = mla.Linear

// EmbeddingHead is a matrix usable as both the token embedding (its rows) and the output
// head: the stand-in a draft is loaded and timed with when its target is not loaded.
type EmbeddingHead interface {
	Head
	Row(i int, dst []float32)
}

// StandaloneHead checks a stand-in head for a draft of width embd loaded without its target
// (dspark run --draft-only; the draft file is named path in errors), sets opt's default
// context (256) and returns the head computed with opt's activation precision.
func StandaloneHead(path string, head EmbeddingHead, embd int, opt *Options) (EmbeddingHead, error) {
	if head.Cols() != embd {
		return nil, fmt.Errorf("%s: stand-in head has width %d, draft %d", path, head.Cols(), embd)
	}
	if opt.Context <= 0 {
		opt.Context = 256
	}
	if m, ok := head.(*kernels.Mat); ok {
		head = m.WithPrecision(opt.Precision())
	}
	return head, nil
}

// Step is the result of one Target.Forward.
type Step struct {
	// Logits holds len(tokens) rows of NVocab logits (only rows >= logitsFrom are computed).
	Logits []float32
	// Hidden maps each requested layer k to len(tokens) rows of NEmbd values: the output of
	// decoder layer k (0-based), before the final norm.
	Hidden map[int][]float32
}

// Target is what the decode loop and a draft need from a target model: a forward over new
// positions with the logit rows and hidden-state taps asked for, its KV cache (length,
// capacity, rewinding rejected rows), its embedding rows and output head, and its sizes. deepseek2.Target
// implements it; another target architecture is another package implementing it, with no
// change to the drafts or the generator.
type Target interface {
	// Dims returns the target's sizes.
	Dims() Dims
	// MaxBatch is the most tokens one Forward accepts.
	MaxBatch() int
	// Len is the number of tokens in the KV cache; Cap its capacity.
	Len() int
	Cap() int
	// Rewind returns the target to its state after the first n positions, dropping the
	// rejected rows of a verify forward. Only the positions of the last Forward can be
	// returned to: after a Forward of rows [s, s+k), any n with s <= n <= s+k (and after a
	// Rewind to n, any n' with s <= n' <= n); an earlier n is an error wrapping ErrRewind for
	// every target, since a recurrent state (Gated DeltaNet, KDA) keeps no history beyond
	// what its last forward recorded. KV-cache targets drop cache rows; recurrent targets
	// select the state their last forward recorded after row n-s-1. Reset empties the
	// target (the state before position 0).
	Rewind(n int) error
	Reset()
	// Forward runs tokens at positions Len()..Len()+len(tokens)-1, appends them to the
	// cache and fills out (its buffers are reused when large enough): logits of the rows
	// from logitsFrom on, and the hidden states of the decoder layers listed in taps. A
	// row's logits and hidden states must not depend on the other rows of the batch, so that
	// greedy speculative decoding reproduces plain decoding.
	Forward(tokens []int, logitsFrom int, taps []int, out *Step) error
	// Embed writes the embedding of token id (NEmbd values) into dst.
	Embed(id int, dst []float32)
	// Head returns the output head.
	Head() Head
	// Tokens returns the tokenizer's tokens (nil when the model has none), for checking that
	// a draft shares the target's tokenizer.
	Tokens() []string
	// Name names the model in messages (its file).
	Name() string
}

// DraftInfo is what the decode loop needs to know of a draft's blocks.
type DraftInfo struct {
	// BlockSize is g, the block rows of one draft forward.
	BlockSize int
	// SampleFromAnchor: true (DSpark) when block row k predicts the token at position s+k+1
	// (g drafts), false (DFlash) when row k predicts position s+k (row 0 predicts the
	// anchor itself: g-1 drafts).
	SampleFromAnchor bool
	// HasConfidence: the draft has a confidence head (Confidence is meaningful).
	HasConfidence bool
}

// MaxDrafts is the most drafts one block proposes.
func (i DraftInfo) MaxDrafts() int {
	if i.SampleFromAnchor {
		return i.BlockSize
	}
	return i.BlockSize - 1
}

// firstRow is the block row that predicts the first draft.
func (i DraftInfo) firstRow() int {
	if i.SampleFromAnchor {
		return 0
	}
	return 1
}

// Draft is what the decode loop needs from a block drafter: context injection from the
// target's tapped hidden states, one block forward per round, and the Markov and confidence
// heads the drafter chain uses. dflashmla.Draft (MLA backbone) and dflashgqa.Draft (GQA
// backbone) implement it.
type Draft interface {
	// Info describes the draft's blocks.
	Info() DraftInfo
	// Taps lists the target layers whose outputs the draft reads (HF convention: the
	// output of decoder layer k, 0-based).
	Taps() []int
	// Reset forgets all context; Len is the number of context positions injected.
	Reset()
	Len() int
	// AddContext injects n new context positions: rows from..from+n-1 of every tapped
	// layer's hidden states in hidden.
	AddContext(hidden map[int][]float32, from, n int) error
	// Block runs the draft on the block anchored at anchor (position Len()) and returns its
	// BlockSize rows of logits (NVocab each) and of final hidden states (what Confidence
	// reads). The block's keys are not kept.
	Block(anchor int) (logits, hidden []float32, err error)
	// MarkovBias adds the Markov head's logit bias for the token after prev to dst (a
	// no-op without a Markov head).
	MarkovBias(prev int, dst []float32)
	// Confidence returns the confidence head's c for block row row, whose previous token is
	// prev (1 without a confidence head).
	Confidence(hidden []float32, row, prev int) float64
}

// MarkovBatcher is implemented by drafts whose Markov head computes the biases of several
// previous tokens in one pass (speculative.Drafter.BiasRows); dflashmla.Draft and
// dflashgqa.Draft do.
type MarkovBatcher interface {
	// MarkovBiases writes row j of dst (len(prevs) rows of NVocab values) with the bias
	// MarkovBias adds for prevs[j], bit for bit, and reports whether the draft has a Markov
	// head (false: dst is untouched).
	MarkovBiases(prevs []int, dst []float32) bool
}

// Options tune the loading of a target or a draft.
type Options struct {
	// Context is the KV cache capacity in tokens (0: the model's default; a draft takes
	// its target's capacity).
	Context int
	// MaxBatch is the largest number of rows one forward accepts (0: the kernels' limit).
	MaxBatch int
	// Pack repacks the weight matrices into the kernels' fast layout at load time, in
	// huge-page memory outside the Go heap (freed by Close), and fuses the matrices that share
	// an input (kv_a_mqa with q_a, gate with up) and the per-head k_b / v_b blocks.
	Pack bool
	// Activations is the precision of the activations in the products of BF16 weight
	// matrices: kernels.F32Activations (the default: the reference, identical on every
	// machine and kernel path), kernels.BF16Activations (activations rounded to bfloat16,
	// as llama.cpp does for BF16 weights; faster where VDPBF16PS is fast, and less accurate)
	// or kernels.BF16AMXActivations (the same rounding, summed the way AMX tiles do: batches
	// nearly as cheap as one row where AMX-BF16 runs). A bf16 precision is only used where
	// the kernels run it on hardware (kernels.Path(p).Accelerated); elsewhere the model keeps
	// F32Activations and its Numerics says why.
	Activations kernels.Precision
}
