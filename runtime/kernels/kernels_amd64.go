//go:build amd64 && !purego && !noasm

package kernels

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run ./_generate

// What the CPU can run: the AVX2 kernels need AVX2, FMA and F16C; the AVX-512 kernels
// AVX-512F as well (x/sys/cpu also checks that the OS saves the ZMM state); the dot-product
// kernels AVX512_BF16, and an instruction that computes what the contract's reference does
// (dotAgrees): a CPU whose VDPBF16PS differs keeps the portable reference for BF16
// activations, so the bits of that contract are the same on every machine.
var (
	cpuAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	cpuAVX512 = cpuAVX2 && cpu.X86.HasAVX512F
	cpuBF16   = cpuAVX512 && cpu.X86.HasAVX512BF16
	cpuDot    = cpuBF16 && dotAgrees()
)

// dotAgrees runs VDPBF16PS on cases that separate the plausible accumulation orders,
// roundings and flush rules, plus pseudo-random lanes, and reports whether every result is
// the reference's (dotPairRef). TestDotInstruction is the thorough version.
func dotAgrees() bool {
	cases := [][3]uint32{
		{0x3f800000, 0x33803380, 0x3f803f80}, // two roundings
		{0, 0x1f803f80, 0x1f800080},          // flush after the first step
		{0x00400000, 0x3f800000, 0x00800000}, // subnormal accumulator taken as zero
		{0x3f800000, 0x45804580, 0x4580c580}, // odd element first
		{0x80800003, 0x34803f80, 0x00d00000}, // tininess after rounding: kept
		{0x80800003, 0x34803f80, 0x00d10000}, // and flushed
	}
	var acc, got [16]float32
	var a, b [16]uint32
	s := uint64(0x9e3779b97f4a7c15)
	next := func() uint32 { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return uint32(s) }
	for round := 0; round < 64; round++ {
		for l := range acc {
			if c := round*16 + l; c < len(cases) {
				acc[l], a[l], b[l] = math.Float32frombits(cases[c][0]), cases[c][1], cases[c][2]
				continue
			}
			// random bf16 pairs with exponents near 1 and accumulators that cancel them
			r := next()
			a[l], b[l] = r&0x807f807f|0x3c003c00, next()&0x807f807f|0x3c003c00
			acc[l] = math.Float32frombits(next())
			if l%2 == 0 {
				acc[l] = -float32(float64(bf16(uint16(a[l]>>16))) * float64(bf16(uint16(b[l]>>16))))
			}
		}
		got = acc
		dpbf16(&got[0], &a[0], &b[0])
		for l := range acc {
			want := dotPairRef(acc[l], a[l], b[l])
			if math.Float32bits(got[l]) != math.Float32bits(want) && (got[l] == got[l] || want == want) {
				return false
			}
		}
	}
	return true
}

// cpuRound is whether activations are rounded to bfloat16 by VCVTNEPS2BF16 (roundBF16x16):
// AVX512_BF16 and an instruction that rounds as roundBits does (roundAgrees).
var cpuRound = cpuBF16 && roundAgrees()

// roundAgreeCases are float32 patterns whose rounding tells the plausible rules apart: ties
// (to even, both ways), subnormals and the smallest normals, the largest finite values
// (which round to Inf), infinities and NaNs (quiet, payload kept).
var roundAgreeCases = []uint32{
	0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f807fff, 0xbf818000, 0x007fffff, 0x807fffff,
	0x00000001, 0x00400000, 0x00800000, 0x0080ffff, 0x7f7fffff, 0xff7fffff, 0x7f7f8000,
	0x7f800000, 0xff800000, 0x7fc00001, 0x7f800001, 0xff812345, 0x00000000, 0x80000000,
}

