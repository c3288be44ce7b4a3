package bucket

import (
	"errors"
	"iter"
	"maps"
	"math"
	"slices"
	"testing"
)

// attrs adapts a list of attribute pairs to Decode's iterator.
type attrList []struct {
	k string
	v int64
}

func (l attrList) seq() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		for _, a := range l {
			if !yield(a.k, a.v) {
				return
			}
		}
	}
}

func collect(c Composite) attrList {
	var l attrList
	for k, v := range c.Attrs() {
		l = append(l, struct {
			k string
			v int64
		}{k, v})
	}
	return l
}

func TestAttrName(t *testing.T) {
	for _, tt := range []struct{ limit, field, want string }{
		{"rpm", FieldTokens, "b_rpm_tk"},
		{"a_b", FieldBurst, "b_a_b_bx"},
		{"gpt_4_turbo", FieldTotalConsumed, "b_gpt_4_turbo_tc"},
	} {
		if got := AttrName(tt.limit, tt.field); got != tt.want {
			t.Errorf("AttrName(%q, %q) = %q, want %q", tt.limit, tt.field, got, tt.want)
		}
	}
}

func TestParseAttrName(t *testing.T) {
	tests := []struct {
		attr, limit, field string
		ok                 bool
	}{
		{"b_rpm_tk", "rpm", "tk", true},
		{"b_a_b_tk", "a_b", "tk", true},
		{"b_gpt_4_turbo_rp", "gpt_4_turbo", "rp", true},
		{"b_gpt-3.5_cp", "gpt-3.5", "cp", true},
		{"b_x_bx", "x", "bx", true},
		{"b_x_ra", "x", "ra", true},
		{"b_x_tc", "x", "tc", true},
		{"b_tk_tk", "tk", "tk", true},     // a limit may be named like a field
		{"b_a_tk_cp", "a_tk", "cp", true}, // parsed from the right
		{"b_wcu_tk", "wcu", "tk", true},   // the hidden limit is a limit here
		{"b__tk", "", "", false},          // empty limit name
		{"b_tk", "", "", false},
		{"b_rpm_xx", "", "", false}, // unknown field
		{"b_rpm_rf", "", "", false},
		{"b_rpm_TK", "", "", false},
		{"b_rpmtk", "", "", false},
		{"rf", "", "", false},
		{"ttl", "", "", false},
		{"B_rpm_tk", "", "", false},
		{"x_rpm_tk", "", "", false},
		{"", "", "", false},
		{"b_", "", "", false},
		{"b_r_t", "", "", false},
	}
	for _, tt := range tests {
		limit, field, ok := ParseAttrName(tt.attr)
		if limit != tt.limit || field != tt.field || ok != tt.ok {
			t.Errorf("ParseAttrName(%q) = (%q, %q, %v), want (%q, %q, %v)",
				tt.attr, limit, field, ok, tt.limit, tt.field, tt.ok)
		}
	}
}

func TestParseAttrNameAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { ParseAttrName("b_gpt_4_turbo_tk") }); n != 0 {
		t.Errorf("ParseAttrName allocates %v times", n)
	}
}

// Decode allocates twice for an item of up to four limits (the decoder,
// which holds them, and the function that feeds it), and the result has no
// spare capacity: a Set on it copies instead of writing into the decoder.
func TestDecodeAllocs(t *testing.T) {
	seq := collect(sample()).seq()
	if n := testing.AllocsPerRun(100, func() { _, _ = Decode(seq) }); n > 2 {
		t.Errorf("Decode of %d limits allocates %v times, want at most 2", len(sample().Limits), n)
	}
	c, err := Decode(seq)
	if err != nil {
		t.Fatal(err)
	}
	if cap(c.Limits) != len(c.Limits) {
		t.Errorf("Decode's limits have capacity %d for %d limits", cap(c.Limits), len(c.Limits))
	}
}

