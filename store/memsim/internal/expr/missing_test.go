package expr

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// TestMissingAttributes: in DynamoDB a comparison with a missing attribute
// is false, whatever the other side (another missing attribute included),
// and <> is its negation; size of a missing attribute or of a number is
// missing too. A condition that treated two missing attributes as equal,
// or as ordered, would let a conditional write through on an item that
// lacks the fields it guards.
func TestMissingAttributes(t *testing.T) {
	it := item("PK", S("p"), "SK", S("s"), "n", N(5), "m", N(7), "s", S("x"))
	v := values{":lo": N(1), ":hi": N(9), ":z": N(0), ":t": S("S")}
	for _, c := range []struct {
		cond string
		want bool
	}{
		{"a = b", false},
		{"a <> b", true},
		{"a < b", false},
		{"a <= b", false},
		{"a >= b", false},
		{"a > b", false},
		{"a BETWEEN :lo AND :hi", false},
		{"n BETWEEN :lo AND c", false},
		{"n BETWEEN c AND :hi", false},
		{"n BETWEEN :lo AND :hi", true},
		{"size(a) = size(b)", false},
		{"size(n) = size(m)", false},
		{"size(n) >= :z", false},
		{"size(a) <> size(b)", true},
		{"size(s) = :lo", true},
	} {
		b, err := bindUsed(t, "", c.cond, v)
		if err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		if got := b.Check(it); got != c.want {
			t.Errorf("%s on %v: %v, want %v", c.cond, it, got, c.want)
		}
	}
}

// TestBeginsWithAndContainsNeedStrings: begins_with and contains hold only
// for a string attribute and a string operand; a number does not begin
// with, nor contain, even the empty string, and a missing attribute holds
// nothing.
func TestBeginsWithAndContainsNeedStrings(t *testing.T) {
	it := item("PK", S("p"), "SK", S("s"), "n", N(5), "s", S("xyz"))
	for _, c := range []struct {
		cond string
		v    store.Value
		want bool
	}{
		{"begins_with(s, :v)", S("xy"), true},
		{"begins_with(s, :v)", S("yz"), false},
		{"begins_with(s, :v)", S(""), true},
		{"begins_with(n, :v)", S(""), false},
		{"begins_with(a, :v)", S(""), false},
		{"contains(s, :v)", S("yz"), true},
		{"contains(s, :v)", S("q"), false},
		{"contains(s, :v)", N(5), false},
		{"contains(n, :v)", S(""), false},
		{"contains(n, :v)", N(5), false},
		{"contains(a, :v)", S(""), false},
	} {
		b := bind(t, "", c.cond, nil, values{":v": c.v})
		if got := b.Check(it); got != c.want {
			t.Errorf("%s with :v = %v: %v, want %v", c.cond, c.v, got, c.want)
		}
	}
}

// TestApplyBuildsTheNewItem: an update that adds several attributes to a
// new item, or to an item that has only its key, writes every one of them;
// an update that only removes a nested attribute of a missing item creates
// nothing, as in DynamoDB.
func TestApplyBuildsTheNewItem(t *testing.T) {
	b := bind(t, "SET a = :v, b = :v, c = :v ADD d :v", "", nil, values{":v": N(1)})
	want := item("PK", S("p"), "SK", S("s"), "a", N(1), "b", N(1), "c", N(1), "d", N(1))
	for _, old := range []store.Item{nil, item("PK", S("p"), "SK", S("s"))} {
		got, _, err := b.Apply(old, testKey)
		if err != nil || !sameItem(got, want) {
			t.Fatalf("on %v: %v %v, want %v", old, got, err, want)
		}
	}
	got, touched, err := bind(t, "REMOVE a.b", "", nil, nil).Apply(nil, testKey)
	if err != nil || got != nil || touched != nil {
		t.Fatalf("REMOVE a.b on a missing item: %v %v %v, want nothing", got, touched, err)
	}
}
