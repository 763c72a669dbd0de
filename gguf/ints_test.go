package gguf

import (
	"math"
	"slices"
	"testing"
)

func TestValueInts(t *testing.T) {
	for _, c := range []struct {
		v    Value
		want []int64
	}{
		{I32s([]int32{-1, 0, 7}), []int64{-1, 0, 7}},
		{U32s([]uint32{math.MaxUint32}), []int64{math.MaxUint32}},
		{U8s([]uint8{255, 1}), []int64{255, 1}},
		{I64s([]int64{math.MinInt64}), []int64{math.MinInt64}},
		{U64s([]uint64{math.MaxUint64, 3}), []int64{math.MaxInt64, 3}}, // clamped, still out of any range
	} {
		got, err := c.v.Ints()
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%v.Ints() = %v, %v; want %v", c.v, got, err, c.want)
		}
	}
	for _, v := range []Value{F32s([]float32{1}), Strs([]string{"1"}), U32(4)} {
		if got, err := v.Ints(); err == nil {
			t.Errorf("%v.Ints() = %v, want an error", v, got)
		}
	}
}
