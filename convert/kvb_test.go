package convert

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/safetensors"
)

// TestKVBSplitElementwise walks every element of every kv_b_proj (source row-major
// [heads*(nope+v), r_kv]) forward, and checks that it lands at the ggml coordinate the spec
// gives: rows j < nope of head h go to attn_k_b (j, r, h) of {nope, r_kv, heads}, the others
// to attn_v_b (r, j-nope, h) of {r_kv, v, heads}. Every output element must be hit exactly
// once. The tiny fixtures have nope != r_kv != v, so a transposition cannot pass.
func TestKVBSplitElementwise(t *testing.T) {
	for _, dir := range []string{baseTarget(t), baseDraft(t)} {
		_, out := convertTo(t, dir, Options{})
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ck, err := safetensors.OpenCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		arch := f.Architecture()
		heads := mustU32(t, f, arch+".attention.head_count")
		rkv := mustU32(t, f, arch+".attention.kv_lora_rank")
		kmla := mustU32(t, f, arch+".attention.key_length_mla")
		rope := mustU32(t, f, arch+".rope.dimension_count")
		v := mustU32(t, f, arch+".attention.value_length_mla")
		nope := kmla - rope
		if nope == rkv || rkv == v || nope == v {
			t.Fatalf("fixture dims nope %d, r_kv %d, v %d are not distinct", nope, rkv, v)
		}
		layers := mustU32(t, f, arch+".block_count")
		for l := range layers {
			src := fmt.Sprintf("layers.%d.self_attn.kv_b_proj.weight", l)
			if arch == "deepseek2" {
				src = "model." + src
			}
			ti, ok := ck.Tensor(src)
			if !ok {
				t.Fatalf("%s: no %s", dir, src)
			}
			kv, err := ck.TensorData(ti)
			if err != nil {
				t.Fatal(err)
			}
			kb := tensorBytes(t, f, fmt.Sprintf("blk.%d.attn_k_b.weight", l))
			vb := tensorBytes(t, f, fmt.Sprintf("blk.%d.attn_v_b.weight", l))
			hitK := make([]int, len(kb)/2)
			hitV := make([]int, len(vb)/2)
			for h := range heads {
				for row := range nope + v {
					for r := range rkv {
						s := ((h*(nope+v) + row) * rkv) + r
						want := binary.LittleEndian.Uint16(kv[2*s:])
						var got uint16
						if row < nope {
							o := row + nope*(r+rkv*h)
							got = binary.LittleEndian.Uint16(kb[2*o:])
							hitK[o]++
						} else {
							o := r + rkv*((row-nope)+v*h)
							got = binary.LittleEndian.Uint16(vb[2*o:])
							hitV[o]++
						}
						if got != want {
							t.Fatalf("%s layer %d head %d row %d col %d: got %#04x, want %#04x", arch, l, h, row, r, got, want)
						}
					}
				}
			}
			for _, hits := range [][]int{hitK, hitV} {
				for i, n := range hits {
					if n != 1 {
						t.Fatalf("%s layer %d: output element %d written %d times", arch, l, i, n)
					}
				}
			}
		}
	}
}

func mustU32(t *testing.T, f *gguf.File, key string) uint32 {
	t.Helper()
	v, err := f.Uint32(key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func tensorBytes(t *testing.T, f *gguf.File, name string) []byte {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	if ti.Type != gguf.TypeBF16 {
		t.Fatalf("%s is %s, want BF16", name, ti.Type)
	}
	b, err := f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
