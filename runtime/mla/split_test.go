package mla

import "testing"

// TestSplit checks that the worker ranges cover every head once, in order, and are as even
// as whole heads allow (sizes differ by at most one).
func TestSplit(t *testing.T) {
	for h := 1; h <= 70; h++ {
		for procs := 1; procs <= 6; procs++ {
			s := &scratch{nHead: h}
			s.split(procs)
			b := s.bounds
			if len(b) != min(procs, h)+1 || b[0] != 0 || b[len(b)-1] != h {
				t.Fatalf("heads %d procs %d: bounds %v", h, procs, b)
			}
			lo, hi := h, 0
			for w := 1; w < len(b); w++ {
				lo, hi = min(lo, b[w]-b[w-1]), max(hi, b[w]-b[w-1])
			}
			if lo < 1 || hi-lo > 1 {
				t.Fatalf("heads %d procs %d: bounds %v", h, procs, b)
			}
		}
	}
}
