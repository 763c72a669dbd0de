package speculative

import (
	"fmt"
	"math"
)

// Params says how a logit row becomes the distribution that is sampled from. The target rows
// and the draft rows of one run must use the same Params, or verification is not lossless.
type Params struct {
	// Temperature divides the logits before the softmax; 0 means greedy (one-hot argmax).
	Temperature float64
	// TopK keeps only the TopK highest logits; 0 turns it off.
	TopK int
	// TopP keeps the smallest set of highest-probability tokens whose mass reaches TopP;
	// 0 or 1 turns it off.
	TopP float64
}

// Greedy reports whether p means deterministic argmax decoding.
func (p Params) Greedy() bool { return p.Temperature == 0 }

// Validate reports the first field of p that is out of range: Temperature must be finite and
// >= 0, TopK >= 0, TopP in [0, 1]. Probs panics on Params that fail Validate, so a command
// line front end should call it on user input first.
func (p Params) Validate() error {
	if math.IsNaN(p.Temperature) || math.IsInf(p.Temperature, 0) || p.Temperature < 0 {
		return fmt.Errorf("speculative: temperature %v: must be a finite number >= 0", p.Temperature)
	}
	if p.TopK < 0 {
		return fmt.Errorf("speculative: top-k %d: must be >= 0 (0 = off)", p.TopK)
	}
	if math.IsNaN(p.TopP) || p.TopP < 0 || p.TopP > 1 {
		return fmt.Errorf("speculative: top-p %v: must be in [0, 1] (0 or 1 = off)", p.TopP)
	}
	return nil
}

// topPActive reports whether the nucleus filter changes anything.
func (p Params) topPActive() bool { return p.TopP > 0 && p.TopP < 1 }
