package gguf

import (
	"encoding/binary"
	"math"
)

// rb builds GGUF byte sequences by hand, independently of the writer, so that tests can
// express edge cases the writer refuses to produce (v1, big-endian, nested arrays,
// malformed fields).
type rb struct {
	b      []byte
	be, v1 bool
}

func (r *rb) order() binary.AppendByteOrder {
	if r.be {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

func (r *rb) raw(p ...byte) *rb             { r.b = append(r.b, p...); return r }
func (r *rb) u8(x uint8) *rb                { return r.raw(x) }
func (r *rb) u16(x uint16) *rb              { r.b = r.order().AppendUint16(r.b, x); return r }
func (r *rb) u32(x uint32) *rb              { r.b = r.order().AppendUint32(r.b, x); return r }
func (r *rb) u64(x uint64) *rb              { r.b = r.order().AppendUint64(r.b, x); return r }
func (r *rb) f32(x float32) *rb             { return r.u32(math.Float32bits(x)) }
func (r *rb) pos() int                      { return len(r.b) }
func (r *rb) zeros(n int) *rb               { r.b = append(r.b, make([]byte, n)...); return r }
func (r *rb) padTo(align int) *rb           { return r.zeros((align - len(r.b)%align) % align) }
func (r *rb) key(k string, t ValueType) *rb { return r.str(k).u32(uint32(t)) }

// cnt writes a count or length: u32 in v1, u64 later.
func (r *rb) cnt(x uint64) *rb {
	if r.v1 {
		return r.u32(uint32(x))
	}
	return r.u64(x)
}

func (r *rb) str(s string) *rb { r.cnt(uint64(len(s))); r.b = append(r.b, s...); return r }

// header writes magic, version, tensor count and kv count.
func (r *rb) header(version uint32, nt, nkv uint64) *rb {
	r.raw('G', 'G', 'U', 'F').u32(version)
	return r.cnt(nt).cnt(nkv)
}

// info writes one tensor info.
func (r *rb) info(name string, t GGMLType, off uint64, dims ...uint64) *rb {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.cnt(d)
	}
	return r.u32(uint32(t)).u64(off)
}