// roundAgrees rounds roundAgreeCases and pseudo-random patterns with VCVTNEPS2BF16 and
// reports whether every result is roundBits'. TestRoundBulk is the thorough version.
func roundAgrees() bool {
	var src [64]float32
	var dst [32]uint32
	s := uint32(0x9e3779b9)
	for round := 0; round < 16; round++ {
		for i := range src {
			if c := round*64 + i; c < len(roundAgreeCases) {
				src[i] = math.Float32frombits(roundAgreeCases[c])
				continue
			}
			s ^= s << 13
			s ^= s >> 17
			s ^= s << 5
			src[i] = math.Float32frombits(s)
		}
		roundBF16x16(&dst[0], &src[0], 4)
		for q := range dst {
			want := roundBits(math.Float32bits(src[2*q])) | roundBits(math.Float32bits(src[2*q+1]))<<16
			if dst[q] != want {
				return false
			}
		}
	}
	return true
}

// roundBulk rounds the whole groups of 16 values at the start of row into d (8 pairs a
// group) with VCVTNEPS2BF16 when cpuRound, and returns how many values it rounded.
func roundBulk(d []uint32, row []float32) int {
	n := len(row) / 16
	if !cpuRound || n == 0 {
		return 0
	}
	_ = d[n*8-1]
	roundBF16x16(&d[0], &row[0], n)
	return n * 16
}

// streamPrefetch is whether the one-row kernels of several panels of the AVX2, AVX-512F and
// AVX512_BF16 families (every weight type) prefetch each of their streams ahead in software (their pf
// argument; see streamLoop in the generator): the core alone keeps too few lines in flight.
// docs/kernels.md, "Stream prefetch"; figures in docs/benchmarks.md, "Current figures, by machine class".
// A variable so that tests run both loops.
var streamPrefetch = true

// cpuIntel is whether the CPU is Intel's.
var cpuIntel = isIntel()

// readSix reads six streams of n bytes (n a multiple of 64) at p, p+stride, ..., p+5*stride
// with the strongest read this package has for the CPU, the limit the benchmarks compare
// with: ZMM loads on AVX-512 machines, prefetching ahead on Intel's (faster there than
// readStreams' YMM loads), else readStreams.
func readSix(p *byte, stride, n int) uint64 {
	if cpuAVX512 {
		pf := 0
		if cpuIntel {
			pf = 1
		}
		return readStreams512(p, stride, n, pf)
	}
	return readStreams(p, stride, n)
}

// isIntel reports whether CPUID names Intel as the vendor.
func isIntel() bool {
	b, c, d := cpuVendor()
	return b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e // "Genu" "ineI" "ntel"
}

// rowPF returns the pf argument of a call of family fam on n batch rows and np panels, the
// first at address own: for the one-row kernels of several panels of the AVX2, AVX-512F and
// AVX512_BF16 families (streamKernel in the generator) whether to prefetch each stream (streamPrefetch),
// for the others where to prefetch their own panel ahead (ignored by the kernels that leave
// prefetching to the hardware).
func rowPF(fam, n, np int, own uintptr) uintptr {
	if fam <= famAVX2X && n == 1 && np > 1 { // famAVX2, famAVX512, famDot, famAVX2X
		if streamPrefetch {
			return 1
		}
		return 0
	}
	return own + prefetchAhead
}

// cpuPaths lists the paths this build and CPU can run, slowest first.
func cpuPaths() []path { return availablePaths }

var availablePaths = func() []path {
	switch {
	case cpuAVX512:
		return []path{pathPortable, pathAVX2, pathAVX512}
	case cpuAVX2:
		return []path{pathPortable, pathAVX2}
	}
	return []path{pathPortable}
}()

// maxAVX2Rows and max512Rows are the largest batch chunks of the assembly kernels.
const (
	maxAVX2Rows = 6
	// avx2PairBelow: a batch chunk of fewer rows runs over two panels per call (panelsAsm).
	avx2PairBelow = 4
	max512Rows    = 8
)

// chunkOf returns the size of the next batch chunk when rem rows remain and chunks hold at
// most max rows: as even as possible (rem > max: 4 to 6 rows of 8 with AVX2).
func chunkOf(rem, max int) int {
	k := (rem + max - 1) / max
	return (rem + k - 1) / k
}

// prefetchAhead is how far ahead of its reads a one-panel kernel prefetches its own panel
// when it is the only stream.
const prefetchAhead = 4096

