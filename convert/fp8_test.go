package convert

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
)

// TestFP8EndToEnd converts an FP8 target (16x16 scale blocks, cropped at the edges of the
// tiny matrices) and checks attn_q_b and attn_k_b of layer 0 element by element against
// an independent dequantization: BF16(RNE(e4m3(w) * scale_inv[row/16][col/16])).
func TestFP8EndToEnd(t *testing.T) {
	dir := targetFixture(t, "target-fp8", synth.TargetOptions{Seed: 5, FP8: true, FP8Block: 16}, "")
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
	load := func(name string) ([]byte, []int64, string) {
		ti, ok := ck.Tensor(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		b, err := ck.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		return b, ti.Shape, string(ti.Dtype)
	}
	// dequant returns the expected BF16 of source element (row, col).
	dequant := func(w []byte, shape []int64, sc []byte, r, c int64) uint16 {
		scols := (shape[1] + 15) / 16
		s := math.Float32frombits(binary.LittleEndian.Uint32(sc[4*((r/16)*scols+c/16):]))
		return bf16RNE(f8Ref(w[r*shape[1]+c]) * s)
	}
	w, shape, dt := load("model.layers.0.self_attn.q_b_proj.weight")
	sc, _, sdt := load("model.layers.0.self_attn.q_b_proj.weight_scale_inv")
	if dt != "F8_E4M3" || sdt != "F32" {
		t.Fatalf("fixture dtypes %s / %s", dt, sdt)
	}
	got := tensorBytes(t, f, "blk.0.attn_q_b.weight")
	for r := range shape[0] {
		for c := range shape[1] {
			// GGUF {in, out}: element (c, r) at c + in*r, the same bytes order as HF [out, in].
			g := binary.LittleEndian.Uint16(got[2*(r*shape[1]+c):])
			if want := dequant(w, shape, sc, r, c); g != want {
				t.Fatalf("attn_q_b (%d,%d): got %#04x, want %#04x", r, c, g, want)
			}
		}
	}
	// kv_b is FP8 too: the split must dequantize with the scale of the source position.
	w, shape, _ = load("model.layers.0.self_attn.kv_b_proj.weight")
	sc, _, _ = load("model.layers.0.self_attn.kv_b_proj.weight_scale_inv")
	kb := tensorBytes(t, f, "blk.0.attn_k_b.weight")
	ti, _ := f.Tensor("blk.0.attn_k_b.weight")
	nope, rkv, heads := int64(ti.Dims[0]), int64(ti.Dims[1]), int64(ti.Dims[2])
	per := shape[0] / heads // nope + v rows per head
	for h := range heads {
		for j := range nope {
			for r := range rkv {
				g := binary.LittleEndian.Uint16(kb[2*(j+nope*(r+rkv*h)):])
				if want := dequant(w, shape, sc, h*per+j, r); g != want {
					t.Fatalf("attn_k_b (%d,%d,%d): got %#04x, want %#04x", j, r, h, g, want)
				}
			}
		}
	}
}
