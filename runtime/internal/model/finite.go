package model

import "github.com/dspark-dev/dspark/runtime"

// CheckContext reports the first non-finite value of the m context rows ctx of the draft in
// file after op (tensor names the weight it applied), as a *runtime.NonFiniteError; nil when
// every value is finite. Every draft checks every injection: a row of the context costs a
// pass over its values beside a product with fc.weight, and a bad row would poison every
// later block.
func CheckContext(file, op, tensor string, ctx []float32, m int) error {
	i := runtime.NonFiniteIndex(ctx)
	if i < 0 {
		return nil
	}
	E := len(ctx) / m
	return &runtime.NonFiniteError{File: file, Stage: "the draft's context injection", Layer: -1,
		Op: op, Tensor: tensor, Row: i / E, Index: i % E, Value: ctx[i]}
}
