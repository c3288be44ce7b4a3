package expr

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// TestFixContract: Fix takes exactly the pairs it documents: an
// expression with an update or a condition (a condition alone is enough),
// its names resolved by the map, its values located in the list in any
// order; the values reach their placeholders whatever that order.
func TestFixContract(t *testing.T) {
	if _, ok := mustParse(t, "", "").Fix(map[string]string{}, nil); ok {
		t.Error("Fix accepted an empty expression")
	}
	if _, ok := mustParse(t, "", "#a = :v").Fix(names{"#a": "a"}, []string{":v"}); !ok {
		t.Error("Fix refused a condition alone")
	}
	if _, ok := mustParse(t, "SET #a = :v", "").Fix(nil, []string{":v"}); ok {
		t.Error("Fix accepted a name placeholder without names")
	}
	p := mustParse(t, "SET #a = :v, #b = :w", "")
	f, ok := p.Fix(names{"#a": "a", "#b": "b"}, []string{":w", ":v"})
	if !ok {
		t.Fatal("Fix refused values in another order")
	}
	b, ok, err := f.Bind([]store.Value{N(2), N(1)}, isKey) // :w = 2, :v = 1
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	got, _, err := b.Apply(nil, testKey)
	if want := item("PK", S("p"), "SK", S("s"), "a", N(1), "b", N(2)); err != nil || !sameItem(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	// Heads: -1 for an action whose path is not one name placeholder.
	f, _ = mustParse(t, "SET #a.b = :v, c = :v, #d = :v", "").Fix(names{"#a": "a", "#d": "d"}, []string{":v"})
	if h := f.Heads(); len(h) != 3 || h[0] != -1 || h[1] != -1 || h[2] != 1 {
		t.Errorf("heads %v, want [-1 -1 1]", h)
	}
}

// TestNested: Nested says whether a path of more than one element appears
// anywhere in the expressions, so that the backend knows when Bind needs
// the key schema although no action writes a key.
func TestNested(t *testing.T) {
	for _, c := range []struct {
		update, cond string
		want         bool
	}{
		{"SET a = :v", "", false},
		{"SET a = b + :v", "a = :v AND attribute_exists(b) OR NOT c = :v", false},
		{"SET a = if_not_exists(b, :v)", "size(a) > :v", false},
		{"SET a.b = :v", "", true},
		{"SET a = b.c", "", true},
		{"SET a = :v + b.c", "", true},
		{"SET a = if_not_exists(b.c, :v)", "", true},
		{"REMOVE a[1]", "", true},
		{"", "a.b = :v", true},
		{"", "a = :v AND b.c = :v", true},
		{"", "NOT a.b = :v", true},
		{"", "begins_with(a.b, :v)", true},
		{"", "size(a.b) > :v", true},
	} {
		if got := mustParse(t, c.update, c.cond).nested; got != c.want {
			t.Errorf("%q %q: nested %v, want %v", c.update, c.cond, got, c.want)
		}
	}
}

// TestProgramShapes: only the flat shapes a rate limiter's templates have
// run as a Program; anything else (a raw attribute name, a nested path,
// another operator or function, a value where an attribute belongs) is
// left to Check and Apply, which a Program could not reproduce.
func TestProgramShapes(t *testing.T) {
	n := names{"#a": "a", "#b": "b", "#c": "c"}
	for _, c := range []struct {
		update, cond string
		want         bool
	}{
		{"SET #a = :v ADD #b :w REMOVE #c", "", true},
		{"SET #a = if_not_exists(#b, :v)", "", true},
		{"SET #a = if_not_exists(#b, :v) + :w", "", true},
		{"SET #a = if_not_exists(#b, :v) - :w", "", true},
		{"", "#a = :v AND #b < :w AND attribute_exists(#c)", true},
		{"", "attribute_not_exists(#a)", true},
		{"SET a = :v", "", false},
		{"SET #a.b = :v", "", false},
		{"SET #a = :v + :w", "", false},
		{"SET #a = #b", "", false},
		{"SET #a = if_not_exists(#b, :v) + #c", "", false},
		{"SET #a = if_not_exists(b, :v)", "", false},
		{"SET #a = if_not_exists(#b.c, :v)", "", false},
		{"SET #a = if_not_exists(:v, #b)", "", false},
		{"DELETE #a :v", "", false},
		{"", "a = :v", false},
		{"", "#a.b = :v", false},
		{"", ":v = #a", false},
		{"", "#a = #b", false},
		{"", "#a = :v OR #b = :v", true},
		{"", "#a >= :v AND (#b = :v OR (#c <= :w AND attribute_not_exists(#a)))", true},
		{"", "#a = :v OR #b.c = :v", false},
		{"", "#a = :v OR NOT #b = :v", false},
		{"", "NOT #a = :v", false},
		{"", "#a IN (:v)", false},
		{"", "#a BETWEEN :v AND :w", false},
		{"", "begins_with(#a, :v)", false},
		{"", "contains(#a, :v)", false},
		{"", "attribute_type(#a, :v)", false},
		{"", "attribute_exists(a)", false},
		{"", "attribute_exists(#a.b)", false},
		{"", "size(#a) = :v", false},
	} {
		p, err := Parse(c.update, c.cond)
		if err != nil {
			t.Fatalf("%q %q: %v", c.update, c.cond, err)
		}
		used := names{}
		for _, ph := range p.names {
			used[ph] = n[ph]
		}
		f, ok := p.Fix(used, p.values)
		if !ok {
			t.Fatalf("%q %q: Fix refused", c.update, c.cond)
		}
		if got := f.Program() != nil; got != c.want {
			t.Errorf("%q %q: a Program %v, want %v", c.update, c.cond, got, c.want)
		}
	}
}
