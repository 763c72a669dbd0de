package kernels

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
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
	// The generator runs on the go command's own machine: under cross-testing (GOARCH=arm64
	// with -exec qemu-aarch64) the inherited GOOS/GOARCH would build a generator that cannot
	// run here.
	host, err := exec.Command(gobin, "env", "GOHOSTOS", "GOHOSTARCH").Output()
	if err != nil {
		t.Fatalf("go env GOHOSTOS GOHOSTARCH: %v", err)
	}
	hs := strings.Fields(string(host))
	if len(hs) != 2 {
		t.Fatalf("go env GOHOSTOS GOHOSTARCH printed %q", host)
	}
	dir := testdir.New(t)
	cmd := exec.Command(gobin, "run", "./_generate", "-dir", dir)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOOS="+hs[0], "GOARCH="+hs[1])
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
