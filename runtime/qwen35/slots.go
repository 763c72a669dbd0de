package qwen35

// checkpoints is the number of mid-batch states a forward of n rows keeps besides the state
// before it (rows 0) and its final state (rows n): after rows i*n/(checkpoints+1), i = 1..
// checkpoints (those strictly between 0 and n). A rollback to row a replays the rows from
// the nearest kept state at or below a, so the longest replay of a 16-row verify forward is
// 15 rows with none, 7 with one (at row 8), 5 with two (5, 10), 3 with three (4, 8, 12);
// each checkpoint costs every forward one more state write and every DeltaNet block one
// more state of memory. Two measured best (BenchmarkRollback: the 4B-width layer's worst
// rollback 0.034 of a plain step with one, 0.026 with two; see docs/kernels.md). Load
// reads it (a variable for the tests and benchmarks that compare the counts).
var checkpoints = 2

// stateSlots is the bookkeeping of the DeltaNet blocks' state slots, the same for every
// block: ck+2 states, one current, the others holding the states a rollback starts from.
type stateSlots struct {
	ck    int    // checkpoints per forward
	cur   int    // slot of the current state
	final int    // slot the last forward's final row went to; replays write here
	bases []kept // the states of the last forward a rollback starts from, by rows
	row   []int  // per row of a forward being planned, the slot its state goes to
	free  []int  // scratch: the slots other than cur
}

// kept is a state of the last forward: the one in slot after its first rows rows.
type kept struct{ slot, rows int }

func newStateSlots(ck, maxBatch int) stateSlots {
	s := stateSlots{ck: ck, bases: make([]kept, 0, ck+1), row: make([]int, maxBatch), free: make([]int, 0, ck+2)}
	s.reset()
	return s
}

// n returns the number of state slots a DeltaNet block holds.
func (s *stateSlots) n() int { return s.ck + 2 }

// reset makes slot 0 current, with nothing to return to but itself.
func (s *stateSlots) reset() {
	s.cur, s.final = 0, 1
	s.bases = append(s.bases[:0], kept{0, 0})
}

// plan lays out a forward of n rows from the current state: the state after row t goes to
// slot row[t], the checkpoints' rows to their own slots and every other row to the final
// slot (in place). It returns the slot the forward starts from and makes the final slot
// current.
func (s *stateSlots) plan(n int) (from int) {
	from = s.cur
	s.free = s.free[:0]
	for i := range s.n() {
		if i != from {
			s.free = append(s.free, i)
		}
	}
	s.bases = append(s.bases[:0], kept{from, 0})
	next := 0
	for i := 1; i <= s.ck; i++ {
		if m := i * n / (s.ck + 1); m > s.bases[len(s.bases)-1].rows && m < n {
			s.bases = append(s.bases, kept{s.free[next], m})
			next++
		}
	}
	s.final = s.free[next]
	b := 1
	for t := range n {
		s.row[t] = s.final
		if b < len(s.bases) && s.bases[b].rows == t+1 {
			s.row[t] = s.bases[b].slot
			b++
		}
	}
	s.cur = s.final
	return from
}

// rollback chooses how to reach the state after row a of the last forward (0 <= a < its
// rows): the kept state at or below a nearest to it, and the rows to replay from there
// (replay 0: that state is the one wanted and becomes current, no copy; otherwise the
// replay goes to the final slot, which becomes current). The kept states stay valid, so a
// later rollback to a lower row of the same forward works the same way.
func (s *stateSlots) rollback(a int) (from kept, replay int) {
	from = s.bases[0]
	for _, b := range s.bases[1:] {
		if b.rows <= a {
			from = b
		}
	}
	if replay = a - from.rows; replay == 0 {
		s.cur = from.slot
	} else {
		s.cur = s.final
	}
	return from, replay
}
