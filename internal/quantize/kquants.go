package quantize

import (
	"encoding/binary"
)

// The 256-value K-quants. Each function quantizes one super-block x[:256] into y as the
// named quantize_row_*_ref does.

// makeQKX2 is make_qkx2_quants: a min and scale for n values with nmax+1 levels, chosen by
// a weighted least-squares search over nstep+1 trial scales. It returns the scale and
// -min; L receives the levels.
func makeQKX2(x, w []float32, L []uint8, nmax int32, rmin, rdelta float32, nstep int, mad bool) (scale, negMin float32) {
	n := len(x)
	var laux [32]uint8
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -lo
	}
	fmax := float32(nmax)
	iscale := fmax / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * (x[i] - lo)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+lo) - x[i]
		if mad {
			diff = abs32(diff)
		} else {
			diff = float32(diff * diff)
		}
		bestErr += float32(w[i] * diff)
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(float32(rmin+float32(rdelta*float32(is)))+fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * (x[i] - lo)))
			l = max(0, min(nmax, l))
			laux[i] = uint8(l)
			fl := float32(l)
			wl := float32(w[i] * fl)
			sumL += wl
			sumL2 += float32(wl * fl)
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var cur float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - x[i]
				if mad {
					diff = abs32(diff)
				} else {
					diff = float32(diff * diff)
				}
				cur += float32(w[i] * diff)
			}
			if cur < bestErr {
				copy(L[:n], laux[:n])
				bestErr, scale, lo = cur, thisScale, thisMin
			}
		}
	}
	return scale, -lo
}

