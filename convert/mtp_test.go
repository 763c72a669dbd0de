package convert

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/safetensors"
)

// withMTPLayer copies the base target into a new directory and adds MTP-layer tensors
// (model.layers.3.*, beyond num_hidden_layers = 3) to its weights; nextn sets
// num_nextn_predict_layers in config.json ("" leaves it as synth wrote it).
func withMTPLayer(t *testing.T, nextn string) string {
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
		ti, f, _ := ck.Tensor(n)
		data, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, safetensors.TensorSource{Name: n, Dtype: ti.Dtype, Shape: ti.Shape, Data: bytesData(data)})
	}
	for _, n := range []string{"model.layers.3.eh_proj.weight", "model.layers.3.enorm.weight"} {
		tensors = append(tensors, safetensors.TensorSource{Name: n, Dtype: "BF16", Shape: []int64{4, 8}, Data: bytesData(make([]byte, 64))})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), nil, tensors, false); err != nil {
		t.Fatal(err)
	}
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
