package drafts

import (
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
)

// TestLowBitHeads: inspect --check warns (a warning, not a failure) when a draft's fc or
// Markov head sits at 4 bits or less, and says nothing at Q5_0 or Q8_0.
func TestLowBitHeads(t *testing.T) {
	warned := func(f *fx.File, name string) (bool, bool) {
		g := parse(t, f)
		for _, p := range Lint(g, Recognize(g), nil) {
			if p.Subject == name && strings.Contains(p.Msg, "4 bits per weight or less") {
				return true, p.Warning
			}
		}
		return false, false
	}
	for _, c := range []struct {
		name string
		typ  gguf.GGMLType
		want bool
	}{
		{"fc.weight", gguf.TypeQ4_0, true},
		{"fc.weight", gguf.TypeIQ4_NL, true},
		{"fc.weight", gguf.TypeMXFP4, true},
		{"fc.weight", gguf.TypeQ5_0, false},
		{"fc.weight", gguf.TypeQ8_0, false},
		{"markov_w1.weight", gguf.TypeQ4_1, true},
		{"markov_w2.weight", gguf.TypeQ4_0, true},
		{"markov_w2.weight", gguf.TypeQ8_0, false},
	} {
		f := fx.Upstream(true)
		if strings.HasPrefix(c.name, "markov") { // rank 6 is no block multiple: widen the table
			f.Drop(c.name)
			f.Add(c.name, 32, fx.Vocab)
		}
		f.Retype(func(n string) bool { return n == c.name }, c.typ)
		got, warn := warned(f, c.name)
		if got != c.want || got && !warn {
			t.Errorf("%s at %v: warned %v (as a warning: %v), want %v", c.name, c.typ, got, warn, c.want)
		}
	}
	// A DFlash draft without heads, its fc at Q4_K's 4-bit neighbour Q4_0: the same warning.
	f := fx.Upstream(false)
	f.Retype(func(n string) bool { return n == "fc.weight" }, gguf.TypeQ4_0)
	if got, _ := warned(f, "fc.weight"); !got {
		t.Error("DFlash draft: no warning for fc.weight at Q4_0")
	}
}
