package runtime

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Non-finite values: the design.
//
// A model whose weights hold NaN or Inf (or whose activations overflow) produces NaN or Inf
// somewhere in a forward, and it spreads to everything after it. Checking every operation's
// output on every forward would find the first one, but it costs a pass over every
// intermediate row; the decode loop instead checks only what a forward returns (the
// target's logit rows it uses, the hidden-state rows it passes on, the draft's context rows,
// block hidden rows and confidences; the drafter refuses a logit row it cannot draw from, and
// only then are the block's logit rows checked), which is a small fraction of a forward's
// work. When one of those holds a non-finite
// value, the forward is run once more with a Probe that checks the output of every operation
// in order (a model implementing Probed), and the error names the model file, the decoder
// layer, the operation and the weight tensors it reads: a diagnostic re-run, paid only on
// the way out.

// NonFiniteError reports the first NaN or Inf a model produced. errors.Is(err,
// ErrNonFinite) holds for it.
type NonFiniteError struct {
	File  string // the model file
	Stage string // what was being computed: "target forward", "draft block", "draft context", ...
	// Layer is the decoder layer of Op (-1: outside the decoder layers, or not located).
	Layer int
	// Op is the operation whose output first held the value ("" when the diagnostic re-run
	// could not locate it); Tensor names the weight tensors it reads.
	Op, Tensor string
	// Row and Index locate the value in that output (row of the batch, entry of the row).
	Row, Index int
	Value      float32
}

// ErrNonFinite is the sentinel every NonFiniteError matches.
var ErrNonFinite = errors.New("non-finite value")

// Error names the file, the stage, and where the value first appeared.
func (e *NonFiniteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s produced %v", e.File, e.Stage, e.Value)
	if e.Op != "" {
		b.WriteString(" first in ")
		if e.Layer >= 0 {
			fmt.Fprintf(&b, "layer %d, ", e.Layer)
		}
		b.WriteString(e.Op)
		if e.Tensor != "" {
			fmt.Fprintf(&b, " (%s)", e.Tensor)
		}
	}
	fmt.Fprintf(&b, ", row %d entry %d: the model's weights hold NaN/Inf or overflow float32 (inspect --check --data scans them)", e.Row, e.Index)
	return b.String()
}

// Is makes errors.Is(err, ErrNonFinite) true.
func (e *NonFiniteError) Is(target error) bool { return target == ErrNonFinite }

// Probe checks the output of every operation of a forward, for the diagnostic re-run of one
// that produced a non-finite value; it keeps the first failure. A nil *Probe checks nothing
// (the models hold a nil one outside diagnostics, so a normal forward pays one comparison
// per operation).
type Probe struct {
	// First is the first non-finite output found (File and Stage are left to the caller).
	First *NonFiniteError
}

// Check looks for NaN or Inf in v, rows rows of an operation's output, unless an earlier
// check already found one. op names the operation; tensor the weights it reads, where "{i}" is
// replaced by layer (the block index of gguf/schema's names).
func (p *Probe) Check(layer int, op, tensor string, v []float32, rows int) {
	if p == nil || p.First != nil {
		return
	}
	i := nonFinite(v)
	if i < 0 {
		return
	}
	w := len(v)
	if rows > 0 {
		w = max(len(v)/rows, 1)
	}
	tensor = strings.ReplaceAll(tensor, "{i}", fmt.Sprint(layer))
	p.First = &NonFiniteError{Layer: layer, Op: op, Tensor: tensor, Row: i / w, Index: i % w, Value: v[i]}
}

// Probed is implemented by models that can run their next forward under a Probe: SetProbe(p)
// checks every operation of the forwards that follow, SetProbe(nil) stops.
type Probed interface {
	SetProbe(p *Probe)
}

// nonFinite returns the index of the first NaN or ±Inf in v, or -1.
func nonFinite(v []float32) int {
	for i, x := range v {
		if x-x != 0 { // NaN or ±Inf; finite x gives exactly 0
			return i
		}
	}
	return -1
}

// NonFiniteIndex returns the index of the first NaN or ±Inf in v, or -1.
func NonFiniteIndex(v []float32) int { return nonFinite(v) }

// nonFiniteLogits is nonFinite for logit rows, where -Inf is a legitimate mask: the first NaN
// or +Inf, or a row with no entry above -Inf.
func nonFiniteLogits(v []float32) int {
	finite := false
	for i, x := range v {
		if x != x || x > math.MaxFloat32 {
			return i
		}
		if !math.IsInf(float64(x), -1) {
			finite = true
		}
	}
	if !finite && len(v) > 0 {
		return 0
	}
	return -1
}

// modelName is the file a model was loaded from, for messages.
func modelName(m any, fallback string) string {
	if n, ok := m.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fallback
}
