package convert

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/safetensors"
)

// rewriteCheckpoint copies the base target into a new directory, keeping the tensors keep
// accepts and adding extra ones.
func rewriteCheckpoint(t *testing.T, keep func(name string) bool, extra []safetensors.TensorSource) string {
	t.Helper()
	src := baseTarget(t)
	dir := copyDir(t, src)
	if err := os.Remove(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenCheckpoint(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var tensors []safetensors.TensorSource
	for _, n := range ck.Names() {
		if !keep(n) {
			continue
		}
		ti, _ := ck.Tensor(n)
		data, err := ck.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, safetensors.TensorSource{Name: n, Dtype: ti.Dtype, Shape: ti.Shape, Data: bytesData(data)})
	}
	tensors = append(tensors, extra...)
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), nil, tensors, false); err != nil {
		t.Fatal(err)
	}
	return dir
}

// withMTPLayer adds MTP-layer tensors (model.layers.3.*, beyond num_hidden_layers = 3) to
// the base target; nextn sets num_nextn_predict_layers ("" leaves synth's 0).
func withMTPLayer(t *testing.T, nextn string) string {
	t.Helper()
	var extra []safetensors.TensorSource
	for _, n := range []string{"model.layers.3.eh_proj.weight", "model.layers.3.enorm.weight"} {
		extra = append(extra, safetensors.TensorSource{Name: n, Dtype: "BF16", Shape: []int64{4, 8}, Data: bytesData(make([]byte, 64))})
	}
	dir := rewriteCheckpoint(t, func(string) bool { return true }, extra)
	if nextn != "" {
		editJSON(t, filepath.Join(dir, "config.json"), `"num_nextn_predict_layers": 0`, `"num_nextn_predict_layers": `+nextn)
	}
	return dir
}

func bytesData(b []byte) func(w io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// TestMTPLayersDropped: tensors of the num_nextn_predict_layers MTP layers are listed as not
// written; the same tensors without that config field are unexpected.
func TestMTPLayersDropped(t *testing.T) {
	p, err := NewPlan(withMTPLayer(t, "1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dropped := strings.Join(p.Dropped, "\n")
	for _, n := range []string{"model.layers.3.eh_proj.weight (MTP layer)", "model.layers.3.enorm.weight (MTP layer)"} {
		if !strings.Contains(dropped, n) {
			t.Errorf("%s not listed as dropped: %v", n, p.Dropped)
		}
	}
	for _, tt := range p.Tensors {
		if strings.HasPrefix(tt.Name, "blk.3.") {
			t.Errorf("MTP tensor written as %s", tt.Name)
		}
	}
	_, err = NewPlan(withMTPLayer(t, ""), Options{})
	if err == nil || !strings.Contains(err.Error(), "unexpected tensors (2)") {
		t.Errorf("MTP tensors without num_nextn_predict_layers: %v", err)
	}
}

// TestDeepseekV2Style converts a V2-style MoE (DeepseekV2ForCausalLM, softmax routing,
// greedy top-k, no score-correction bias): no exp_probs_b tensors, expert_gating_func 1.
func TestDeepseekV2Style(t *testing.T) {
	dir := rewriteCheckpoint(t, func(n string) bool { return !strings.HasSuffix(n, "e_score_correction_bias") }, nil)
	cfg := filepath.Join(dir, "config.json")
	editJSON(t, cfg, `"DeepseekV3ForCausalLM"`, `"DeepseekV2ForCausalLM"`)
	editJSON(t, cfg, `"topk_method": "noaux_tc"`, `"topk_method": "greedy"`)
	editJSON(t, cfg, `"scoring_func": "sigmoid"`, `"scoring_func": "softmax"`)
	p, out := convertTo(t, dir, Options{})
	for _, tt := range p.Tensors {
		if strings.Contains(tt.Name, "exp_probs_b") {
			t.Errorf("%s written for a greedy/softmax router", tt.Name)
		}
	}
	if g := metaMap(p.Meta)["deepseek2.expert_gating_func"]; g != "u32 1" {
		t.Errorf("expert_gating_func %s, want u32 1 (softmax)", g)
	}
	rep, err := p.Verify(out, lintCheck)
	if err != nil || !rep.OK() {
		t.Fatalf("%v %s", err, rep.Verdict())
	}
}

// TestTiedWithStoredHead: tie_word_embeddings with an lm_head.weight still stored writes no
// output tensor and lists the head as not written.
func TestTiedWithStoredHead(t *testing.T) {
	dir := rewriteCheckpoint(t, func(string) bool { return true }, nil)
	editJSON(t, filepath.Join(dir, "config.json"), `"tie_word_embeddings": false`, `"tie_word_embeddings": true`)
	p, out := convertTo(t, dir, Options{})
	for _, tt := range p.Tensors {
		if tt.Name == "output.weight" {
			t.Error("output.weight written for tied embeddings")
		}
	}
	if !strings.Contains(strings.Join(p.Dropped, "\n"), "lm_head.weight (tie_word_embeddings") {
		t.Errorf("lm_head not listed as dropped: %v", p.Dropped)
	}
	rep, err := p.Verify(out, lintCheck)
	if err != nil || !rep.OK() {
		t.Fatalf("%v %s", err, rep.Verdict())
	}
}
