package rollback

import "testing"

// TestStateSlotsPlan checks the layout of a 16-row forward and the replays of its
// rollbacks against hand-derived values: the checkpoint rows (i*16/(ck+1)), the slots (the
// pre-forward one kept, the others distinct), and the longest replay the documentation
// states for each count (15, 7, 5, 3), with a = 0 and a = a checkpoint's row free.
func TestStateSlotsPlan(t *testing.T) {
	for _, c := range []struct {
		ck      int
		Rows    []int // kept states' rows, pre-forward first
		longest int
	}{{0, []int{0}, 15}, {1, []int{0, 8}, 7}, {2, []int{0, 5, 10}, 5}, {3, []int{0, 4, 8, 12}, 3}} {
		s := NewSlots(c.ck, 64)
		s.Plan(3) // a first forward moves the current slot away from 0
		s.Rollback(1)
		before := s.cur
		from := s.Plan(16)
		if from != before {
			t.Fatalf("ck %d: forward from slot %d, current was %d", c.ck, from, before)
		}
		if len(s.bases) != len(c.Rows) {
			t.Fatalf("ck %d: kept states %v, want rows %v", c.ck, s.bases, c.Rows)
		}
		used := map[int]bool{s.final: true}
		for i, b := range s.bases {
			if b.Rows != c.Rows[i] || used[b.Slot] || b.Slot < 0 || b.Slot >= s.N() {
				t.Fatalf("ck %d: kept states %v (final %d), want rows %v in distinct slots", c.ck, s.bases, s.final, c.Rows)
			}
			used[b.Slot] = true
			if i > 0 && s.row[b.Rows-1] != b.Slot {
				t.Fatalf("ck %d: row %d's state goes to slot %d, not its checkpoint's %d", c.ck, b.Rows-1, s.row[b.Rows-1], b.Slot)
			}
		}
		for r := range 16 {
			isCk := false
			for _, b := range s.bases[1:] {
				isCk = isCk || b.Rows == r+1
			}
			if !isCk && s.row[r] != s.final {
				t.Fatalf("ck %d: row %d's state goes to slot %d, want the final %d", c.ck, r, s.row[r], s.final)
			}
		}
		longest := 0
		for a := 15; a >= 0; a-- {
			k, replay := s.Rollback(a)
			if k.Rows+replay != a || replay < 0 {
				t.Fatalf("ck %d: rollback to %d: from row %d + %d rows", c.ck, a, k.Rows, replay)
			}
			want := s.final
			if replay == 0 {
				want = k.Slot
			}
			if s.cur != want {
				t.Fatalf("ck %d: rollback to %d leaves slot %d current, want %d", c.ck, a, s.cur, want)
			}
			longest = max(longest, replay)
			for _, r := range c.Rows {
				if r == a && replay != 0 {
					t.Fatalf("ck %d: rollback to kept row %d replays %d rows", c.ck, a, replay)
				}
			}
		}
		if longest != c.longest {
			t.Fatalf("ck %d: longest replay %d rows, want %d", c.ck, longest, c.longest)
		}
	}
}