// Kernel families of panelsAsm (the AMX ones last: see seg.direct).
const (
	famAVX2 = iota
	famAVX512
	famDot
	famAVX2X // one row of BF16 on AVX2 with per-panel inputs (bf16M1P*x, rowGroups)
	famAMX
	famAMXRow // one row of the AMX contract on AVX-512 FMAs (amxRowP*)
)

func (m *Mat) panelsAVX2(s *seg, n, p0, p1 int) {
	m.panelsAsm(s, n, p0, p1, famAVX2, maxPanelsAVX2, maxAVX2Rows, unsafe.Pointer(&s.x[0]), 4*s.xRow, m.cols)
}

func (m *Mat) panels512(s *seg, n, p0, p1 int) {
	m.panelsAsm(s, n, p0, p1, famAVX512, maxPanels512, max512Rows, unsafe.Pointer(&s.x[0]), 4*s.xRow, m.cols)
}

func (m *Mat) panelsDot(s *seg, n, p0, p1 int) {
	pairs := (m.cols + 1) / 2
	m.panelsAsm(s, n, p0, p1, famDot, maxPanelsDot, max512Rows, unsafe.Pointer(&s.xb[0]), 4*pairs, pairs)
}

// callFamily runs the kernel of family fam (a switch rather than a function value, so that
// the output buffer stays on the caller's stack); ostride and orow are the bytes between
// the outputs of consecutive panels and batch rows (see callAVX512; the AMX families ignore
// them and store out[16*(m*np + p)]); runs (at least 1) is the number of consecutive panels
// per stream of the kernels that go on over several (see runsOf), 1 for the others. It returns what the famAMXRow kernels
// return (zero from the others).
func callFamily(fam int, t DType, mr, np int, w *byte, ps int, x unsafe.Pointer, xs, cols int, out *float32, pf uintptr, step, ostride, orow, runs int) uint32 {
	switch fam {
	case famAVX2:
		callAVX2(t, mr, np, w, ps, (*float32)(x), xs, cols, out, pf, step, ostride, orow, runs)
	case famAVX512:
		callAVX512(t, mr, np, w, ps, (*float32)(x), xs, cols, out, pf, step, ostride, orow, runs)
	case famAVX2X:
		if np == 1 { // one panel, one x: the plain kernel
			callAVX2(t, mr, np, w, ps, (*float32)(x), xs, cols, out, pf, step, ostride, orow, runs)
		} else {
			callAVX2X(t, mr, np, w, ps, (*float32)(x), xs, cols, out, pf, step, ostride, orow, runs)
		}
	case famAMX:
		callAMX(&amxConfigs[mr][np][0], np, w, ps, (*uint32)(x), xs, cols, out)
	case famAMXRow:
		return callAMXRow(np, w, ps, (*uint32)(x), xs, cols, out)
	default:
		callDot(t, mr, np, w, ps, (*uint32)(x), xs, cols, out, pf, step, ostride, orow, runs)
	}
	return 0
}

// direct returns where a call of family fam (the generated families famAVX2, famAVX512 and
// famDot; the AMX ones store into a buffer) on batch rows j0..j0+n-1 may store its outputs
// itself: dst's row j0 at panel pn, the call's np panels pn, pn+lane, ... being
// 4*lane*panelRows bytes apart and its rows 4*dRow, when all those panels are whole;
// otherwise nil (the kernel stores into a buffer that store or storeLanes copies out). That
// spares a copy per call; on a Zen 5, one-row products of the dense small target's layer
// shapes, one after another with cold destinations, went from 0.85-0.88 to 0.87-0.92 of a
// read of the same bytes (docs/kernels.md).
func (s *seg) direct(fam, j0, n, np, pn, lane int) *float32 {
	last := pn + (np-1)*lane // the call's last panel
	if fam >= famAMX || (last+1)*panelRows > s.rows {
		return nil
	}
	_ = s.dst[(j0+n-1)*s.dRow+(last+1)*panelRows-1]
	return &s.dst[j0*s.dRow+pn*panelRows]
}

// runsOf reports whether the kernel of family fam, type t, n rows and np panels goes on over
// several consecutive panels per stream in one call (the runs argument): the one-row BF16
// kernels of several panels of the generated families (AVX2, AVX-512F, AVX512_BF16).
func runsOf(fam int, t DType, n, np int) bool {
	return fam < famAMX && t == BF16 && n == 1 && np > 1
}

