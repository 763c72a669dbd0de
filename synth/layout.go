package synth

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
)

// FileOrder returns the roster in the order Hugging Face's safetensors library lays tensors
// out in a file: wider dtypes first, then by name. synth writes files in this order, which
// is what makes the k3-full draft exactly as large as the real one (its header's offsets
// have the real digit counts).
func (r Roster) FileOrder() Roster {
	out := slices.Clone(r)
	slices.SortStableFunc(out, func(a, b Tensor) int {
		if c := cmp.Compare(dtypeBytes(b.Dtype), dtypeBytes(a.Dtype)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// FileSize returns the size in bytes of the single safetensors file holding the roster in
// the given order with metadata: 8 + header + data, where the header is compact JSON
// ({"__metadata__":{...},"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...}) padded
// with spaces to a multiple of 8. It computes, without writing anything, what
// safetensors.WriteFile produces.
func (r Roster) FileSize(metadata map[string]string) int64 {
	quoted := func(s string) int64 {
		b, _ := json.Marshal(s) // strings always marshal
		return int64(len(b))
	}
	h := int64(2) // { }
	if len(metadata) > 0 {
		h += int64(len(`"__metadata__":{}`))
		for i, k := range slices.Sorted(maps.Keys(metadata)) {
			if i > 0 {
				h++
			}
			h += quoted(k) + 1 + quoted(metadata[k])
		}
	}
	var pos int64
	for i := range r {
		t := &r[i]
		if i > 0 || len(metadata) > 0 {
			h++ // ,
		}
		h += quoted(t.Name) + int64(len(`:{"dtype":,"shape":[],"data_offsets":[,]}`)) + quoted(string(t.Dtype))
		for j, d := range t.Shape {
			if j > 0 {
				h++
			}
			h += int64(len(strconv.FormatInt(d, 10)))
		}
		n := t.Bytes()
		h += int64(len(strconv.FormatInt(pos, 10)) + len(strconv.FormatInt(pos+n, 10)))
		pos += n
	}
	h += (8 - h%8) % 8
	return 8 + h + pos
}
