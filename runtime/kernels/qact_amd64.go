//go:build amd64 && !purego && !noasm

package kernels

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// cpuQ8512 reports whether the CPU runs the AVX-512 kernels of Q8Activations (qdot.go of
// _generate): AVX-512 F, BW, VL, VBMI (VPERMB) and VNNI (VPDPBUSD).
var cpuQ8512 = cpuAVX512 && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512VNNI

// q8Active reports whether packed matrices of Q8_0, Q4_K, Q5_K and Q6_K use the AVX-512
// kernels now: on the AVX-512 path (SelectPath) of a CPU that has them.
func q8Active() bool { return curPath == pathAVX512 && cpuQ8512 }

// q8Path is Path(Q8Activations).
func q8Path() KernelPath {
	switch {
	case q8Active():
		return KernelPath{"avx512vnni", true}
	case curPath == pathAVX2:
		return KernelPath{"avx2", true}
	}
	return KernelPath{"portable", false}
}

// q8Kernel reports whether type t has a Q8Activations kernel on the current path: Q8_0,
// Q4_K, Q5_K and Q6_K on AVX-512 (q8Active), Q4_K and Q6_K on AVX2.
func q8Kernel(t DType) bool {
	if q8Active() {
		return t == Q8_0 || t == Q4_K || t == Q5_K || t == Q6_K
	}
	return curPath == pathAVX2 && (t == Q4_K || t == Q6_K)
}

// q8Perm reports whether the K-quant kernels of the current path take the Q4_K and Q5_K
// activations in permQ4K's order (the AVX-512 ones) rather than their own (AVX2).
func q8Perm() bool { return q8Active() }

// panelsQ8Fast computes the group's local panels [p0, p1) of a packed block-quantized
// matrix with Q8Activations: with the AVX-512 kernels for Q8_0, Q4_K, Q5_K and Q6_K (the bits of
// panelsQ8: the same exact integers and the same fma32 chains), the portable reference for
// the other types and paths.
func (m *Mat) panelsQ8Fast(s *seg, n, p0, p1 int) {
	if !q8Kernel(m.t) {
		m.panelsQ8(s, n, p0, p1)
		return
	}
	pk := m.pk
	a := s.xq
	var acc [max512Rows * panelRows]float32
	if m.t == Q8_0 {
		nb := m.cols / q8Block
		for pn := p0; pn < p1; pn++ {
			w := &pk.mem[(s.base+pn)*pk.panelBytes]
			for j0 := 0; j0 < n; j0 += max512Rows {
				c := min(max512Rows, n-j0)
				acc = [max512Rows * panelRows]float32{}
				r := s.xqBase + j0
				q8q8(c, w, nb, &a.qs[r*a.cols], a.cols, (*float32)(unsafe.Pointer(&a.kl[r*nb*8])), 8*nb, &acc[0])
				s.store(acc[:], j0, c, 1, pn)
			}
		}
		return
	}
	rb := pk.quantRowBytes()
	if panelRows*rb > math.MaxInt32 {
		m.panelsQ8(s, n, p0, p1)
		return
	}
	nb := m.cols / 256
	buf := getTile(32 * qkMaxRows * nb)
	defer putTile(buf)
	scratch := (*int32)(unsafe.Pointer(&(*buf)[0]))
	rbk := nb * qkRowBytes(m.t) // bytes per batch row of the kernels' layout
	for pn := p0; pn < p1; pn++ {
		w := &pk.mem[(s.base+pn)*pk.panelBytes]
		for j0 := 0; j0 < n; j0 += qkMaxRows {
			c := min(qkMaxRows, n-j0)
			acc = [max512Rows * panelRows]float32{}
			act := &a.kl[(s.xqBase+j0)*rbk]
			switch {
			case m.t == Q4_K && !q8Active():
				q4kQ8A(c, w, rb, nb, act, scratch, &acc[0])
			case m.t == Q4_K:
				q4kQ8(c, w, rb, nb, act, scratch, &acc[0])
			case m.t == Q5_K:
				q5kQ8(c, w, rb, nb, act, scratch, &acc[0])
			case !q8Active():
				q6kQ8A(c, w, rb, nb, act, scratch, &acc[0])
			default:
				q6kQ8(c, w, rb, nb, act, scratch, &acc[0])
			}
			s.store(acc[:], j0, c, 1, pn)
		}
	}
}