func sample() Composite {
	return Composite{
		Refill: T0,
		Limits: []Named{
			{"a_b", State{Limit: Limit{1, 2, 3, 4}, Tokens: -5, TotalConsumed: 6}},
			{"gpt_4_turbo", State{Limit: Limit{MaxTokens, MaxTokens, MaxTokens, MaxRefillPeriod}, Tokens: math.MinInt64, TotalConsumed: math.MaxInt64}},
			{"rpm", State{Limit: rpm100, Tokens: 99_000, TotalConsumed: 1000}},
			{"tpm", State{Limit: Limit{10_000_000, 10_000_000, 10_000_000, 60_000}, Tokens: 9_500_000, TotalConsumed: 500_000}},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	c := sample()
	got, err := Decode(c.Attrs())
	if err != nil {
		t.Fatal(err)
	}
	if !equalComposite(got, c) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
	}
}

func equalComposite(a, b Composite) bool {
	return a.Refill == b.Refill && slices.Equal(a.Limits, b.Limits)
}

func TestAttrsOrder(t *testing.T) {
	c := Composite{Refill: 7, Limits: []Named{
		{"a_b", State{Limit: Limit{1, 2, 3, 4}, Tokens: 5, TotalConsumed: 6}},
		{"rpm", State{Limit: Limit{11, 12, 13, 14}, Tokens: 15, TotalConsumed: 16}},
	}}
	want := attrList{
		{"rf", 7},
		{"b_a_b_tk", 5}, {"b_a_b_cp", 1}, {"b_a_b_bx", 2}, {"b_a_b_ra", 3}, {"b_a_b_rp", 4}, {"b_a_b_tc", 6},
		{"b_rpm_tk", 15}, {"b_rpm_cp", 11}, {"b_rpm_bx", 12}, {"b_rpm_ra", 13}, {"b_rpm_rp", 14}, {"b_rpm_tc", 16},
	}
	if got := collect(c); !slices.Equal(got, want) {
		t.Errorf("Attrs:\n got %v\nwant %v", got, want)
	}
	// Stopping early is honoured, after any attribute (the range panics
	// if the iterator goes on).
	for stop := 1; stop <= len(want); stop++ {
		n := 0
		for range c.Attrs() {
			n++
			if n == stop {
				break
			}
		}
		if n != stop {
			t.Errorf("a range that stops after %d attributes saw %d", stop, n)
		}
	}
	if got := collect(Composite{Refill: 9}); !slices.Equal(got, attrList{{"rf", 9}}) {
		t.Errorf("Attrs of empty composite = %v", got)
	}
}

// TestDecodeOrderIndependent decodes every rotation and the reverse of the
// attributes, plus a map's random order, and expects the same result.
func TestDecodeOrderIndependent(t *testing.T) {
	c := sample()
	base := collect(c)
	m := maps.Collect(c.Attrs())
	for i := range base {
		l := append(slices.Clone(base[i:]), base[:i]...)
		if i%2 == 1 {
			slices.Reverse(l)
		}
		got, err := Decode(l.seq())
		if err != nil || !equalComposite(got, c) {
			t.Fatalf("rotation %d: %+v, %v", i, got, err)
		}
		got, err = Decode(maps.All(m))
		if err != nil || !equalComposite(got, c) {
			t.Fatalf("map order: %+v, %v", got, err)
		}
	}
}

// TestDecodeManyLimits crosses the threshold where Decode indexes names.
func TestDecodeManyLimits(t *testing.T) {
	var c Composite
	c.Refill = 1
	for i := range 50 {
		name := string(rune('a'+i%26)) + "_" + string(rune('a'+i/26))
		c.Set(name, State{Limit: rpm100, Tokens: int64(i), TotalConsumed: int64(-i)})
	}
	if !slices.IsSortedFunc(c.Limits, func(a, b Named) int { return compareNames(a.Name, b.Name) }) {
		t.Fatal("Set does not keep Limits sorted")
	}
	got, err := Decode(maps.All(maps.Collect(c.Attrs())))
	if err != nil || !equalComposite(got, c) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func compareNames(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestDecodeIgnoresUnknown(t *testing.T) {
	l := collect(sample())
	l = append(l, attrList{
		{"ttl", 1}, {"shard_count", 4}, {"b__tk", 1}, {"b_rpm_zz", 3}, {"b_tk", 2}, {"PK", 0}, {"b_", 9},
	}...)
	got, err := Decode(l.seq())
	if err != nil || !equalComposite(got, sample()) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestDecodeEmpty(t *testing.T) {
	got, err := Decode(attrList{{"ttl", 5}, {"shard_count", 1}}.seq())
	if err != nil || got.Refill != 0 || got.Limits != nil {
		t.Fatalf("no bucket data: got %+v, %v", got, err)
	}
	got, err = Decode(attrList{{"rf", 5}}.seq())
	if err != nil || got.Refill != 5 || got.Limits != nil {
		t.Fatalf("rf only: got %+v, %v", got, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	full := func(name string) attrList {
		c := Composite{Limits: []Named{{name, State{Limit: rpm100}}}}
		return collect(c)[1:]
	}
	without := func(l attrList, attr string) attrList {
		return slices.DeleteFunc(slices.Clone(l), func(a struct {
			k string
			v int64
		}) bool {
			return a.k == attr
		})
	}
	with := func(l attrList, attr string, v int64) attrList {
		l = slices.Clone(l)
		for i := range l {
			if l[i].k == attr {
				l[i].v = v
			}
		}
		return l
	}
	rf := attrList{{"rf", T0}}
	tests := []struct {
		name  string
		attrs attrList
		want  string
	}{
		{"missing bx", append(without(full("rpm"), "b_rpm_bx"), rf...),
			`bucket: limit "rpm": missing attribute b_rpm_bx`},
		{"missing tk and tc", append(without(without(full("rpm"), "b_rpm_tc"), "b_rpm_tk"), rf...),
			`bucket: limit "rpm": missing attribute b_rpm_tk`},
		{"only tc", attrList{{"rf", 1}, {"b_a_b_tc", 3}},
			`bucket: limit "a_b": missing attribute b_a_b_tk`},
		{"missing rf", full("rpm"),
			`bucket: limit "rpm": missing attribute rf`},
		{"missing rf, smallest name", append(full("tpm"), full("rpm")...),
			`bucket: limit "rpm": missing attribute rf`},
		{"smallest name first", slices.Concat(without(full("tpm"), "b_tpm_cp"), without(full("rpm"), "b_rpm_ra"), rf),
			`bucket: limit "rpm": missing attribute b_rpm_ra`},
		{"limit errors before rf", without(full("rpm"), "b_rpm_cp"),
			`bucket: limit "rpm": missing attribute b_rpm_cp`},
		{"rp zero", append(with(full("rpm"), "b_rpm_rp", 0), rf...),
			`bucket: limit "rpm": attribute b_rpm_rp = 0 out of range [1, 31622400000]`},
		{"rp too long", append(with(full("rpm"), "b_rpm_rp", MaxRefillPeriod+1), rf...),
			`bucket: limit "rpm": attribute b_rpm_rp = 31622400001 out of range [1, 31622400000]`},
		{"cp negative", append(with(full("rpm"), "b_rpm_cp", -1), rf...),
			`bucket: limit "rpm": attribute b_rpm_cp = -1 out of range [1, 1000000000000000]`},
		{"bx too big", append(with(full("rpm"), "b_rpm_bx", MaxTokens+1), rf...),
			`bucket: limit "rpm": attribute b_rpm_bx = 1000000000000001 out of range [1, 1000000000000000]`},
		{"ra zero", append(with(full("rpm"), "b_rpm_ra", 0), rf...),
			`bucket: limit "rpm": attribute b_rpm_ra = 0 out of range [1, 1000000000000000]`},
		{"missing before out of range", append(with(without(full("rpm"), "b_rpm_bx"), "b_rpm_rp", 0), rf...),
			`bucket: limit "rpm": missing attribute b_rpm_bx`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every order of the attributes gives the same error.
			for i := range tt.attrs {
				l := append(slices.Clone(tt.attrs[i:]), tt.attrs[:i]...)
				if i%2 == 1 {
					slices.Reverse(l)
				}
				c, err := Decode(l.seq())
				var de *DecodeError
				if !errors.As(err, &de) || err.Error() != tt.want {
					t.Fatalf("order %d: Decode error = %v, want %s", i, err, tt.want)
				}
				if c.Limits != nil || c.Refill != 0 {
					t.Fatalf("order %d: non-zero Composite with error: %+v", i, c)
				}
			}
		})
	}
}

func TestDecodeUnboundedCounters(t *testing.T) {
	c := Composite{Refill: math.MinInt64, Limits: []Named{
		{"x", State{Limit: rpm100, Tokens: math.MaxInt64, TotalConsumed: math.MinInt64}},
	}}
	got, err := Decode(c.Attrs())
	if err != nil || !equalComposite(got, c) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestDecodeDuplicateLastWins(t *testing.T) {
	l := append(collect(sample()), attrList{{"b_rpm_tk", 42}, {"rf", 8}}...)
	got, err := Decode(l.seq())
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := got.Get("rpm"); s.Tokens != 42 || got.Refill != 8 {
		t.Fatalf("got %+v", got)
	}
}

func TestGetSet(t *testing.T) {
	c := sample()
	s, ok := c.Get("rpm")
	if !ok || s.Tokens != 99_000 {
		t.Fatalf("Get(rpm) = %+v, %v", s, ok)
	}
	if _, ok := c.Get("nope"); ok {
		t.Fatal("Get(nope) found")
	}
	s.Tokens = 1
	c.Set("rpm", s)
	c.Set("b", State{Limit: rpm100})
	c.Set("zz", State{Limit: rpm100})
	c.Set("0", State{Limit: rpm100})
	var names []string
	for _, n := range c.Limits {
		names = append(names, n.Name)
	}
	if want := []string{"0", "a_b", "b", "gpt_4_turbo", "rpm", "tpm", "zz"}; !slices.Equal(names, want) {
		t.Fatalf("names after Set = %v, want %v", names, want)
	}
	if s, _ := c.Get("rpm"); s.Tokens != 1 {
		t.Fatalf("Set did not replace: %+v", s)
	}
	var empty Composite
	empty.Set("x", State{})
	if len(empty.Limits) != 1 {
		t.Fatal("Set on empty Composite")
	}
}

// A DecodeError a caller builds itself has a message too, whatever its
// attribute name: a name too short to end in a field has no field bounds.
func TestDecodeErrorOfAnyAttribute(t *testing.T) {
	for _, tt := range []struct {
		e    DecodeError
		want string
	}{
		{DecodeError{Limit: "rpm", Attr: "b_rpm_cp", Value: 0}, `bucket: limit "rpm": attribute b_rpm_cp = 0 out of range [1, 1000000000000000]`},
		{DecodeError{Limit: "rpm", Attr: "p", Value: 7}, `bucket: limit "rpm": attribute p = 7 out of range [-9223372036854775808, 9223372036854775807]`},
		{DecodeError{}, `bucket: limit "": attribute  = 0 out of range [-9223372036854775808, 9223372036854775807]`},
		{DecodeError{Limit: "rpm", Attr: "rf", Missing: true}, `bucket: limit "rpm": missing attribute rf`},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %s, want %s", tt.e, got, tt.want)
		}
	}
}
