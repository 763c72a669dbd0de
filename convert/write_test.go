package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/atomicfile"
)

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestWriteFailureLeavesNothing: a write failing mid-way (here a disk-full error injected
// at the 10th tensor) returns a clear error and leaves neither the output nor a temporary
// file, for single files and split sets.
func TestWriteFailureLeavesNothing(t *testing.T) {
	p, err := NewPlan(baseTarget(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	victim := p.Tensors[10].Name
	testHookChunk = func(name string) error {
		if name == victim {
			return syscall.ENOSPC
		}
		return nil
	}
	defer func() { testHookChunk = nil }()
	for _, opt := range []WriteOptions{{}, {SplitMaxTensors: 7}} {
		dir := t.TempDir()
		_, err := p.Write(filepath.Join(dir, "out.gguf"), opt)
		if err == nil {
			t.Fatal("no error")
		}
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), victim) {
			t.Errorf("error %q does not explain the full disk and name %s", err, victim)
		}
		if ents := dirEntries(t, dir); len(ents) != 0 {
			t.Errorf("left behind: %v", ents)
		}
	}
}

func TestRefuseOverwrite(t *testing.T) {
	p, err := NewPlan(baseTarget(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out := filepath.Join(t.TempDir(), "out.gguf")
	if err := os.WriteFile(out, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(out, WriteOptions{}); !errors.Is(err, atomicfile.ErrExists) {
		t.Fatalf("got %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "precious" {
		t.Fatal("existing file was modified")
	}
	if ents := dirEntries(t, filepath.Dir(out)); len(ents) != 1 {
		t.Errorf("directory holds %v", ents)
	}
	if _, err := p.Write(out, WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	rep, err := p.Verify(out, nil)
	if err != nil || !rep.OK() {
		t.Fatalf("%v %v", err, rep.Verdict())
	}
}

// TestSplit writes gguf-split shards and checks them: names, split keys, every tensor whole
// in one shard, and Verify through the set opened as one model.
func TestSplit(t *testing.T) {
	p, err := NewPlan(baseTarget(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dir := t.TempDir()
	paths, err := p.Write(filepath.Join(dir, "t.gguf"), WriteOptions{SplitMaxBytes: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 3 {
		t.Fatalf("%d shards", len(paths))
	}
	n := len(paths)
	for i, path := range paths {
		if want := filepath.Join(dir, gguf.SplitPath("t", i, n)); path != want {
			t.Errorf("shard %d is %s, want %s", i, path, want)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		var largest int64
		for _, tt := range p.Tensors {
			largest = max(largest, tt.Bytes)
		}
		// The data limit (or one tensor larger than it, alone in its shard) plus a small header.
		if i > 0 && st.Size() > max(100_000, largest+32)+4096 {
			t.Errorf("shard %d is %d bytes", i, st.Size())
		}
	}
	rep, err := p.Verify(paths[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Tensors != len(p.Tensors) {
		t.Fatal(rep.Verdict())
	}
	f, err := gguf.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if c, err := f.Uint16(gguf.KeySplitCount); err != nil || int(c) != n {
		t.Errorf("split.count %d %v, want %d", c, err, n)
	}
}

// TestVerifyDetectsCorruption flips one byte of a tensor and one metadata value.
func TestVerifyDetectsCorruption(t *testing.T) {
	p, out := convertTo(t, baseDraft(t), Options{})
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("blk.1.attn_k_b.weight")
	off := ti.AbsOffset + 5
	f.Close()
	fh, err := os.OpenFile(out, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	fh.ReadAt(b, off)
	b[0] ^= 0x40
	fh.WriteAt(b, off)
	fh.Close()
	rep, err := p.Verify(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(rep.Verdict(), "blk.1.attn_k_b.weight: sha256") {
		t.Errorf("corruption not reported: %s", rep.Verdict())
	}
	// A plan whose metadata differs from the file.
	p.Meta[2] = gguf.KV{Key: "general.name", Value: gguf.Str("someone-else")}
	rep, _ = p.Verify(out, nil)
	if !strings.Contains(rep.Verdict(), "key general.name") {
		t.Errorf("metadata mismatch not reported: %s", rep.Verdict())
	}
	// And a lint hook's findings are reported.
	rep, _ = p.Verify(out, func(*gguf.File) []string { return []string{"bad thing"} })
	if rep.Lint != 1 || !strings.Contains(rep.Verdict(), "lint: bad thing") {
		t.Errorf("lint findings not reported: %s", rep.Verdict())
	}
}

// TestOutputTypes: norms, 1-D tensors, the router and biases stay F32 whatever --outtype
// says; Q8_0 falls back to F16 (with a note) where rows are not a multiple of 32.
func TestOutputTypes(t *testing.T) {
	for _, ot := range []OutType{BF16, F16, F32, Q8_0} {
		p, err := NewPlan(baseTarget(t), Options{OutType: ot})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range p.Tensors {
			f32 := len(tt.Dims) == 1 || strings.Contains(tt.Name, "norm") || strings.Contains(tt.Name, "ffn_gate_inp") || strings.HasSuffix(tt.Name, ".bias")
			want := ot.GGML()
			if f32 {
				want = gguf.TypeF32
			} else if ot == Q8_0 && tt.Dims[0]%32 != 0 {
				want = gguf.TypeF16
			}
			if tt.Type != want {
				t.Errorf("%s %s: %s, want %s", ot, tt.Name, tt.Type, want)
			}
		}
		if want := map[OutType]int64{BF16: 32, F16: 1, F32: 0, Q8_0: 7}[ot]; metaMap(p.Meta)["general.file_type"] != fmt.Sprint("u32 ", want) {
			t.Errorf("%s: general.file_type %s", ot, metaMap(p.Meta)["general.file_type"])
		}
		p.Close()
	}
}
