//go:build !amd64 || purego || noasm

package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// cpuDot is false: this build has no AVX512_BF16 kernels.
const cpuDot = false

// cpuPaths lists the paths of this build: the portable code only.
func cpuPaths() []path { return []path{pathPortable} }

// streamPrefetch is the assembly kernels' software prefetch switch; without them it does
// nothing (the tests set it either way on every build).
var streamPrefetch = false

// readSix is readStreams (the portable read) without the assembly kernels.
func readSix(p *byte, stride, n int) uint64 { return readStreams(p, stride, n) }

// The assembly paths are never selected without assembly.
func (m *Mat) panelsAVX2(s *seg, n, p0, p1 int) { m.panelsGeneric(s, n, p0, p1) }
func (m *Mat) panels512(s *seg, n, p0, p1 int)  { m.panelsGeneric(s, n, p0, p1) }
func (m *Mat) panelsDot(s *seg, n, p0, p1 int)  { m.panelsDotGeneric(s, n, p0, p1) }
func (m *Mat) panelsAMX(s *seg, n, p0, p1 int)  { m.panelsAMXGeneric(s, n, p0, p1) }

// roundBulk rounds nothing: this build has no VCVTNEPS2BF16 (roundRow does every value).
func roundBulk(d []uint32, row []float32) int { return 0 }

// amxActive is false: this build has no AMX kernels.
func amxActive() bool { return false }

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

// pathNotes says, per path, whether this process can run it (the lines TestKernelPaths
// prints): only the portable code is built here.
func pathNotes() []string {
	return []string{
		"portable: present (tested)",
		"avx2, avx512, avx512bf16, amx: NOT TESTED: not built (purego, noasm or not amd64)",
	}
}

// The vector kernels' assembly entry points are never called without assembly (vecAsm is
// false); these keep the portable build compiling.
func dotAsm(a, b []float32) float32                   { return dotGeneric(a, b) }
func axpyAsm(y []float32, alpha float32, x []float32) { axpyGeneric(y, alpha, x) }
func dot4Asm(q, rows []float32, stride int, out []float32) {
	for k := range 4 {
		out[k] = dotGeneric(q, rows[k*stride:])
	}
}
func axpyRowsAsm(acc, p, rows []float32, stride int) {
	for t, pt := range p {
		axpyGeneric(acc, pt, rows[t*stride:])
	}
}
func dot3x4Asm(q0, q1, q2, rows []float32, stride int, out []float32) {
	for a, q := range [3][]float32{q0, q1, q2} {
		for r := range 4 {
			out[a*4+r] = dotGeneric(q, rows[r*stride:])
		}
	}
}
func axpy3RowsAsm(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int) {
	axpy3RowsGeneric(acc, n, accStride, p, pStride, nt, rows, stride)
}
func dot6x4Asm512(q *float32, qs int, n int, rows *float32, stride int, out *float32) {
	panic("kernels: dot6x4Asm512 without assembly")
}
func expShiftAsm(x []float32, m float32) { expShiftGeneric(x, m) }

// The AVX-512 kernels of DotNRows and AxpyNRows (never called without assembly).
func dot2x8Asm512(q *float32, qs int, n int, rows *float32, stride int, out *float32, os int) {
	panic(noAsm)
}
func dot4x8Asm512(q *float32, qs int, n int, rows *float32, stride int, out *float32, os int) {
	panic(noAsm)
}
func dot6x8Asm512(q *float32, qs int, n int, rows *float32, stride int, out *float32, os int) {
	panic(noAsm)
}
func axpy1RowsAsm512(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int) {
	panic(noAsm)
}
func axpy2RowsAsm512(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int) {
	panic(noAsm)
}
func axpy3RowsAsm512(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int) {
	panic(noAsm)
}
func axpy4RowsAsm512(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int) {
	panic(noAsm)
}
func axpy5RowsAsm512(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int) {
	panic(noAsm)
}
func axpy6RowsAsm512(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int) {
	panic(noAsm)
}

// noAsm is the panic of an assembly entry point called in a build without assembly.
const noAsm = "kernels: an AVX-512 kernel called without assembly"

func scaleMaxAsm(x []float32, a float32) float32 { return scaleMaxGeneric(x, a) }
func scaleAsm(y []float32, a float32)            { scaleGeneric(y, a) }
func scaleF64Asm(y []float32, s float64)         { scaleF64Generic(y, s) }
func scaleMulAsm(dst, x, w []float32, a float32) { scaleMulGeneric(dst, x, w, a) }

func prefetchRange(p *byte, n int) {}

func siluMulAsm(dst, gate, up []float32) int    { siluMulGeneric(dst, gate, up); return len(gate) }
func siluMulAsm512(dst, gate, up []float32) int { siluMulGeneric(dst, gate, up); return len(gate) }

func expPDAsm(dst, x []float64) {
	for i, v := range x {
		dst[i] = math.Exp(v)
	}
}

func expPDAsm512(dst, x []float64) { expPDAsm(dst, x) }

// rowGroups does nothing without the assembly kernels: compute runs the groups one by one.
func (m *Mat) rowGroups(c *geo, g0, g1 int) bool { return false }

// batchStreams is the number of weight streams of the widest batch kernel: the portable
// code has no streams; the workers' prefetch plan takes two.
func batchStreams(p Precision, n int) int { return 2 }

// panelsQuantFast is the portable panelsQuant without assembly.
func (m *Mat) panelsQuantFast(s *seg, n, p0, p1 int) { m.panelsQuant(s, n, p0, p1) }

// panelsQ8Fast is the portable panelsQ8 without assembly.
func (m *Mat) panelsQ8Fast(s *seg, n, p0, p1 int) { m.panelsQ8(s, n, p0, p1) }

// q8Path is Path(Q8Activations): the portable reference (no assembly in this build).
func q8Path() KernelPath { return KernelPath{"portable", false} }

// q8Kernel reports whether type t has a Q8Activations kernel here: none in this build.
func q8Kernel(t DType) bool { return false }

// q8Perm reports whether the kernels take permQ4K's order: no kernels in this build.
func q8Perm() bool { return false }
