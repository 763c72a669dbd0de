package convert

import "fmt"

// MXFP4 routed experts of compressed-tensors checkpoints (Kimi-K3's quantization_config
// format "mxfp4-pack-quantized", target-kimi-k3.md section 1.1) and ggml's MXFP4 blocks hold
// the same numbers in the same encoding: per group of 32 consecutive elements of a row one
// E8M0 exponent byte (2^(e-127)) and 32 four-bit E2M1 codes (bit 3 the sign, bits 0-2 the
// magnitude index of 0, 0.5, 1, 1.5, 2, 3, 4, 6). Only the byte layout differs:
//
//   - compressed-tensors: weight_packed [rows, cols/2] U8, element 2k of a row in the low
//     nibble of byte k and 2k+1 in the high nibble; weight_scale [rows, cols/32] U8.
//   - ggml block_mxfp4 (17 bytes per group): the exponent, then qs[16] with element j in
//     the low nibble of qs[j] and element j+16 in its high nibble.
//
// So the repack moves nibbles and copies exponent bytes: no value is decoded, none can round.

// mxfp4Group is the elements per MXFP4 group (and ggml block); mxfp4Block the bytes of a
// ggml block.
const (
	mxfp4Group = 32
	mxfp4Block = 1 + mxfp4Group/2
)

// repackMXFP4 writes rows [row0, row0+n) of one compressed-tensors MXFP4 weight of cols
// columns as ggml MXFP4 blocks into dst (n * cols/32 * 17 bytes). packed and scale hold
// exactly those rows (n * cols/2 and n * cols/32 bytes). name locates errors.
func repackMXFP4(dst, packed, scale []byte, n, cols int64, name string) error {
	if cols <= 0 || cols%mxfp4Group != 0 {
		return fmt.Errorf("%s: %d columns is not a multiple of the MXFP4 group of %d", name, cols, mxfp4Group)
	}
	groups := n * cols / mxfp4Group
	switch {
	case int64(len(packed)) != n*cols/2:
		return fmt.Errorf("%s: weight_packed holds %d bytes for %d rows of %d columns, want %d", name, len(packed), n, cols, n*cols/2)
	case int64(len(scale)) != groups:
		return fmt.Errorf("%s: weight_scale holds %d bytes for %d rows of %d columns, want %d (one per group of %d)", name, len(scale), n, cols, groups, mxfp4Group)
	case int64(len(dst)) != groups*mxfp4Block:
		return fmt.Errorf("internal: %s: MXFP4 buffer of %d bytes for %d blocks", name, len(dst), groups)
	}
	for g := int64(0); g < groups; g++ {
		src := packed[g*mxfp4Group/2 : (g+1)*mxfp4Group/2]
		blk := dst[g*mxfp4Block : (g+1)*mxfp4Block]
		blk[0] = scale[g]
		// Element j (j < 16) is nibble j%2 of src[j/2]; element j+16 nibble j%2 of src[8+j/2].
		for j := 0; j < 16; j += 2 {
			lo, hi := src[j/2], src[8+j/2]
			blk[1+j] = lo&0x0f | hi<<4
			blk[2+j] = lo>>4 | hi&0xf0
		}
	}
	return nil
}
