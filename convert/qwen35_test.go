package convert

import (
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/synth"
)

// qwen35Fixture writes (once per name) a synthetic Qwen3.5 target (tiny by default).
func qwen35Fixture(t testing.TB, name string, opts synth.Qwen35Options) string {
	t.Helper()
	if opts.Preset == "" && opts.Dims == nil {
		opts.Preset = synth.Tiny
	}
	return fixture(t, name, func(dir string) error {
		_, err := synth.Qwen35Target(dir, opts, synth.WriteOptions{})
		return err
	})
}

func TestQwen35Smoke(t *testing.T) {
	for name, o := range map[string]synth.Qwen35Options{
		"q35-dense": {Seed: 1}, "q35-moe-mtp-wrap": {Seed: 2, MoE: true, MTP: 1, Wrapper: true},
	} {
		p, out := convertTo(t, qwen35Fixture(t, name, o), Options{})
		t.Log(p.Notes, p.Dropped, p.Size)
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if probs := lint.Check(f); len(probs) != 0 {
			t.Errorf("inspect --check: %v", probs)
		}
	}
}
