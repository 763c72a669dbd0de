package kernels

import "testing"

// TestPathReport: Path names the path each precision runs on and says whether it is
// hardware-accelerated, for every f32 path this machine has (SelectPath switches them).
func TestPathReport(t *testing.T) {
	defer setPath(curPath)()
	for _, p := range cpuPaths() {
		if err := SelectPath(p.String()); err != nil {
			t.Fatal(err)
		}
		f := Path(F32Activations)
		if f.Name != p.String() || f.Accelerated != (p != pathPortable) || f.String() != f.Name {
			t.Errorf("path %v: Path(f32) = %+v", p, f)
		}
		b := Path(BF16Activations)
		if b.Accelerated != (p == pathAVX512 && cpuDot) || (b.Name == "avx512bf16") != b.Accelerated || (!b.Accelerated && b.Name != "portable") {
			t.Errorf("path %v (cpuDot %v): Path(bf16) = %+v", p, cpuDot, b)
		}
		a := Path(BF16AMXActivations)
		if a.Accelerated != amxActive() || (a.Name == "amx") != a.Accelerated || (!a.Accelerated && a.Name != "portable") {
			t.Errorf("path %v: Path(bf16-amx) = %+v", p, a)
		}
	}
	if err := SelectPath("no-such-path"); err == nil {
		t.Error("SelectPath of an unknown path: no error")
	}
}
