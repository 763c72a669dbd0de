package quantize

import "encoding/binary"

// kvIQ4NL is kvaluesIQ4NL as float32 (the C code converts each entry as it compares).
var kvIQ4NL = func() (t [16]float32) {
	for i, v := range kvaluesIQ4NL {
		t[i] = float32(v)
	}
	return t
}()

// bestIndexInt8 is ggml's best_index_int8 over IQ4_NL's table: the nearest entry by
// binary search, ties to the upper entry.
func bestIndexInt8(x float32) uint8 {
	val := &kvIQ4NL
	if x <= val[0] {
		return 0
	}
	if x >= val[15] {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < val[mav] {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-val[mu-1] < val[mu]-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// iq4Scale is the per-32 search of quantize_row_iq4_nl_impl with ntry = 7 and no
// importance matrix (weights x²): the scale of block xb, or 0 for a block below
// GROUP_MAX_EPS.
func iq4Scale(xb []float32) float32 {
	const ntry = 7
	amax, max := signedAbsMax(xb)
	if amax < groupMaxEps {
		return 0
	}
	d := -max / float32(kvaluesIQ4NL[0])
	id := 1 / d
	var sumqx, sumq2 float32
	for _, v := range xb {
		l := bestIndexInt8(float32(id * v))
		q := kvIQ4NL[l]
		w := float32(v * v)
		sumqx += float32(float32(w*q) * v)
		sumq2 += float32(float32(w*q) * q)
	}
	d = 0
	if sumq2 > 0 {
		d = sumqx / sumq2
	}
	best := float32(d * sumqx)
	for itry := -ntry; itry <= ntry; itry++ {
		id := float32(itry+int(kvaluesIQ4NL[0])) / max
		sumqx, sumq2 = 0, 0
		for _, v := range xb {
			l := bestIndexInt8(float32(id * v))
			q := kvIQ4NL[l]
			w := float32(v * v)
			sumqx += float32(float32(w*q) * v)
			sumq2 += float32(float32(w*q) * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = float32(d * sumqx)
		}
	}
	return d
}

// blockIQ4_NL is quantize_iq4_nl's block (quantize_row_iq4_nl_impl, ntry 7): fp16 of the
// searched scale, the indices re-picked with its float32 reciprocal.
func blockIQ4_NL(y []byte, x []float32) {
	s := iq4Scale(x)
	binary.LittleEndian.PutUint16(y, fp16(s))
	id := recip(s)
	for j := 0; j < 16; j++ {
		y[2+j] = bestIndexInt8(float32(id*x[j])) | bestIndexInt8(float32(id*x[16+j]))<<4
	}
}

// blockIQ4_XS is quantize_iq4_xs's super-block: eight searched scales, d = -max_scale/32
// (the scale of largest magnitude), 6-bit sub-scales l = nearest(scale/d) in [-32, 31],
// indices re-picked with 1/(d*l).
func blockIQ4_XS(y []byte, x []float32) {
	var scales [8]float32
	var maxScale, amaxScale float32
	for ib := range scales {
		scales[ib] = iq4Scale(x[32*ib : 32*ib+32])
		if a := abs32(scales[ib]); a > amaxScale {
			amaxScale, maxScale = a, scales[ib]
		}
	}
	d := -maxScale / 32
	binary.LittleEndian.PutUint16(y, fp16(d))
	id := recip(d)
	var sh uint16
	var sl [4]uint8
	var L [256]uint8
	for ib := 0; ib < 8; ib++ {
		l := nearestInt(float32(id * scales[ib]))
		l = max(-32, min(31, l))
		dl := float32(d * float32(l))
		idl := recip(dl)
		for j := 0; j < 32; j++ {
			L[32*ib+j] = bestIndexInt8(float32(idl * x[32*ib+j]))
		}
		l += 32
		ll, lh := uint8(l&15), uint16(l>>4)
		if ib%2 == 0 {
			sl[ib/2] = ll
		} else {
			sl[ib/2] |= ll << 4
		}
		sh |= lh << (2 * uint(ib))
	}
	binary.LittleEndian.PutUint16(y[2:], sh)
	copy(y[4:8], sl[:])
	for i := 0; i < 8; i++ {
		for j := 0; j < 16; j++ {
			y[8+16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}
