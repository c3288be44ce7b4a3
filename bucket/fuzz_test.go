package bucket

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func FuzzParseAttrName(f *testing.F) {
	for _, s := range []string{"b_rpm_tk", "b_a_b_tc", "b__tk", "b_tk", "rf", "", "b_x_zz", "b_\xff_rp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, attr string) {
		limit, field, ok := ParseAttrName(attr)
		if !ok {
			if limit != "" || field != "" {
				t.Fatalf("ok = false with (%q, %q)", limit, field)
			}
			return
		}
		if limit == "" || !slices.Contains(fields[:], field) || AttrName(limit, field) != attr {
			t.Fatalf("ParseAttrName(%q) = (%q, %q)", attr, limit, field)
		}
	})
}

// FuzzDecode feeds Decode a comma-separated list of attribute names with
// values derived from two seeds. Decode must not panic; on success its
// result must be sorted and must survive a round trip; on failure the error
// must be a *DecodeError.
func FuzzDecode(f *testing.F) {
	f.Add("rf,b_rpm_tk,b_rpm_cp,b_rpm_bx,b_rpm_ra,b_rpm_rp,b_rpm_tc", int64(1000), int64(7))
	f.Add("b_a_b_tk,b_a_b_cp,b_a_b_bx,b_a_b_ra,b_a_b_rp,b_a_b_tc,rf,ttl", int64(1), int64(1))
	f.Add("b_rpm_tk,b_rpm_cp", int64(-1), int64(math.MaxInt64))
	f.Add("rf,b__tk,b_tk,x", int64(0), int64(0))
	f.Fuzz(func(t *testing.T, list string, v, step int64) {
		attrs := strings.Split(list, ",")
		seq := func(yield func(string, int64) bool) {
			x := v
			for _, a := range attrs {
				if !yield(a, x) {
					return
				}
				x += step
			}
		}
		c, err := Decode(seq)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Error() == "" {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		if !slices.IsSortedFunc(c.Limits, func(a, b Named) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("unsorted: %+v", c)
		}
		again, err := Decode(c.Attrs())
		if err != nil || !equalComposite(again, c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, again, err)
		}
	})
}

// FuzzState checks the refill math against the math/big reference on
// inputs folded into the documented domain.
func FuzzState(f *testing.F) {
	f.Add(int64(100_000), int64(100_000), int64(60_000), int64(90_000), int64(0), int64(1000), int64(3000))
	f.Add(MaxTokens, MaxTokens, int64(1), int64(math.MinInt64/2), int64(math.MinInt64), int64(math.MaxInt64), int64(0))
	f.Fuzz(func(t *testing.T, bx, ra, rp, tk, rf, now, need int64) {
		fold := func(v, lo, hi int64) int64 {
			if v >= lo && v <= hi {
				return v
			}
			return lo + int64(uint64(v)%uint64(hi-lo+1))
		}
		s := State{Limit: Limit{
			Burst:        fold(bx, 0, MaxTokens),
			RefillAmount: fold(ra, 0, MaxTokens),
			RefillPeriod: fold(rp, 1, MaxRefillPeriod),
		}, Tokens: tk}
		want := refEffective(s, rf, now)
		if got := s.Effective(rf, now); !want.IsInt64() || got != want.Int64() {
			t.Fatalf("%+v: Effective(%d, %d) = %d, reference %v", s, rf, now, got, want)
		}
		w, ok := s.RetryAfter(rf, now, need)
		if rw, rok := refRetryAfter(s, rf, now, need); w != rw || ok != rok {
			t.Fatalf("%+v: RetryAfter(%d, %d, %d) = (%d, %v), reference (%d, %v)", s, rf, now, need, w, ok, rw, rok)
		}
	})
}
