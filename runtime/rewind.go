package runtime

import (
	"errors"
	"fmt"
)

// ErrRewind is wrapped by the error of a Target.Rewind to a position outside its last
// forward.
var ErrRewind = errors.New("rewind outside the last forward")

// RewindWindow is the bookkeeping of Target.Rewind's contract, shared by the targets: the
// positions [From, To] a target can return to. A target calls Forwarded after each
// successful Forward and Reset when it is emptied, and checks a Rewind with Check.
type RewindWindow struct {
	From, To int
}

// Forwarded records a forward of the rows [from, to): any position from from to to can be
// returned to.
func (w *RewindWindow) Forwarded(from, to int) { w.From, w.To = from, to }

// Reset records an empty target.
func (w *RewindWindow) Reset() { w.From, w.To = 0, 0 }

// Check returns an error wrapping ErrRewind unless n lies in the window, and narrows the
// window to [From, n] when it does. name names the target in the error.
func (w *RewindWindow) Check(name string, n int) error {
	if n < w.From || n > w.To {
		return fmt.Errorf("%s: rewind to %d positions: %w [%d, %d]", name, n, ErrRewind, w.From, w.To)
	}
	w.To = n
	return nil
}
