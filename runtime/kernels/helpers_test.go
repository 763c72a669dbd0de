package kernels

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// half decodes an IEEE binary16 bit pattern with math.Ldexp (independent of the package).
func half(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 31
	f := int(h) & 1023
	switch e {
	case 0:
		return s * math.Ldexp(float64(f), -24)
	case 31:
		if f == 0 {
			return math.Inf(int(s))
		}
		return math.NaN()
	}
	return s * math.Ldexp(float64(1024+f), e-25)
}

// toHalf returns a binary16 pattern near v (truncating; any finite half is fine for tests).
func toHalf(v float64) uint16 {
	var h uint16
	if v < 0 {
		h, v = 0x8000, -v
	}
	if v < math.Ldexp(1, -14) {
		return h | uint16(v*math.Ldexp(1, 24))
	}
	fr, e := math.Frexp(v) // v = fr * 2^e, fr in [0.5, 1)
	return h | uint16(e+14)<<10 | uint16((fr*2-1)*1024)
}

// testMat is a random matrix with its bytes and an independent float64 decoding.
type testMat struct {
	t          DType
	rows, cols int
	data       []byte
	w          []float64 // rows*cols decoded weights
}

// randMat makes a random rows x cols matrix of type t with weights of magnitude ~scale.
func randMat(r *rand.Rand, t DType, rows, cols int) *testMat {
	tm := &testMat{t: t, rows: rows, cols: cols, w: make([]float64, rows*cols)}
	switch t {
	case F32:
		tm.data = make([]byte, 4*rows*cols)
		for i := range tm.w {
			v := float32(r.NormFloat64())
			binary.LittleEndian.PutUint32(tm.data[4*i:], math.Float32bits(v))
			tm.w[i] = float64(v)
		}
	case BF16:
		tm.data = make([]byte, 2*rows*cols)
		for i := range tm.w {
			h := uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			binary.LittleEndian.PutUint16(tm.data[2*i:], h)
			tm.w[i] = float64(math.Float32frombits(uint32(h) << 16))
		}
	case F16:
		tm.data = make([]byte, 2*rows*cols)
		for i := range tm.w {
			h := toHalf(r.NormFloat64() * math.Ldexp(1, r.IntN(20)-14))
			binary.LittleEndian.PutUint16(tm.data[2*i:], h)
			tm.w[i] = half(h)
		}
	case Q8_0:
		nb := rows * cols / 32
		tm.data = make([]byte, 34*nb)
		for b := 0; b < nb; b++ {
			dh := toHalf(math.Abs(r.NormFloat64()) / 64)
			binary.LittleEndian.PutUint16(tm.data[34*b:], dh)
			for j := 0; j < 32; j++ {
				q := int8(r.IntN(255) - 127)
				tm.data[34*b+2+j] = byte(q)
				tm.w[32*b+j] = half(dh) * float64(q)
			}
		}
	}
	return tm
}

// randVec returns n*cols random activations.
func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// bigFMA32 is an independent exact float32 fused multiply-add (math/big).
func bigFMA32(a, b, c float32) float32 {
	for _, v := range []float32{a, b, c} {
		if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) { // IEEE rules for specials
			return float32(float64(a)*float64(b) + float64(c))
		}
	}
	p := new(big.Float).SetPrec(600).SetFloat64(float64(a))
	p.Mul(p, new(big.Float).SetPrec(600).SetFloat64(float64(b)))
	p.Add(p, new(big.Float).SetPrec(600).SetFloat64(float64(c)))
	if p.Sign() == 0 { // an exact zero: -0 only for (-0) + (-0)
		negProd := (a == 0 || b == 0) && math.Signbit(float64(a)) != math.Signbit(float64(b))
		if negProd && c == 0 && math.Signbit(float64(c)) {
			return float32(math.Copysign(0, -1))
		}
		return 0
	}
	f, _ := p.Float32()
	return f
}

// guarded returns a slice of n elements inside a larger buffer filled with a sentinel, and a
// function that fails the test if anything outside the slice changed.
func guarded(t *testing.T, n int) ([]float32, func()) {
	const band = 37
	buf := make([]float32, n+2*band)
	sentinel := math.Float32frombits(0x7fc0dead)
	for i := range buf {
		buf[i] = sentinel
	}
	return buf[band : band+n : band+n], func() {
		t.Helper()
		for i := 0; i < band; i++ {
			if math.Float32bits(buf[i]) != 0x7fc0dead || math.Float32bits(buf[band+n+i]) != 0x7fc0dead {
				t.Fatalf("write outside the destination (guard band of %d elements)", band)
			}
		}
	}
}

// withPath runs f once per path of the f32 contract that this build and CPU have
// (portable, avx2, avx512), each in a subtest named after it.
func withPath(t *testing.T, f func(t *testing.T)) {
	for _, p := range cpuPaths() {
		t.Run(p.String(), func(t *testing.T) {
			defer setPath(p)()
			f(t)
		})
	}
}

// withContractPath runs f once per path of a bf16 contract this build and CPU have: the
// portable reference, and the hardware kernels (named name, on the avx512 path) when present.
func withContractPath(t *testing.T, name string, present bool, f func(t *testing.T)) {
	t.Run("portable", func(t *testing.T) {
		defer setPath(pathPortable)()
		f(t)
	})
	if present {
		t.Run(name, func(t *testing.T) {
			defer setPath(pathAVX512)()
			f(t)
		})
	}
}

// withDotPath runs f on the paths of the BF16-activation contract (withContractPath).
func withDotPath(t *testing.T, f func(t *testing.T)) { withContractPath(t, "avx512bf16", cpuDot, f) }

// allPaths runs f for every (path, precision) this build and CPU have, naming them.
func allPaths(f func(name string, p Precision)) {
	for _, p := range cpuPaths() {
		restore := setPath(p)
		f(p.String(), F32Activations)
		restore()
	}
	restore := setPath(pathPortable)
	f("portable-bf16", BF16Activations)
	restore()
	if cpuDot {
		restore := setPath(pathAVX512)
		f("avx512bf16", BF16Activations)
		restore()
	}
	restore = setPath(pathPortable)
	f("portable-bf16-amx", BF16AMXActivations)
	restore()
	if amxOn() {
		restore := setPath(pathAVX512)
		f("amx", BF16AMXActivations)
		restore()
	}
}
