package dtype

import (
	"encoding/binary"
	"math"
	"sync"
)

// The bulk functions convert whole slices. Lengths must match exactly (src holds one
// encoded value per dst element); a mismatch is a programmer error and panics.

// DecodeBF16 widens little-endian bfloat16 values: dst[i] = BF16ToF32(src[2i:2i+2]).
// len(src) must be 2*len(dst).
func DecodeBF16(dst []float32, src []byte) {
	if len(src) != 2*len(dst) {
		panic("dtype: DecodeBF16 length mismatch")
	}
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// DecodeF16 widens little-endian IEEE half values (see F16ToF32). len(src) must be 2*len(dst).
func DecodeF16(dst []float32, src []byte) {
	if len(src) != 2*len(dst) {
		panic("dtype: DecodeF16 length mismatch")
	}
	t := f16Table()
	for i := range dst {
		dst[i] = t[binary.LittleEndian.Uint16(src[2*i:])]
	}
}

// DecodeF32 reads little-endian float32 values bit for bit. len(src) must be 4*len(dst).
func DecodeF32(dst []float32, src []byte) {
	if len(src) != 4*len(dst) {
		panic("dtype: DecodeF32 length mismatch")
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// DecodeF8E4M3 widens F8 E4M3FN bytes (see F8E4M3ToF32). len(src) must be len(dst).
func DecodeF8E4M3(dst []float32, src []byte) {
	if len(src) != len(dst) {
		panic("dtype: DecodeF8E4M3 length mismatch")
	}
	for i, b := range src {
		dst[i] = f8Table[b]
	}
}

// f8Table holds all 256 F8 E4M3FN values widened to float32.
var f8Table = func() (t [256]float32) {
	for i := range t {
		t[i] = F8E4M3ToF32(uint8(i))
	}
	return t
}()

// f16Table holds all 65536 halves widened to float32 (256 KiB, built on first use).
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return t
})

// EncodeBF16 narrows to little-endian bfloat16 (see F32ToBF16). len(dst) must be 2*len(src).
func EncodeBF16(dst []byte, src []float32) {
	if len(dst) != 2*len(src) {
		panic("dtype: EncodeBF16 length mismatch")
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(f))
	}
}

// EncodeF16 narrows to little-endian IEEE half (see F32ToF16). len(dst) must be 2*len(src).
func EncodeF16(dst []byte, src []float32) {
	if len(dst) != 2*len(src) {
		panic("dtype: EncodeF16 length mismatch")
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(f))
	}
}

// EncodeF32 writes little-endian float32 values bit for bit. len(dst) must be 4*len(src).
func EncodeF32(dst []byte, src []float32) {
	if len(dst) != 4*len(src) {
		panic("dtype: EncodeF32 length mismatch")
	}
	for i, f := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
	}
}

// EncodeF8E4M3 narrows to F8 E4M3FN bytes (see F32ToF8E4M3: nearest even, saturating at
// ±448). len(dst) must be len(src).
func EncodeF8E4M3(dst []byte, src []float32) {
	if len(dst) != len(src) {
		panic("dtype: EncodeF8E4M3 length mismatch")
	}
	for i, f := range src {
		dst[i] = F32ToF8E4M3(f)
	}
}
