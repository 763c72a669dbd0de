package kimik3

import "testing"

// TestSeqStateBytesK3: at Kimi-K3's shapes (93 blocks, MLA iff (i+1) % 4 == 0 or i == 92, 96
// KDA heads of 128, conv 4) one sequence's recurrent state is 69 x (3 x 3 x 12288 + 96 x
// 128^2) floats = 443.1 MiB, the figure of target-kimi-k3.md section 0.
func TestSeqStateBytesK3(t *testing.T) {
	c := Config{K3: true, NLayer: 93, NHead: 96, DKDA: 128, ConvK: 4}
	for i := range 93 {
		c.MLA = append(c.MLA, (i+1)%4 == 0 || i == 92)
	}
	if kda, mlas := c.Layers(); kda != 69 || mlas != 24 {
		t.Fatalf("%d KDA and %d MLA blocks, want 69 and 24", kda, mlas)
	}
	const want = 4 * 69 * (3*3*12288 + 96*128*128)
	if got := c.SeqStateBytes(); got != want {
		t.Fatalf("SeqStateBytes = %d, want %d", got, want)
	}
	if mib := float64(c.SeqStateBytes()) / (1 << 20); mib < 443.05 || mib > 443.15 {
		t.Fatalf("%.2f MiB, want 443.1", mib)
	}
}
