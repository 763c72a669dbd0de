package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// TestVersionString: the version line carries the -ldflags version and commit, the target
// and the kernel path of each precision as runtime/kernels reports it.
func TestVersionString(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "9.8.7", "0123456789abcdef0123"
	got := versionString()
	for _, want := range []string{"9.8.7 (commit 0123456789ab,", "f32 " + kernels.Path(kernels.F32Activations).Name + ",",
		"bf16 " + kernels.Path(kernels.BF16Activations).Name + ",", "bf16-amx " + kernels.Path(kernels.BF16AMXActivations).Name + ")"} {
		if !strings.Contains(got, want) {
			t.Errorf("version %q lacks %q", got, want)
		}
	}
	// The flag prints it.
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs([]string{"--version"})
	defer rootCmd.SetArgs(nil)
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "dspark version ") || !strings.Contains(out.String(), "kernels: f32 ") {
		t.Errorf("--version printed %q", out.String())
	}
}