// packQ2 packs 2-bit levels as Q2_K and Q3_K store them: byte l of chunk c holds values
// 128c+l, +32, +64, +96 in bits 0-1, 2-3, 4-5, 6-7.
func packQ2(qs []byte, L []uint8) {
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// blockQ2_K is quantize_row_q2_K_ref: per 16 values make_qkx2_quants(nmax 3, weights |x|,
// rmin -0.5, rdelta 0.1, 15 steps, absolute error); 4-bit scales and mins against
// d = max_scale/15 and dmin = max_min/15; levels re-picked with the stored values.
func blockQ2_K(y []byte, x []float32) {
	var L [256]uint8
	var w [16]float32
	var mins, scales [16]float32
	var maxScale, maxMin float32
	for j := 0; j < 16; j++ {
		for l := 0; l < 16; l++ {
			w[l] = abs32(x[16*j+l])
		}
		scales[j], mins[j] = makeQKX2(x[16*j:16*j+16], w[:], L[16*j:16*j+16], 3, -0.5, 0.1, 15, true)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	sc := y[0:16]
	const q4scale = 15
	if maxScale > 0 {
		iscale := q4scale / maxScale
		for j := range 16 {
			sc[j] = uint8(nearestInt(float32(iscale * scales[j])))
		}
		binary.LittleEndian.PutUint16(y[80:], fp16(maxScale/q4scale))
	} else {
		clear(sc)
		binary.LittleEndian.PutUint16(y[80:], fp16(0))
	}
	if maxMin > 0 {
		iscale := q4scale / maxMin
		for j := range 16 {
			sc[j] |= uint8(nearestInt(float32(iscale*mins[j])) << 4)
		}
		binary.LittleEndian.PutUint16(y[82:], fp16(maxMin/q4scale))
	} else {
		binary.LittleEndian.PutUint16(y[82:], fp16(0))
	}
	dd := widen16(binary.LittleEndian.Uint16(y[80:]))
	dmin := widen16(binary.LittleEndian.Uint16(y[82:]))
	for j := 0; j < 16; j++ {
		d := float32(dd * float32(sc[j]&15))
		if d == 0 {
			continue
		}
		dm := float32(dmin * float32(sc[j]>>4))
		for ii := 0; ii < 16; ii++ {
			l := nearestInt((x[16*j+ii] + dm) / d)
			L[16*j+ii] = uint8(max(0, min(3, l)))
		}
	}
	packQ2(y[16:80], L[:])
}

// makeQ3 is make_q3_quants(n, nmax, x, L, do_rmse=true): levels in [-nmax, nmax-1] from
// the signed maximum, then up to five passes moving single levels while the weighted
// (x²) fit improves. L receives levels offset by nmax (0 for an all-zero group).
func makeQ3(x []float32, L []int8, nmax int32) float32 {
	amax, mx := signedAbsMax(x)
	if amax < groupMaxEps {
		for i := range L[:len(x)] {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-nmax) / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := nearestInt(float32(iscale * v))
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l)
		w := float32(v * v)
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := float32(v * v)
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				nl := nearestInt(float32(v*sl2) / slx)
				nl = max(-nmax, min(nmax-1, nl))
				if nl != int32(L[i]) {
					fn := float32(nl)
					slx += float32(float32(w*v) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(nl)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// blockQ3_K is quantize_row_q3_K_ref: per 16 values make_q3_quants(nmax 4); 6-bit signed
// scales against d = 1/(-32/max_scale); levels re-picked with the stored values; the
// third bit in hmask.
func blockQ3_K(y []byte, x []float32) {
	var L [256]int8
	var scales [16]float32
	var maxScale, amax float32
	for j := 0; j < 16; j++ {
		scales[j] = makeQ3(x[16*j:16*j+16], L[16*j:16*j+16], 4)
		if a := abs32(scales[j]); a > amax {
			amax, maxScale = a, scales[j]
		}
	}
	sc := y[96:108]
	clear(sc)
	if maxScale != 0 {
		iscale := -32 / maxScale
		for j := 0; j < 16; j++ {
			l := int8(nearestInt(float32(iscale * scales[j])))
			l = max(-32, min(31, l)) + 32
			if j < 8 {
				sc[j] = uint8(l) & 15
			} else {
				sc[j-8] |= (uint8(l) & 15) << 4
			}
			l >>= 4
			sc[j%4+8] |= uint8(l) << (2 * uint(j/4))
		}
		binary.LittleEndian.PutUint16(y[108:], fp16(1/iscale))
	} else {
		binary.LittleEndian.PutUint16(y[108:], fp16(0))
	}
	dd := widen16(binary.LittleEndian.Uint16(y[108:]))
	for j := 0; j < 16; j++ {
		var s uint8
		if j < 8 {
			s = sc[j] & 15
		} else {
			s = sc[j-8] >> 4
		}
		v := int8(s|(sc[8+j%4]>>(2*uint(j/4))&3)<<4) - 32
		d := float32(dd * float32(v))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := nearestInt(x[16*j+ii] / d)
			L[16*j+ii] = int8(max(-4, min(3, l)) + 4)
		}
	}
	hm := y[0:32]
	clear(hm)
	m, bit := 0, uint8(1)
	var U [256]uint8
	for j := 0; j < 256; j++ {
		if L[j] > 3 {
			hm[m] |= bit
			L[j] -= 4
		}
		U[j] = uint8(L[j])
		if m++; m == 32 {
			m, bit = 0, bit<<1
		}
	}
	packQ2(y[32:96], U[:])
}

// kScales runs the per-32 search shared by Q4_K and Q5_K (weights av + |x|) and packs the
// 6-bit scales and mins into y[4:16] with d and dmin at y[0:4]; it returns the levels.
func kScales(y []byte, x []float32, L *[256]uint8, nmax int32, rmin float32, nstep int) {
	var w [32]float32
	var mins, scales [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xb := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xb {
			sumX2 += float32(v * v)
		}
		av := sqrt32(sumX2 / 32)
		for l, v := range xb {
			w[l] = av + abs32(v)
		}
		scales[j], mins[j] = makeQKX2(xb, w[:], L[32*j:32*j+32], nmax, rmin, 0.1, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	s := y[4:16]
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			s[j] = ls
			s[j+4] = lm
		} else {
			s[j+4] = ls&15 | (lm&15)<<4
			s[j-4] |= (ls >> 4) << 6
			s[j] |= (lm >> 4) << 6
		}
	}
	binary.LittleEndian.PutUint16(y[0:], fp16(maxScale/63))
	binary.LittleEndian.PutUint16(y[2:], fp16(maxMin/63))
	dd := widen16(binary.LittleEndian.Uint16(y[0:]))
	dmin := widen16(binary.LittleEndian.Uint16(y[2:]))
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, s)
		d := float32(dd * float32(sc))
		if d == 0 {
			continue
		}
		dm := float32(dmin * float32(m))
		for ii := 0; ii < 32; ii++ {
			l := nearestInt((x[32*j+ii] + dm) / d)
			L[32*j+ii] = uint8(max(0, min(nmax, l)))
		}
	}
}

// scaleMinK4 is get_scale_min_k4.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// blockQ4_K is quantize_row_q4_K_ref: make_qkx2_quants(32, 15, rmin -1, 20 steps).
func blockQ4_K(y []byte, x []float32) {
	var L [256]uint8
	kScales(y, x, &L, 15, -1, 20)
	q := y[16:144]
	for j := 0; j < 256; j += 64 {
		for l := 0; l < 32; l++ {
			q[j/2+l] = L[j+l] | L[j+l+32]<<4
		}
	}
}

// blockQ5_K is quantize_row_q5_K_ref: make_qkx2_quants(32, 31, rmin -0.5, 15 steps), the
// fifth bit of the values of sub-blocks 2c and 2c+1 in bits 2c and 2c+1 of qh.
func blockQ5_K(y []byte, x []float32) {
	var L [256]uint8
	kScales(y, x, &L, 31, -0.5, 15)
	qh := y[16:48]
	ql := y[48:176]
	clear(qh)
	m1, m2 := uint8(1), uint8(2)
	for n := 0; n < 256; n += 64 {
		for j := 0; j < 32; j++ {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[n/2+j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
	}
}

// makeQX is make_qx_quants(n, nmax, x, L, rmse_type=1, NULL): levels from the signed
// maximum, the least-squares scale with weights x², and 18 trial scales around it.
func makeQX(x []float32, L []int8, nmax int32) float32 {
	amax, mx := signedAbsMax(x)
	if amax < groupMaxEps {
		for i := range L[:len(x)] {
			L[i] = 0
		}
		return 0
	}
	fn := float32(nmax)
	trial := func(iscale float32) (sumlx, suml2 float32) {
		for _, v := range x {
			l := nearestInt(float32(iscale * v))
			fl := float32(max(-nmax, min(nmax-1, l)))
			w := float32(v * v)
			sumlx += float32(float32(w*v) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		return sumlx, suml2
	}
	levels := func(iscale float32) {
		for i, v := range x {
			l := nearestInt(float32(iscale * v))
			L[i] = int8(nmax + max(-nmax, min(nmax-1, l)))
		}
	}
	iscale := -fn / mx
	sumlx, suml2 := trial(iscale)
	levels(iscale)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -float32(fn+float32(0.1*float32(is))) / mx
		sumlx, suml2 = trial(iscale)
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			levels(iscale)
			scale = sumlx / suml2
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// blockQ6_K is quantize_row_q6_K_ref: per 16 values make_qx_quants(nmax 32); int8 scales
// against d = 1/(-128/max_scale); levels re-picked with the stored values; an all-zero
// super-block is 210 zero bytes.
func blockQ6_K(y []byte, x []float32) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbs float32
	for ib := 0; ib < 16; ib++ {
		scales[ib] = makeQX(x[16*ib:16*ib+16], L[16*ib:16*ib+16], 32)
		if a := abs32(scales[ib]); a > maxAbs {
			maxAbs, maxScale = a, scales[ib]
		}
	}
	if maxAbs < groupMaxEps {
		clear(y[:210])
		return
	}
	iscale := -128 / maxScale
	binary.LittleEndian.PutUint16(y[208:], fp16(1/iscale))
	sc := y[192:208]
	for ib := 0; ib < 16; ib++ {
		sc[ib] = uint8(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	dd := widen16(binary.LittleEndian.Uint16(y[208:]))
	for j := 0; j < 16; j++ {
		d := float32(dd * float32(int8(sc[j])))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := nearestInt(x[16*j+ii] / d)
			L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
		}
	}
	ql := y[0:128]
	qh := y[128:192]
	for j := 0; j < 256; j += 128 {
		o, h := j/2, j/4
		for l := 0; l < 32; l++ {
			q1 := uint8(L[j+l]) & 15
			q2 := uint8(L[j+l+32]) & 15
			q3 := uint8(L[j+l+64]) & 15
			q4 := uint8(L[j+l+96]) & 15
			ql[o+l] = q1 | q3<<4
			ql[o+l+32] = q2 | q4<<4
			qh[h+l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 | (uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
		}
	}
}
