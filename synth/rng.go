package synth

import (
	"hash/fnv"
	"math"
	"sync"
)

// Generator derives every synthetic value from (seed, tensor name, element index).
//
// The per-tensor key is mix64(seed XOR FNV-1a-64(name)). Element i belongs to block
// j = i/4; block j's 64 random bits are r_j = mix64(key + (j+1)*0x9E3779B97F4A7C15), the
// SplitMix64 step, evaluated at counter j rather than iterated, so any chunk of any tensor
// can be produced without producing what precedes it. Element i takes the 16-bit lane
// i%4 of r_j (bits 16*(i%4) .. 16*(i%4)+15), u, and maps it to the standard normal quantile
// z(u) = Phi^-1((u + 0.5) / 65536), a Gaussian sampled at 65536 equally likely points
// (|z| <= 4.17). Values that need more than 16 bits of randomness (F32 uniforms) use the
// top 53 bits of r_i with one block per element.
type Generator struct {
	Seed uint64
}

const golden = 0x9E3779B97F4A7C15

// mix64 is the SplitMix64 output function (Steele, Lea and Flood 2014; the constants of
// Vigna's splitmix64.c): a bijection on uint64 with good avalanche.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xBF58476D1CE4E5B9
	z ^= z >> 27
	z *= 0x94D049BB133111EB
	z ^= z >> 31
	return z
}

// Key returns the stream key of the tensor called name.
func (g Generator) Key(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return mix64(g.Seed ^ h.Sum64())
}

// block returns the 64 random bits of block j of the stream key.
func block(key uint64, j int64) uint64 {
	return mix64(key + uint64(j+1)*golden)
}

// Lane16 returns the 16 random bits of element i of the stream key.
func Lane16(key uint64, i int64) uint16 {
	return uint16(block(key, i/4) >> (16 * uint(i%4)))
}

// Uniform returns element i of the stream key as a float64 uniform on [0, 1) with 53
// random bits (one block per element).
func Uniform(key uint64, i int64) float64 {
	return float64(block(key, i)>>11) * (1.0 / (1 << 53))
}

var (
	quantilesOnce sync.Once
	quantiles     *[65536]float32
)

// normalQuantiles returns the table z(u) = Phi^-1((u + 0.5) / 65536), u = 0..65535,
// computed once with math.Erfinv: Phi^-1(p) = sqrt(2) * erfinv(2p - 1).
func normalQuantiles() *[65536]float32 {
	quantilesOnce.Do(func() {
		var t [65536]float32
		for u := range t {
			p := (float64(u) + 0.5) / 65536
			t[u] = float32(math.Sqrt2 * math.Erfinv(2*p-1))
		}
		quantiles = &t
	})
	return quantiles
}

// Normal returns element i of the stream key as a standard normal quantile z(u).
func Normal(key uint64, i int64) float32 {
	return normalQuantiles()[Lane16(key, i)]
}
