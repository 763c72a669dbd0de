package registry

import (
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/demo"
)

// TestStepBytes: the weight bytes a step and a block read, counted from the declarations,
// equal the sums over every tensor of the demo pair's files (the independent count: all of a
// target but the embedding rows a step does not read; all of a draft but its context
// projection, its norm and its embedding, plus the target's head).
func TestStepBytes(t *testing.T) {
	tp, dp, err := demo.Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tf, err := gguf.Open(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	df, err := gguf.Open(dp)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	ta, err := LookupTarget(tf)
	if err != nil {
		t.Fatal(err)
	}
	da, err := LookupDraft(df)
	if err != nil {
		t.Fatal(err)
	}

	var wantStep, wantBlock int64
	_, untied := tf.Tensor("output.weight")
	for _, x := range tf.Tensors {
		if x.Name == "token_embd.weight" && untied {
			wantStep += int64(x.Size / x.Dims[1]) // one row of vocab rows
			continue
		}
		wantStep += int64(x.Size)
	}
	for _, x := range df.Tensors {
		switch x.Name {
		case "fc.weight", "enc.output_norm.weight", "token_embd.weight":
		default:
			wantBlock += int64(x.Size)
		}
	}
	head, ok := tf.Tensor("output.weight")
	if !ok {
		head, _ = tf.Tensor("token_embd.weight")
	}
	wantBlock += int64(head.Size)

	step, err := ta.StepBytes(tf)
	if err != nil || step != wantStep || step <= 0 {
		t.Errorf("StepBytes = %d, %v; want %d", step, err, wantStep)
	}
	block, err := da.BlockBytes(df, ta, tf)
	if err != nil || block != wantBlock || block <= 0 {
		t.Errorf("BlockBytes = %d, %v; want %d", block, err, wantBlock)
	}
}
