package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// TestInspectCheckTargetVerdict: inspect --check gives a target dspark's own loader verdict
// from the header alone, the same answer run gives: yes for a target it runs, and for a
// matrix of a type it does not run, no, naming the tensor and its type.
func TestInspectCheckTargetVerdict(t *testing.T) {
	target, _ := convertedPair(t)
	verdict := func(path string) (loads bool, reason string) {
		out, errOut, _ := runRoot(t, "inspect", "--check", "--json", path)
		var r struct {
			Check struct {
				Loaders []struct {
					Name   string `json:"name"`
					Loads  *bool  `json:"loads"`
					Reason string `json:"reason"`
				} `json:"loaders"`
			} `json:"check"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		for _, l := range r.Check.Loaders {
			if l.Name == "dspark" && l.Loads != nil {
				return *l.Loads, l.Reason
			}
		}
		t.Fatalf("no dspark verdict for %s: %s", path, out)
		return false, ""
	}
	if ok, why := verdict(target); !ok || !strings.Contains(why, "deepseek2 target") {
		t.Errorf("intact target: loads %v: %s", ok, why)
	}
	// The same file with one matrix of a block type the runtime does not run (Q8_1).
	f, err := gguf.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var specs []gguf.TensorSpec
	bad := ""
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		spec := gguf.TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: gguf.BytesData(data)}
		if bad == "" && strings.HasSuffix(ti.Name, "ffn_down.weight") {
			bad, spec.Type = ti.Name, gguf.TypeQ8_1
			n, err := gguf.TensorBytes(spec.Type, spec.Dims)
			if err != nil {
				t.Fatal(err)
			}
			spec.Data = gguf.BytesData(make([]byte, n))
		}
		specs = append(specs, spec)
	}
	if bad == "" {
		t.Fatal("no ffn_down matrix in the target")
	}
	q := filepath.Join(t.TempDir(), "q8_1.gguf")
	if err := gguf.WriteFile(q, f.KVs, specs, gguf.WriteOptions{Alignment: f.Alignment}); err != nil {
		t.Fatal(err)
	}
	ok, why := verdict(q)
	if ok || !strings.Contains(why, bad) || !strings.Contains(why, "Q8_1") {
		t.Errorf("Q8_1 target: loads %v: %s", ok, why)
	}
	_, errOut, code := runRoot(t, "run", "--target", q, "--tokens", "1,2", "-n", "2")
	if code != exitFailure || !strings.Contains(errOut, bad) {
		t.Errorf("run of the Q8_1 target: exit %d: %s", code, errOut)
	}
}
