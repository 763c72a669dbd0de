package main

import (
	"slices"
	"testing"
)

// TestMetric reads the values of one unit from go test -bench output, in order, and only from
// the named benchmark's result lines.
func TestMetric(t *testing.T) {
	out := `goos: linux
BenchmarkTargetDecode/threads=1-2   100   11000000 ns/op   31.2 GB/s   0.87 ratio-to-read   342.2 weight-MB/tok
BenchmarkTargetDecode/threads=2-2   100    7000000 ns/op   48.0 GB/s   0.67 ratio-to-read   342.2 weight-MB/tok
BenchmarkVerify8/threads=1-2        100   13000000 ns/op   1.242 cost-vs-1-row
BenchmarkVerify8/threads=2-2        100    8000000 ns/op   1.185 cost-vs-1-row
PASS
`
	if got := metric(out, "BenchmarkTargetDecode", "ratio-to-read"); !slices.Equal(got, []float64{0.87, 0.67}) {
		t.Errorf("decode ratios %v", got)
	}
	if got := metric(out, "BenchmarkVerify8", "cost-vs-1-row"); !slices.Equal(got, []float64{1.242, 1.185}) {
		t.Errorf("verify costs %v", got)
	}
	if got := metric(out, "BenchmarkVerify8", "ratio-to-read"); len(got) != 0 {
		t.Errorf("a unit of another benchmark read as %v", got)
	}
}

func TestMet(t *testing.T) {
	atLeast := func(v float64) bool { return v >= 0.85 }
	for _, c := range []struct {
		v    []float64
		want string
	}{{[]float64{0.87, 0.9}, "yes"}, {[]float64{0.87, 0.67}, "in part"}, {[]float64{0.5}, "no"}, {nil, "-"}} {
		if got := met(c.v, atLeast); got != c.want {
			t.Errorf("met(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestFind reads the ratios the full-size scripts print.
func TestFind(t *testing.T) {
	if v := find("  convert / cp time                  0.62 x  (goal: <= 1.15)\n", `convert / cp time\s+([0-9.]+) x`); v != 0.62 {
		t.Errorf("convert / cp %v", v)
	}
	if v := find("block / stream, median of the 7 pairs: 1.11x (pairs: 1.10 1.12)\n", `block / stream, median of the \d+ pairs: ([0-9.]+)x`); v != 1.11 {
		t.Errorf("k3-full %v", v)
	}
}
