package kernels

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestKernelPaths prints which kernel paths this process tested and which it could not, one
// line each on stdout ("kernels: ..."): `make test` shows them (go test hides the output of
// passing tests otherwise).
func TestKernelPaths(t *testing.T) {
	for _, l := range pathNotes() {
		fmt.Println("kernels: " + l)
	}
	if got := cpuPaths()[len(cpuPaths())-1]; got != bestPath() || curPath != bestPath() {
		t.Errorf("default path %v, best %v", curPath, bestPath())
	}
}

// TestGeneratedUpToDate checks that the checked-in assembly and its Go declarations are what
// the generator writes.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		fmt.Println("kernels: no go command in PATH: generated code not compared with the generator")
		t.Skip("no go command in PATH")
	}
	dir := t.TempDir()
	cmd := exec.Command(gobin, "run", "./_generate", "-dir", dir)
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./_generate: %v\n%s", err, out)
	}
	for _, f := range []string{"kernels_amd64.s", "kernels_amd64_gen.go", "deltanet_amd64.s", "deltanet_amd64_gen.go"} {
		want, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output: run go generate ./runtime/kernels", f)
		}
	}
}
