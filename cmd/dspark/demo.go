package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
)

// runDemo runs the embedded demo pair.
func runDemo(w io.Writer, f *runFlags) error {
	return fmt.Errorf("no --target given and the embedded demo pair is not built into this binary yet")
}

// runDraftOnly loads a draft without its target (a seeded stand-in embedding/lm_head of the
// draft's vocabulary takes the target's place), injects synthetic context features, drafts
// one block several times and reports the time against streaming the same weights once.
func runDraftOnly(w io.Writer, f *runFlags) error {
	if f.draft == "" {
		return usagef("--draft-only needs --draft FILE")
	}
	if f.target != "" {
		return usagef("--draft-only does not use --target")
	}
	df, err := gguf.Open(f.draft)
	if err != nil {
		return err
	}
	defer df.Close()
	vocab, err := df.Uint32("dflash.vocab_size")
	if err != nil {
		return fmt.Errorf("%s: %w", f.draft, err)
	}
	embd, err := df.Uint32("dflash.embedding_length")
	if err != nil {
		return fmt.Errorf("%s: %w", f.draft, err)
	}
	head, headBytes, release, err := runtime.StandInHead(int(vocab), int(embd), f.seed)
	if err != nil {
		return err
	}
	defer release()
	d, err := runtime.LoadDraftStandalone(df, head, runtime.TargetOptions{Context: 64, Pack: true})
	if err != nil {
		return err
	}
	tm, err := runtime.TimeDraftBlock(d, headBytes, 32, 5, f.seed)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(tm)
	}
	fmt.Fprintf(w, "draft: %s (%d tensors, %d layers, block size %d, vocab %d, hidden %d)\n",
		f.draft, len(df.Tensors), d.Config.NLayer, d.Config.BlockSize, vocab, embd)
	fmt.Fprintf(w, "context: %d synthetic positions injected in %v\n", tm.ContextPositions, tm.InjectTime.Round(1e6))
	fmt.Fprintf(w, "drafted block: %v\n", tm.Drafts)
	fmt.Fprintf(w, "one block (median of %d): %v; streaming its %.2f GB of weights once: %v; ratio %.2fx\n",
		len(tm.BlockTimes), tm.BlockTime.Round(1e5), float64(tm.BlockBytes)/1e9, tm.StreamTime.Round(1e5), tm.Ratio)
	return nil
}
