package kernels

import "encoding/binary"

// StreamRead reads every byte of b once and returns the sum of its little-endian 64-bit
// words (so the read cannot be optimized away). The bulk is read as six interleaved streams,
// the way the one-row kernels read packed weights, with the assembly loop when this build
// and CPU have it. It is the "plain read of the same bytes" that benchmarks compare matrix
// kernels and whole forward passes with: a kernel cannot read its weights faster.
func StreamRead(b []byte) uint64 {
	stride := (len(b) / 6) &^ 63
	var s uint64
	if stride > 0 {
		if curPath != pathPortable {
			s = readSix(&b[0], stride, stride)
		} else {
			for i := 0; i < 6; i++ {
				s += sumWords(b[i*stride : (i+1)*stride])
			}
		}
	}
	return s + sumWords(b[6*stride:])
}

// sumWords sums the 64-bit words of b (a final partial word is zero-extended).
func sumWords(b []byte) uint64 {
	var s0, s1, s2, s3 uint64
	i := 0
	for ; i+32 <= len(b); i += 32 {
		s0 += binary.LittleEndian.Uint64(b[i:])
		s1 += binary.LittleEndian.Uint64(b[i+8:])
		s2 += binary.LittleEndian.Uint64(b[i+16:])
		s3 += binary.LittleEndian.Uint64(b[i+24:])
	}
	for ; i+8 <= len(b); i += 8 {
		s0 += binary.LittleEndian.Uint64(b[i:])
	}
	if i < len(b) {
		var w [8]byte
		copy(w[:], b[i:])
		s0 += binary.LittleEndian.Uint64(w[:])
	}
	return s0 + s1 + s2 + s3
}