// panelsAsm computes the group's local panels [p0, p1) for all n batch rows with the
// assembly kernels of one family: x is the group's row 0, xStride bytes per batch row, and
// cols the kernels' column count (pairs for the dot kernels).
//
// Up to maxRows batch rows go in one pass over the weights, through kernels that stream
// several panels at once (6 for one row: several FMA chains and memory streams). A larger
// batch goes panel by panel: the first chunk of rows reads the panel from memory and the
// following chunks find it in cache.
//
// It returns the OR of the kernels' results (non-zero only from famAMXRow: see amxRowP1).
func (m *Mat) panelsAsm(s *seg, n, p0, p1 int, fam int, maxPanels []int, maxRows int, x unsafe.Pointer, xStride, cols int) (bad uint32) {
	var out [amxMaxRows * maxPanelsAMX * panelRows]float32 // >= max512Rows * 6 * panelRows
	pk := m.pk
	mem := pk.mem[s.base*pk.panelBytes:]
	base := uintptr(unsafe.Pointer(&mem[0]))
	// groupBytes is the average number of weight bytes per 4 columns.
	groupBytes := pk.panelBytes / max(1, m.cols/4)
	if n <= maxRows {
		// One pass: np panels per call, np = the widest kernel. The panels of a call are
		// lanes apart (panel i, i+lane, i+2*lane, ...), so that each of the kernel's np
		// streams reads one long contiguous run of the weights across the calls, as a plain
		// read with np streams does; the panels left over go in one narrower call.
		np := min(maxPanels[n], p1-p0)
		lane := (p1 - p0) / np
		if n == 1 {
			np, lane = oneRowStreams(p0, p1, pk.panelBytes, maxPanels[n])
		}
		if n == 1 {
			xStride = 0 // the one-row kernels of several panels share one x (see rowGroups)
		}
		done := 0 // lanes computed
		if runsOf(fam, m.t, n, np) && lane > 1 {
			// All the lanes in one call when their np*lane panels are whole: each of the
			// kernel's streams goes on over its lane panels.
			if d := s.direct(fam, 0, 1, np*lane, p0, 1); d != nil {
				bad |= callFamily(fam, m.t, 1, np, &mem[p0*pk.panelBytes], lane*pk.panelBytes, x, xStride, cols, d, rowPF(fam, 1, np, base+uintptr(p0*pk.panelBytes)), groupBytes, 4*lane*panelRows, 0, lane)
				done = lane
			}
		}
		for i := done; i < lane; i++ {
			p := p0 + i
			pf := rowPF(fam, n, np, base+uintptr(p*pk.panelBytes))
			if d := s.direct(fam, 0, n, np, p, lane); d != nil {
				bad |= callFamily(fam, m.t, n, np, &mem[p*pk.panelBytes], lane*pk.panelBytes, x, xStride, cols, d, pf, groupBytes, 4*lane*panelRows, 4*s.dRow, 1)
				continue
			}
			bad |= callFamily(fam, m.t, n, np, &mem[p*pk.panelBytes], lane*pk.panelBytes, x, xStride, cols, &out[0], pf, groupBytes, 4*panelRows, 4*np*panelRows, 1)
			s.storeLanes(out[:], 0, n, np, p, lane)
		}
		if p := p0 + lane*np; p < p1 {
			pf := rowPF(fam, n, p1-p, base+uintptr(p*pk.panelBytes))
			if d := s.direct(fam, 0, n, p1-p, p, 1); d != nil {
				bad |= callFamily(fam, m.t, n, p1-p, &mem[p*pk.panelBytes], pk.panelBytes, x, xStride, cols, d, pf, groupBytes, 4*panelRows, 4*s.dRow, 1)
				return bad
			}
			bad |= callFamily(fam, m.t, n, p1-p, &mem[p*pk.panelBytes], pk.panelBytes, x, xStride, cols, &out[0], pf, groupBytes, 4*panelRows, 4*(p1-p)*panelRows, 1)
			s.store(out[:], 0, n, p1-p, p)
		}
		return bad
	}
	// An AVX2 chunk of fewer than avx2PairBelow rows (the 3 rows of 7 = 4 + 3) has too few FMA
	// chains on one panel to hide the FMA latency (6 with 3 rows; 8 are needed at 2 FMAs per
	// cycle of 4 cycles' latency): it runs over two panels at once instead, between the other
	// chunks' calls on the first and on the second panel, when both panels and the batch's
	// activations fit in L2 together (else the pair is reread from L3 and that costs more).
	g := 1
	fits := 2*pk.panelBytes+n*xStride <= l2Bytes
	for j0 := 0; j0 < n && fam == famAVX2 && fits; {
		mr := min(chunkOf(n-j0, maxRows), n-j0)
		if mr < avx2PairBelow && maxPanels[mr] >= 2 {
			g = 2
		}
		j0 += mr
	}
	for p := p0; p < p1; p += g {
		gp := min(g, p1-p)
		calls := 0
		for j0 := 0; j0 < n; {
			mr := min(chunkOf(n-j0, maxRows), n-j0)
			if gp > 1 && mr < avx2PairBelow {
				calls++
			} else {
				calls += gp
			}
			j0 += mr
		}
		// While the calls reread the group's panels from cache, call c prefetches slice c
		// of the next group, so that it streams in during all the calls, not just the first.
		next := base + uintptr((p+gp)*pk.panelBytes)
		slice, step := gp*pk.panelBytes/calls, (gp*groupBytes+calls-1)/calls
		c := 0
		for pass := 0; pass < 3; pass++ { // big chunks on panel p; small ones on both; big ones on p+1
			for j0 := 0; j0 < n; {
				mr := min(chunkOf(n-j0, maxRows), n-j0)
				paired := gp > 1 && mr < avx2PairBelow
				q0, q1, np := p, p+1, 1
				switch {
				case paired && pass == 1:
					np = gp
				case paired || pass == 1:
					q1 = q0 // nothing in this pass
				case pass == 2:
					q0, q1 = p+1, p+gp
				}
				for q := q0; q < q1; q++ {
					xq, pf := unsafe.Add(x, j0*xStride), next+uintptr(c*slice)
					c++
					if d := s.direct(fam, j0, mr, np, q, 1); d != nil {
						bad |= callFamily(fam, m.t, mr, np, &mem[q*pk.panelBytes], pk.panelBytes, xq, xStride, cols, d, pf, step, 4*panelRows, 4*s.dRow, 1)
						continue
					}
					bad |= callFamily(fam, m.t, mr, np, &mem[q*pk.panelBytes], pk.panelBytes, xq, xStride, cols, &out[0], pf, step, 4*panelRows, 4*np*panelRows, 1)
					s.store(out[:], j0, mr, np, q)
				}
				j0 += mr
			}
		}
	}
	return bad
}

