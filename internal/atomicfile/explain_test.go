package atomicfile

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestExplainOSErrors: every error this OS uses for a full disk, a file too large or an
// exceeded quota (Windows has its own codes) gets the clear message and stays matchable.
func TestExplainOSErrors(t *testing.T) {
	for want, errs := range map[string][]error{"no space left": noSpaceErrs, "too large": tooLargeErrs, "quota": quotaErrs} {
		for _, e := range errs {
			got := Explain(&os.PathError{Op: "write", Path: "out é.gguf", Err: e})
			if !strings.Contains(got.Error(), want) || !errors.Is(got, e) {
				t.Errorf("Explain(%v) = %v, want %q", e, got, want)
			}
		}
	}
}
