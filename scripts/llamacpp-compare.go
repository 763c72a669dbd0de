//go:build ignore

// llamacpp-compare: runs dspark's target over the tokens llama.cpp generated (teacher forcing)
// and compares the two runtimes' next-token distributions step by step, for
// scripts/bench-llamacpp.sh. It is a benchmark helper (`go run scripts/llamacpp-compare.go`),
// never part of `make test` or CI.
//
// Usage: go run scripts/llamacpp-compare.go --target F.gguf --llama LOGITS.json
//
// LOGITS.json is what `node scripts/llamacpp-decode.mjs --logits` writes: the prompt, the n
// greedy tokens llama.cpp generated and the raw logits of each step. Because dspark is fed
// llama.cpp's tokens, the first step whose dspark argmax differs from llama.cpp's token is
// exactly where the two free-running greedy outputs first diverge. For every step it reports
// the largest |log p_dspark - log p_llama| over the whole vocabulary, the same difference at
// llama.cpp's token, and dspark's top-1 margin (logit gap between its best two tokens), which
// tells a near-tie from a real disagreement. The last line is a JSON summary.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/registry"
)

type llamaDump struct {
	Prompt []int    `json:"prompt"`
	Tokens []int    `json:"tokens"`
	Vocab  int      `json:"vocab"`
	Logits []string `json:"logits_f32_b64"`
}

type summary struct {
	Steps           int     `json:"steps"`
	FirstDivergence int     `json:"first_divergence"` // -1: none
	DsparkToken     int     `json:"dspark_token_at_divergence,omitempty"`
	LlamaToken      int     `json:"llama_token_at_divergence,omitempty"`
	MaxAbsLogProb   float64 `json:"max_abs_logprob_diff"`
	MaxAbsChosen    float64 `json:"max_abs_logprob_diff_at_llama_token"`
	MaxAbsBefore    float64 `json:"max_abs_logprob_diff_before_divergence"`
	MinMargin       float64 `json:"min_dspark_top1_margin"`
}

func main() {
	target := flag.String("target", "", "target GGUF (any architecture the runtime runs)")
	dumpPath := flag.String("llama", "", "logits JSON written by llamacpp-decode.mjs --logits")
	flag.BoolVar(&bf16Act, "bf16-activations", false, "round the activations of BF16 products to bfloat16 (as llama.cpp does) where the kernels run it (= --activations bf16)")
	flag.StringVar(&activations, "activations", "f32", "the target's activation precision: f32, bf16, bf16-amx or q8 (llama.cpp's quantized activations for block-quantized weights)")
	flag.Parse()
	if *target == "" || *dumpPath == "" {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/llamacpp-compare.go --target F.gguf --llama LOGITS.json")
		os.Exit(2)
	}
	if err := run(*target, *dumpPath); err != nil {
		fmt.Fprintln(os.Stderr, "llamacpp-compare:", err)
		os.Exit(1)
	}
}

// bf16Act selects kernels.BF16Activations for the target's BF16 products; activations names
// any precision kernels.ParsePrecision knows.
var (
	bf16Act     bool
	activations string
)

func run(path, dumpPath string) error {
	raw, err := os.ReadFile(dumpPath)
	if err != nil {
		return err
	}
	var d llamaDump
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("%s: %w", dumpPath, err)
	}
	if len(d.Prompt) == 0 || len(d.Tokens) == 0 || len(d.Logits) != len(d.Tokens) {
		return fmt.Errorf("%s: want a prompt and one logits row per token (have %d tokens, %d rows)", dumpPath, len(d.Tokens), len(d.Logits))
	}
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	arch, err := registry.LookupTarget(f)
	if err != nil {
		return err
	}
	opt := runtime.Options{Context: len(d.Prompt) + len(d.Tokens) + 1, Pack: true}
	if opt.Activations, err = kernels.ParsePrecision(activations); err != nil {
		return err
	}
	if bf16Act {
		opt.Activations = kernels.BF16Activations
	}
	t, err := arch.Load(f, opt)
	if err != nil {
		return err
	}
	defer t.Close()
	V := t.Dims().NVocab
	if d.Vocab != V {
		return fmt.Errorf("%s: vocabulary %d, the target has %d", dumpPath, d.Vocab, V)
	}
	var st runtime.Step
	// Prefill; the last row's logits predict the first generated token.
	var last []float32
	for done := 0; done < len(d.Prompt); {
		n := min(len(d.Prompt)-done, t.MaxBatch())
		if err := t.Forward(d.Prompt[done:done+n], n-1, nil, &st); err != nil {
			return err
		}
		done += n
		last = st.Logits[(n-1)*V : n*V]
	}
	s := summary{Steps: len(d.Tokens), FirstDivergence: -1, MinMargin: math.Inf(1)}
	fmt.Printf("%4s %8s %8s %10s %12s %12s %10s\n", "step", "llama", "dspark", "agree", "max|dlogp|", "dlogp@llama", "margin")
	for i, tok := range d.Tokens {
		lb, err := base64.StdEncoding.DecodeString(d.Logits[i])
		if err != nil || len(lb) != 4*V {
			return fmt.Errorf("%s: logits row %d is not %d base64 float32 values", dumpPath, i, V)
		}
		ll := make([]float64, V)
		for j := range ll {
			ll[j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(lb[4*j:])))
		}
		dl := make([]float64, V)
		for j := range dl {
			dl[j] = float64(last[j])
		}
		best, margin := top2(dl)
		logSoftmax(ll)
		logSoftmax(dl)
		maxd := 0.0
		for j := range dl {
			maxd = max(maxd, math.Abs(dl[j]-ll[j]))
		}
		chosen := math.Abs(dl[tok] - ll[tok])
		agree := best == tok
		if !agree && s.FirstDivergence < 0 {
			s.FirstDivergence, s.DsparkToken, s.LlamaToken = i, best, tok
		}
		if s.FirstDivergence < 0 {
			s.MaxAbsBefore = max(s.MaxAbsBefore, maxd)
		}
		s.MaxAbsLogProb = max(s.MaxAbsLogProb, maxd)
		s.MaxAbsChosen = max(s.MaxAbsChosen, chosen)
		s.MinMargin = min(s.MinMargin, margin)
		fmt.Printf("%4d %8d %8d %10v %12.3g %12.3g %10.3g\n", i, tok, best, agree, maxd, chosen, margin)
		if i+1 == len(d.Tokens) {
			break
		}
		if err := t.Forward([]int{tok}, 0, nil, &st); err != nil {
			return err
		}
		last = st.Logits[:V]
	}
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
	return nil
}

// top2 returns the index of the largest value and its gap to the second largest.
func top2(x []float64) (int, float64) {
	b, a, s := 0, math.Inf(-1), math.Inf(-1)
	for i, v := range x {
		switch {
		case v > a:
			b, a, s = i, v, a
		case v > s:
			s = v
		}
	}
	return b, a - s
}

// logSoftmax replaces x by log(softmax(x)), in float64.
func logSoftmax(x []float64) {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	var z float64
	for _, v := range x {
		z += math.Exp(v - m)
	}
	lz := m + math.Log(z)
	for i := range x {
		x[i] -= lz
	}
}