// pathNotes says, per path of either contract, whether this process can run it and, if
// not, why (the lines TestKernelPaths prints).
func pathNotes() []string {
	yes := func(ok bool, name, why string) string {
		if ok {
			return name + ": present (tested)"
		}
		return name + ": NOT TESTED: this CPU lacks " + why
	}
	return []string{
		"portable: present (tested)",
		yes(cpuAVX2, "avx2", "AVX2, FMA or F16C"),
		yes(cpuAVX512, "avx512", "AVX-512F"),
		yes(cpuDot, "avx512bf16", map[bool]string{false: "AVX512_BF16",
			true: "a VDPBF16PS that matches the reference (dotAgrees failed: see TestDotInstruction)"}[cpuBF16]),
		yes(cpuAMX, "amx", amxWhy()),
	}
}

// amxWhy says why the AMX path cannot run here (when it cannot).
func amxWhy() string {
	switch {
	case !cpuAMXHW:
		return "AMX-TILE and AMX-BF16"
	case amxPermErr != nil:
		return "the OS permission for the tile state (" + amxPermErr.Error() + ")"
	}
	return "a TDPBF16PS that matches the reference (amxAgrees failed: see TestAMXInstruction)"
}

// rowGroups computes the whole groups [g0, g1) of a one-row call on a Group of BF16 matrices
// with one-row kernels whose panels read each their own group's x (see panelX in the
// generator), so that several groups stream at once, and reports whether it did; if not
// (another type or path, or an AMX-contract call the FMA kernels cannot vouch for), the
// caller computes them group by group. The outputs are those of the group-by-group calls:
// the same kernels run the same panels on the same inputs.
//
// A group alone is one stream (its panels are fewer than minStreamBytes asks for several),
// and the per-head matrices of MLA are many small groups (the demo's 16 of 64 KiB): streamed
// one at a time they read at 0.6-0.7 of a plain read. Here up to six streams run together,
// each over lg consecutive groups (a contiguous run of the weights).
func (m *Mat) rowGroups(c *geo, g0, g1 int) bool {
	if m.t != BF16 {
		return false
	}
	pk := m.pk
	fam, x, xg, cols := 0, unsafe.Pointer(nil), 0, 0
	switch prec := m.Precision(); {
	case prec == BF16AMXActivations && amxActive() && amxRowOn:
		fam, x, xg, cols = famAMXRow, unsafe.Pointer(&c.xb[g0*c.xbGroup*c.xbRow]), 4*c.xbGroup*c.xbRow, c.xbRow/amxPairs
	case prec == BF16Activations && dotActive():
		fam, x, xg, cols = famDot, unsafe.Pointer(&c.xb[g0*c.xbGroup*c.xbRow]), 4*c.xbGroup*c.xbRow, (m.cols+1)/2
	case prec == F32Activations && curPath == pathAVX512:
		fam, x, xg, cols = famAVX512, unsafe.Pointer(&c.x[g0*c.xGroup]), 4*c.xGroup, m.cols
	case prec == F32Activations && curPath == pathAVX2:
		fam, x, xg, cols = famAVX2X, unsafe.Pointer(&c.x[g0*c.xGroup]), 4*c.xGroup, m.cols
	default:
		return false
	}
	var out [maxPanelsAMXRow * panelRows]float32
	gp, pb := pk.groupPanels, pk.panelBytes
	base := uintptr(unsafe.Pointer(&pk.mem[0]))
	groupBytes := pb / max(1, m.cols/4)
	var bad uint32
	for g := g0; g < g1; {
		// np streams of lg groups: lg as small as six streams allow, the groups left over
		// (fewer than lg) in the next round.
		lg := (g1 - g + maxPanelsAMXRow - 1) / maxPanelsAMXRow
		np := (g1 - g) / lg
		xs := lg * xg
		for i := 0; i < lg*gp; i++ {
			gi, pi := i/gp, i%gp
			p := (g+gi)*gp + pi
			pf := rowPF(fam, 1, np, base+uintptr(p*pb))
			r0 := pi * panelRows
			nr := min(panelRows, pk.groupRows-r0)
			if d0 := (g+gi)*c.dGroup + r0; nr == panelRows && fam < famAMX {
				// whole panels, stored straight into dst (see seg.direct)
				_ = c.dst[d0+(np-1)*lg*c.dGroup+panelRows-1]
				bad |= callFamily(fam, m.t, 1, np, &pk.mem[p*pb], lg*gp*pb, unsafe.Add(x, (g-g0+gi)*xg), xs, cols, &c.dst[d0], pf, groupBytes, 4*lg*c.dGroup, 0, 1)
				continue
			}
			bad |= callFamily(fam, m.t, 1, np, &pk.mem[p*pb], lg*gp*pb, unsafe.Add(x, (g-g0+gi)*xg), xs, cols, &out[0], pf, groupBytes, 4*panelRows, 0, 1)
			for k := 0; k < np; k++ {
				d := (g+gi+k*lg)*c.dGroup + r0
				copy(c.dst[d:d+nr], out[k*panelRows:k*panelRows+nr])
			}
		}
		g += np * lg
	}
	return bad == 0
}

// batchStreams is the number of weight streams the widest batch kernel reads for n rows at
// precision p (the panels of its calls, lanes apart): what the workers' prefetch plan
// prefetches of a batch call's chunk 1.
func batchStreams(p Precision, n int) int {
	if p == BF16Activations && dotActive() && n <= max512Rows {
		return maxPanelsDot[n]
	}
	return 2
}
