//go:build amd64 && !purego && !noasm

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// benchPaths lists the assembly paths this CPU has, with their peak loops.
func benchPaths() []benchPath {
	var ps []benchPath
	if cpuAVX2 {
		ps = append(ps, benchPath{"avx2", pathAVX2, F32Activations, fmaLoop, 192})
	}
	if cpuAVX512 {
		ps = append(ps, benchPath{"avx512", pathAVX512, F32Activations, fmaLoop512, 512})
	}
	if cpuDot {
		ps = append(ps, benchPath{"avx512bf16", pathAVX512, BF16Activations, dotLoop, 1024})
	}
	if cpuAMX {
		ps = append(ps, benchPath{"amx", pathAVX512, BF16AMXActivations, amxPeak, 4 * 16 * 16 * 32 * 2})
	}
	return ps
}

// amxPeakConfig gives tiles 0..5 16 rows of 64 bytes (amxLoop).
var amxPeakConfig = tileConfig([]int{16, 16, 16, 16, 16, 16})

// amxPeak runs n iterations of the AMX peak loop.
func amxPeak(n int) { amxLoop(&amxPeakConfig[0], n) }

// BenchmarkKernel measures each assembly kernel shape alone (M batch rows x P panels, the
// widest P per M) on weights that stay in L2, against its path's peak loop on the same core:
// the arithmetic efficiency of the inner loops without the memory system. It reports the
// best of 50*b.N rounds of the thread's CPU time for both.
func BenchmarkKernel(b *testing.B) {
	for _, bp := range benchPaths() {
		if bp.prec == BF16AMXActivations {
			continue // its kernels take a tile configuration: BenchmarkGEMM8 has its L2 shape
		}
		fam, maxP := famAVX2, maxPanelsAVX2
		switch {
		case bp.prec == BF16Activations:
			fam, maxP = famDot, maxPanelsDot
		case bp.path == pathAVX512:
			fam, maxP = famAVX512, maxPanels512
		}
		for _, dt := range allTypes {
			if fam == famDot && dt != BF16 {
				continue
			}
			m := benchMat(b, dt, 96, 1024)
			xf := randVec(rand.New(rand.NewPCG(1, 2)), max512Rows*m.cols)
			xb := make([]uint32, max512Rows*m.cols/2)
			roundPairs(xb, xf, max512Rows, m.cols, m.cols, m.cols/2)
			x, xs, cols := unsafe.Pointer(&xf[0]), 4*m.cols, m.cols
			if fam == famDot {
				x, xs, cols = unsafe.Pointer(&xb[0]), 2*m.cols, m.cols/2
			}
			var out [max512Rows * 6 * panelRows]float32
			for mr := 1; mr < len(maxP); mr++ {
				np := maxP[mr]
				pf := rowPF(fam, mr, np, uintptr(unsafe.Pointer(&m.pk.mem[0]))) // as MatMul passes it
				b.Run(fmt.Sprintf("%s/%v/M=%d/P=%d", bp.name, dt, mr, np), func(b *testing.B) {
					clock, release := threadClock()
					defer release()
					best, bestPeak := time.Duration(1<<62), time.Duration(1<<62)
					const reps = 8
					for i := 0; i < b.N*50; i++ { // 50 short rounds per iteration: best of many
						t0 := clock()
						for j := 0; j < reps; j++ {
							callFamily(fam, dt, mr, np, &m.pk.mem[0], m.pk.panelBytes, x, xs, cols, &out[0], pf, 128, 4*panelRows, 4*np*panelRows, 1)
						}
						t1 := clock()
						bp.peak(1 << 11)
						t2 := clock()
						best, bestPeak = min(best, t1-t0), min(bestPeak, t2-t1)
					}
					flops := reps * 2 * panelRows * float64(mr*np*m.cols)
					peak := bp.flops * float64(1<<11) / bestPeak.Seconds()
					b.ReportMetric(flops/best.Seconds()/1e9, "GFLOP/s")
					b.ReportMetric(peak/1e9, "peak-GFLOP/s")
					b.ReportMetric(flops/best.Seconds()/peak, "ratio-to-peak")
				})
			}
		}
	}
}

