package bucket

import (
	"maps"
	"testing"
)

var sinkInt int64
var sinkBool bool

func BenchmarkEffective(b *testing.B) {
	s := State{Limit: rpm100, Tokens: 90_000}
	for i := range b.N {
		sinkInt += s.Effective(T0, T0+int64(i&1023))
	}
}

// BenchmarkEffectiveIdle takes the path where the 128-bit product
// saturates: a bucket idle for ten years at the maximum rate.
func BenchmarkEffectiveIdle(b *testing.B) {
	s := State{Limit: maxRate, Tokens: -1}
	for i := range b.N {
		sinkInt += s.Effective(T0, T0+tenYears+int64(i&1023))
	}
}

func BenchmarkRetryAfter(b *testing.B) {
	s := State{Limit: rpm100, Tokens: -5000}
	for i := range b.N {
		w, ok := s.RetryAfter(T0, T0+int64(i&1023), 1000)
		sinkInt += w
		sinkBool = sinkBool != ok
	}
}

func composite3() Composite {
	return Composite{Refill: T0, Limits: []Named{
		{"rpm", State{Limit: rpm100, Tokens: 99_000, TotalConsumed: 1000}},
		{"tpm", State{Limit: Limit{10_000_000, 10_000_000, 10_000_000, 60_000}, Tokens: 9_500_000, TotalConsumed: 500_000}},
		{"wcu", State{Limit: Limit{1_000_000, 1_000_000, 1_000_000, 1000}, Tokens: 998_000, TotalConsumed: 2000}},
	}}
}

// BenchmarkDecode3 decodes a 3-limit composite (19 attributes) from a slice.
func BenchmarkDecode3(b *testing.B) {
	seq := collect(composite3()).seq()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(seq); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode3Map decodes the same composite from a map with a few
// non-bucket attributes, as a store item would be, including the map
// iteration.
func BenchmarkDecode3Map(b *testing.B) {
	m := maps.Collect(composite3().Attrs())
	m["ttl"], m["shard_count"] = 1, 1
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(maps.All(m)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAttrs3 encodes a 3-limit composite.
func BenchmarkAttrs3(b *testing.B) {
	c := composite3()
	b.ReportAllocs()
	for b.Loop() {
		for _, v := range c.Attrs() {
			sinkInt += v
		}
	}
}

func BenchmarkParseAttrName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, f, ok := ParseAttrName("b_gpt_4_turbo_tk")
		sinkBool = sinkBool != ok
		sinkInt += int64(len(f))
	}
}
