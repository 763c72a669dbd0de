// Package rollback holds the rollback bookkeeping the recurrent targets share
// (runtime/qwen35's Gated DeltaNet blocks, runtime/kimik3's KDA blocks): which state slot
// every row of a verify forward writes, which states a forward keeps, and where a rollback
// to an accepted row starts its replay from.
package rollback

// DefaultCheckpoints is the number of mid-batch states a forward of n rows keeps besides
// the state before it (rows 0) and its final state (rows n): after rows i*n/(ck+1), i = 1..ck
// (those strictly between 0 and n). A rollback to row a replays the rows from the nearest
// kept state at or below a, so the longest replay of a 16-row verify forward is 15 rows with
// none, 7 with one (at row 8), 5 with two (5, 10), 3 with three (4, 8, 12); each checkpoint
// costs every forward one more state write and every recurrent block one more state of
// memory. Two measured best on qwen35's 4B-width layer (its BenchmarkRollback: the worst
// rollback 0.034 of a plain step with one, 0.026 with two; see docs/kernels.md).
const DefaultCheckpoints = 2

// Slots is the bookkeeping of a target's recurrent state slots, the same for every
// recurrent block: N() = ck+2 states, one current, the others holding the states a rollback
// starts from. The zero value is not usable: make one with NewSlots.
type Slots struct {
	ck    int    // checkpoints per forward
	cur   int    // slot of the current state
	final int    // slot the last forward's final row went to; replays write here
	bases []Kept // the states of the last forward a rollback starts from, by rows
	row   []int  // per row of a forward being planned, the slot its state goes to
	free  []int  // scratch: the slots other than cur
}

// Kept is a state of the last forward: the one in slot Slot, after its first Rows rows.
type Kept struct{ Slot, Rows int }

// NewSlots returns the slots of ck checkpoints per forward of at most maxBatch rows, slot 0
// current.
func NewSlots(ck, maxBatch int) Slots {
	s := Slots{ck: ck, bases: make([]Kept, 0, ck+1), row: make([]int, maxBatch), free: make([]int, 0, ck+2)}
	s.Reset()
	return s
}

// N returns the number of state slots a recurrent block holds.
func (s *Slots) N() int { return s.ck + 2 }

// Cur returns the slot of the current state.
func (s *Slots) Cur() int { return s.cur }

// Final returns the slot the last forward's final row went to (where replays write).
func (s *Slots) Final() int { return s.final }

// Kept returns the states of the last forward a rollback can start from, the pre-forward
// one first, by rows (shared: valid until the next Plan or Reset).
func (s *Slots) Kept() []Kept { return s.bases }

// Row returns, per row of the last planned forward, the slot its state goes to (shared:
// valid until the next Plan).
func (s *Slots) Row() []int { return s.row }

// Reset makes slot 0 current, with nothing to return to but itself.
func (s *Slots) Reset() {
	s.cur, s.final = 0, 1
	s.bases = append(s.bases[:0], Kept{0, 0})
}

// Plan lays out a forward of n rows (1..maxBatch) from the current state: the state after
// row t goes to slot Row()[t], the checkpoints' rows to their own slots and every other row
// to the final slot (in place). It returns the slot the forward starts from and makes the
// final slot current.
func (s *Slots) Plan(n int) (from int) {
	from = s.cur
	s.free = s.free[:0]
	for i := range s.N() {
		if i != from {
			s.free = append(s.free, i)
		}
	}
	s.bases = append(s.bases[:0], Kept{from, 0})
	next := 0
	for i := 1; i <= s.ck; i++ {
		if m := i * n / (s.ck + 1); m > s.bases[len(s.bases)-1].Rows && m < n {
			s.bases = append(s.bases, Kept{s.free[next], m})
			next++
		}
	}
	s.final = s.free[next]
	b := 1
	for t := range n {
		s.row[t] = s.final
		if b < len(s.bases) && s.bases[b].Rows == t+1 {
			s.row[t] = s.bases[b].Slot
			b++
		}
	}
	s.cur = s.final
	return from
}

// Rollback chooses how to reach the state after row a of the last forward (0 <= a < its
// rows): the kept state at or below a nearest to it, and the rows to replay from there
// (replay 0: that state is the one wanted and becomes current, no copy; otherwise the
// replay goes to the final slot, which becomes current). The kept states stay valid, so a
// later rollback to a lower row of the same forward works the same way.
func (s *Slots) Rollback(a int) (from Kept, replay int) {
	from = s.bases[0]
	for _, b := range s.bases[1:] {
		if b.Rows <= a {
			from = b
		}
	}
	if replay = a - from.Rows; replay == 0 {
		s.cur = from.Slot
	} else {
		s.cur = s.final
	}
	return from, replay
}

// ConvWindow writes into dst the conv window (w rows of c channels, oldest first) after the
// first a rows of a forward that started from window old and read inputs x (rows of c): the
// last w rows of (old, x_0 .. x_{a-1}).
func ConvWindow(dst, old, x []float32, w, c, a int) {
	for j := range w {
		src := j + a // index in the concatenation
		if src < w {
			copy(dst[j*c:(j+1)*c], old[src*c:(src+1)*c])
		} else {
			copy(dst[j*c:(j+1)*c], x[(src-w)*c:(src-w+1)*c])
		}
	}
}