// BenchmarkAMXKernel measures each AMX tile kernel alone (M batch rows x P panels) on 1024
// columns of weights that stay in cache (one panel, 32 KiB, in L1; two or three in L2), in
// wall-clock ns per 1 KiB weight tile and GB/s of weights. The tile unit's own peak
// (BenchmarkPeak, path=amx) is a TDPBF16PS every ~16 cycles; these kernels wait on their
// tile loads instead (docs/kernels.md, "Known limits").
func BenchmarkAMXKernel(b *testing.B) {
	if !cpuAMX {
		b.Skip("this CPU has no usable AMX (see TestKernelPaths)")
	}
	m := benchMat(b, BF16, 48, 1024)
	xf := randVec(rand.New(rand.NewPCG(1, 2)), amxMaxRows*m.cols)
	xb := make([]uint32, amxMaxRows*m.cols/2)
	roundPairs(xb, xf, amxMaxRows, m.cols, m.cols, m.cols/2)
	var out [amxMaxRows * maxPanelsAMX * panelRows]float32
	blocks := m.cols / 32
	for _, mr := range []int{1, 8, 16} {
		for np := 1; np <= maxPanelsAMX; np++ {
			b.Run(fmt.Sprintf("M=%d/P=%d", mr, np), func(b *testing.B) {
				t0 := time.Now()
				for i := 0; i < b.N; i++ {
					callAMX(&amxConfigs[mr][np][0], np, &m.pk.mem[0], m.pk.panelBytes, &xb[0], 2*m.cols, blocks, &out[0])
				}
				per := time.Since(t0).Seconds() / float64(b.N)
				tiles := float64(np * blocks)
				b.ReportMetric(per*1e9/tiles, "ns/tile")
				b.ReportMetric(tiles*1024/per/1e9, "GB/s")
			})
		}
	}
}

// TestDotInstruction establishes what VDPBF16PS computes on this CPU, lane by lane, against
// dotPairRef, the model the BF16-activation contract is defined by: random BF16 pairs of wide
// range, accumulators that cancel the first or both products, subnormal and tiny
// accumulators and operands, and specials (NaN results only need to be NaN). It also checks
// that the instruction ignores the rounding mode and the flush-to-zero bits of MXCSR. On a
// CPU without AVX512_BF16 it says so (TestKernelPaths prints the line in `make test`).
func TestDotInstruction(t *testing.T) {
	if !cpuBF16 {
		t.Skip("this CPU has no AVX512_BF16: VDPBF16PS not tested")
	}
	r := rand.New(rand.NewPCG(31, 32))
	var acc, got [16]float32
	var a, b [16]uint32
	for i := 0; i < 2_000_000/16; i++ {
		for l := range acc {
			acc[l], a[l], b[l] = dotOperands(r, i*16+l)
		}
		got = acc
		dpbf16(&got[0], &a[0], &b[0])
		for l := range acc {
			if want := dotPairRef(acc[l], a[l], b[l]); !sameFloat(got[l], want) {
				t.Fatalf("VDPBF16PS(acc %v (%#08x), %#08x, %#08x) = %v (%#08x), model %v (%#08x)",
					acc[l], math.Float32bits(acc[l]), a[l], b[l], got[l], math.Float32bits(got[l]), want, math.Float32bits(want))
			}
		}
	}
	// Cases that separate the plausible orders and roundings, each checked on its own:
	// odd element first (not even first), two roundings (not one), an intermediate flush.
	for _, c := range []struct {
		name   string
		acc    float32
		a, b   uint32
		expect uint32
	}{
		// 1 + 2^-24 (odd) then + 2^-24 (even): each step ties to even and stays 1.
		{"two roundings", 1, 0x33803380, 0x3f803f80, 0x3f800000},
		// odd 2^-128 (flushed to 0) then even 2^-126: 2^-126, not 1.25 x 2^-126.
		{"intermediate flush", 0, 0x1f803f80, 0x1f800080, 0x00800000},
		// subnormal accumulator 2^-127 plus 1 x 2^-126 (odd): 2^-126 if the accumulator is
		// taken as zero, 1.5 x 2^-126 if not.
		{"accumulator daz", math.Float32frombits(0x00400000), 0x3f800000, 0x00800000, 0x00800000},
		// 1 + 2^24 (odd: 2^12 x 2^12) rounds to 2^24, then - 2^24 (even): 0; even first
		// would give 1 - 2^24 (exact), then 1.
		{"odd first", 1, 0x45804580, 0x4580c580, 0x00000000},
		// Tininess after rounding with an unbounded exponent: -(2^-126 + 3u) + 2^-22 x
		// 2^-126 x (1+m/128), u = 2^-149. m = 80: exact -(2^-126 - u/4), which rounds to the
		// smallest normal at 24 bits: kept. m = 81: -(2^-126 - 0.266u), which rounds to
		// 2^-126 as a float32 but to 2^-126 - u/2 (tiny) at 24 bits: flushed, then + 1 x 0.
		{"tiny boundary kept", math.Float32frombits(0x80800003), 0x34803f80, 0x00d00000, 0x80800000},
		{"tiny boundary flushed", math.Float32frombits(0x80800003), 0x34803f80, 0x00d10000, 0x00000000},
	} {
		var accv, out [16]float32
		var av, bv [16]uint32
		for l := range accv {
			accv[l], av[l], bv[l] = c.acc, c.a, c.b
		}
		out = accv
		dpbf16(&out[0], &av[0], &bv[0])
		if math.Float32bits(out[0]) != c.expect || math.Float32bits(dotPairRef(c.acc, c.a, c.b)) != c.expect {
			t.Errorf("%s: VDPBF16PS gives %#08x, model %#08x, expected %#08x", c.name, math.Float32bits(out[0]), math.Float32bits(dotPairRef(c.acc, c.a, c.b)), c.expect)
		}
	}
}

