//go:build !amd64 || purego

package mla

// useAsm is false: only the portable kernels exist on this build.
var useAsm = false

func dotAsm(a, b []float32) float32 { return dotGeneric(a, b) }

func axpyAsm(y []float32, alpha float32, x []float32) { axpyGeneric(y, alpha, x) }
