package runtime

import (
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// TestStandaloneHead checks the stand-in head of a draft loaded without its target: a width
// other than the draft's is refused naming the file, and the default context is set.
func TestStandaloneHead(t *testing.T) {
	m, err := kernels.NewMat(kernels.F32, 3, 4, make([]byte, 3*4*4))
	if err != nil {
		t.Fatal(err)
	}
	var opt Options
	if _, err := StandaloneHead("d.gguf", m, 5, &opt); err == nil || !strings.Contains(err.Error(), "d.gguf") || !strings.Contains(err.Error(), "width 4, draft 5") {
		t.Errorf("width mismatch: %v", err)
	}
	h, err := StandaloneHead("d.gguf", m, 4, &opt)
	if err != nil || h == nil || opt.Context != 256 {
		t.Errorf("head %v, err %v, context %d", h, err, opt.Context)
	}
	opt.Context = 64
	if _, err := StandaloneHead("d.gguf", m, 4, &opt); err != nil || opt.Context != 64 {
		t.Errorf("a set context changed to %d (%v)", opt.Context, err)
	}
}
