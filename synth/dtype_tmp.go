package synth

import "math"

// Temporary until internal/dtype lands.
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

func toF8E4M3(f float32) uint8 { return uint8(int(f) & 0x7f) }
