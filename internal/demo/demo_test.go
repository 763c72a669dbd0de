package demo

import (
	"bytes"
	"math"
	"os"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// TestAssetsReproducible rebuilds the demo pair from DefaultRecipe (synth -> convert -> fit ->
// convert) and checks that the embedded, compressed files hold exactly those bytes.
// It is skipped under the race detector (a minute there); make test runs it separately.
func TestAssetsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: rebuilding the demo pair takes over a minute; `go test` without -short (make test) runs it")
	}
	if raceEnabled {
		t.Skip("rebuilding the demo pair under -race is too slow; `make test` runs this test without -race")
	}
	p, err := Build(t.TempDir(), DefaultRecipe)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ which, path string }{{"target", p.TargetPath}, {"draft", p.DraftPath}} {
		want, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decompress(c.which)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("embedded %s (%d bytes) differs from a rebuild (%d bytes): run make demo-assets", c.which, len(got), len(want))
		}
	}
	if p.Fit.Rank != 64 || p.Fit.Energy < 0.99 {
		t.Fatalf("fit rank %d energy %.3f", p.Fit.Rank, p.Fit.Energy)
	}
}

// TestEmbeddedPairDrafts runs the embedded pair on prompts the fit never saw and checks that
// the draft really drafts (greedy tau >= 3 at block size 7) while greedy output stays
// identical to the target's own.
func TestEmbeddedPairDrafts(t *testing.T) {
	dir := t.TempDir()
	tp, dp, err := Extract(dir)
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
	tg, err := deepseek2.Load(tf, runtime.Options{Context: 256, Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	d, err := dflashmla.Load(df, tg, runtime.Options{Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Config.BlockSize != 7 {
		t.Fatalf("demo draft block size %d, want 7", d.Config.BlockSize)
	}
	tok, err := runtime.LoadTokenizer(tf)
	if err != nil {
		t.Fatal(err)
	}
	g := &runtime.Generator{Target: tg, Draft: d, EOS: runtime.EOS(tf)}
	var st speculative.Stats
	for _, prompt := range Prompts {
		ids := tok.Encode(prompt)
		plain, err := g.Plain(ids, 48)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := g.Speculative(ids, 48)
		if err != nil {
			t.Fatal(err)
		}
		if len(plain.Tokens) != len(spec.Tokens) {
			t.Fatalf("%q: plain %d tokens, speculative %d", prompt, len(plain.Tokens), len(spec.Tokens))
		}
		for i := range plain.Tokens {
			if plain.Tokens[i] != spec.Tokens[i] {
				t.Fatalf("%q: token %d differs: plain %v spec %v", prompt, i, plain.Tokens, spec.Tokens)
			}
		}
		st.Add(&spec.Stats)
	}
	if tau := st.Tau(); tau < 3 || math.IsNaN(tau) {
		t.Fatalf("greedy tau %.2f < 3 on the demo prompts (stats %+v)", tau, st)
	}
	t.Logf("tau %.2f, acceptance per position %.2f", st.Tau(), st.PerPositionRates())
}