// q4kQ8A runs q4kQ8A<c> (AVX2).
func q4kQ8A(c int, w *byte, rb, nb int, act *byte, scratch *int32, acc *float32) {
	switch c {
	case 1:
		q4kQ8A1(w, rb, nb, act, scratch, acc)
	case 2:
		q4kQ8A2(w, rb, nb, act, scratch, acc)
	case 3:
		q4kQ8A3(w, rb, nb, act, scratch, acc)
	default:
		q4kQ8A4(w, rb, nb, act, scratch, acc)
	}
}

// q6kQ8A runs q6kQ8A<c> (AVX2).
func q6kQ8A(c int, w *byte, rb, nb int, act *byte, scratch *int32, acc *float32) {
	switch c {
	case 1:
		q6kQ8A1(w, rb, nb, act, scratch, acc)
	case 2:
		q6kQ8A2(w, rb, nb, act, scratch, acc)
	case 3:
		q6kQ8A3(w, rb, nb, act, scratch, acc)
	default:
		q6kQ8A4(w, rb, nb, act, scratch, acc)
	}
}

// q4kQ8 runs q4kQ8M<c>.
func q4kQ8(c int, w *byte, rb, nb int, act *byte, scratch *int32, acc *float32) {
	switch c {
	case 1:
		q4kQ8M1(w, rb, nb, act, scratch, acc)
	case 2:
		q4kQ8M2(w, rb, nb, act, scratch, acc)
	case 3:
		q4kQ8M3(w, rb, nb, act, scratch, acc)
	default:
		q4kQ8M4(w, rb, nb, act, scratch, acc)
	}
}

// q5kQ8 runs q5kQ8M<c>.
func q5kQ8(c int, w *byte, rb, nb int, act *byte, scratch *int32, acc *float32) {
	switch c {
	case 1:
		q5kQ8M1(w, rb, nb, act, scratch, acc)
	case 2:
		q5kQ8M2(w, rb, nb, act, scratch, acc)
	case 3:
		q5kQ8M3(w, rb, nb, act, scratch, acc)
	default:
		q5kQ8M4(w, rb, nb, act, scratch, acc)
	}
}

// q6kQ8 runs q6kQ8M<c>.
func q6kQ8(c int, w *byte, rb, nb int, act *byte, scratch *int32, acc *float32) {
	switch c {
	case 1:
		q6kQ8M1(w, rb, nb, act, scratch, acc)
	case 2:
		q6kQ8M2(w, rb, nb, act, scratch, acc)
	case 3:
		q6kQ8M3(w, rb, nb, act, scratch, acc)
	default:
		q6kQ8M4(w, rb, nb, act, scratch, acc)
	}
}

// q8q8 runs q8q8M<c>.
func q8q8(c int, w *byte, nb int, a *int8, aRow int, ad *float32, adRow int, acc *float32) {
	switch c {
	case 1:
		q8q8M1(w, nb, a, aRow, ad, adRow, acc)
	case 2:
		q8q8M2(w, nb, a, aRow, ad, adRow, acc)
	case 3:
		q8q8M3(w, nb, a, aRow, ad, adRow, acc)
	case 4:
		q8q8M4(w, nb, a, aRow, ad, adRow, acc)
	case 5:
		q8q8M5(w, nb, a, aRow, ad, adRow, acc)
	case 6:
		q8q8M6(w, nb, a, aRow, ad, adRow, acc)
	case 7:
		q8q8M7(w, nb, a, aRow, ad, adRow, acc)
	default:
		q8q8M8(w, nb, a, aRow, ad, adRow, acc)
	}
}
