//go:build !amd64 || purego || noasm

package kernels

import (
	"encoding/binary"
	"unsafe"
)

// useAsm is false: this build has no assembly kernels.
var useAsm = false

// hasAsm reports whether this build and CPU can run the assembly kernels.
func hasAsm() bool { return false }

// panelsAsm is never called without assembly.
func (m *Mat) panelsAsm(dst, x []float32, n, p0, p1 int) { m.panelsGeneric(dst, x, n, p0, p1) }

// implementation names the path MatVec and MatMul take for packed matrices.
func implementation() string { return "portable" }

// readBytes sums n bytes of p as 64-bit words (the benchmarks' bandwidth reference).
func readBytes(p *byte, n int) uint64 {
	b := unsafe.Slice(p, n)
	var s0, s1, s2, s3 uint64
	for i := 0; i+32 <= len(b); i += 32 {
		s0 += binary.LittleEndian.Uint64(b[i:])
		s1 += binary.LittleEndian.Uint64(b[i+8:])
		s2 += binary.LittleEndian.Uint64(b[i+16:])
		s3 += binary.LittleEndian.Uint64(b[i+24:])
	}
	return s0 + s1 + s2 + s3
}

// readStreams reads six streams of n bytes at p, p+stride, ..., p+5*stride.
func readStreams(p *byte, stride int, n int) uint64 {
	b := unsafe.Slice(p, 5*stride+n)
	var s uint64
	for i := 0; i < 6; i++ {
		s += readBytes(&b[i*stride], n)
	}
	return s
}

// fmaLoop runs n iterations of 12 independent 8-wide multiply-adds (192 flops each) in
// portable Go: the arithmetic reference of the benchmarks in this build.
func fmaLoop(n int) {
	var acc [12][8]float32
	for i := 0; i < n; i++ {
		for j := range acc {
			for l := range acc[j] {
				acc[j][l] = float32(acc[j][l]*0.999) + 1
			}
		}
	}
	fmaSink = acc[0][0]
}

// fmaSink keeps fmaLoop's result alive.
var fmaSink float32