// TestRoundBulk checks VCVTNEPS2BF16 (roundBF16x16, the activation rounding of both bf16
// contracts on AVX512_BF16 CPUs) against roundBits on 4 million patterns: random, small and
// subnormal, ties, near the largest finite values, NaNs and infinities; and that roundRow
// gives the same pairs with and without it, for every row length up to 80.
func TestRoundBulk(t *testing.T) {
	if !cpuBF16 {
		t.Skip("this CPU has no AVX512_BF16: VCVTNEPS2BF16 not tested")
	}
	if !cpuRound {
		t.Fatal("roundAgrees failed: VCVTNEPS2BF16 rounds differently from roundBits")
	}
	r := rand.New(rand.NewPCG(51, 52))
	src := make([]float32, 1<<16)
	dst := make([]uint32, len(src)/2)
	for round := 0; round < 64; round++ {
		for i := range src {
			u := r.Uint32()
			switch i % 6 {
			case 0:
				u &= 0x80ffffff // small and subnormal
			case 1:
				u = u&0xffff0000 | 0x8000 // ties
			case 2:
				u |= 0x7f000000 // huge, Inf and NaN
			case 3:
				u = u&0xffff0000 | 0x7fff | u&0x10000
			}
			src[i] = math.Float32frombits(u)
		}
		roundBF16x16(&dst[0], &src[0], len(src)/16)
		for q, got := range dst {
			want := roundBits(math.Float32bits(src[2*q])) | roundBits(math.Float32bits(src[2*q+1]))<<16
			if got != want {
				t.Fatalf("VCVTNEPS2BF16(%#08x, %#08x) = %#08x, roundBits %#08x", math.Float32bits(src[2*q]), math.Float32bits(src[2*q+1]), got, want)
			}
		}
	}
	for n := 1; n <= 80; n++ {
		row := src[:n]
		fast := make([]uint32, (n+1)/2)
		roundRow(fast, row)
		cpuRound = false
		slow := make([]uint32, (n+1)/2)
		roundRow(slow, row)
		cpuRound = true
		for q := range fast {
			if fast[q] != slow[q] {
				t.Fatalf("roundRow of %d values: pair %d = %#08x, without VCVTNEPS2BF16 %#08x", n, q, fast[q], slow[q])
			}
		}
	}
}

// TestReadStreams512 checks the ZMM read of readSix, with and without its prefetches,
// against readStreams' sums (the benchmarks' limit must read every byte it claims to).
func TestReadStreams512(t *testing.T) {
	if !cpuAVX512 {
		t.Log("kernels: readStreams512 NOT TESTED: this CPU lacks AVX-512F")
		return
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, lines := range []int{0, 1, 3, 17, 200} {
		stride := lines*64 + 128
		b := make([]byte, 6*stride)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := readStreams(&b[0], stride, lines*64)
		for _, pf := range []int{0, 1} {
			if got := readStreams512(&b[0], stride, lines*64, pf); got != want {
				t.Fatalf("%d lines, pf %d: sum %x, want %x", lines, pf, got, want)
			}
		}
	}
}
