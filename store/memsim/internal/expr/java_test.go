package expr

import (
	"slices"
	"strings"
	"testing"
)

// Which of several errors DynamoDB reports follows the iteration order of
// Java's HashMap over java.lang.String hash codes; the emulation must
// compute them as Java does. The expected values are Java's own.
func TestJavaStringHash(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322},
		{"Aa", 2112},
		{"BB", 2112},
		{"polygenelubricants", -2147483648}, // overflows to Integer.MIN_VALUE
		{"é", 233},
		{"😀", 31*0xD83D + 0xDE00}, // a surrogate pair
		{"a😀b", (31*(31*(31*97+0xD83D)+0xDE00) + 98)},
	} {
		if got := javaStringHash(c.s); got != c.want {
			t.Errorf("javaStringHash(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

// A HashMap iterates by bucket of its final table (16 buckets, doubled
// past three quarters full), then in insertion order within a bucket.
func TestJavaOrder(t *testing.T) {
	if got := javaOrder([]int32{16, 1}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("16 buckets: %v, want [0 1] (16 and 0 share bucket 0)", got)
	}
	if got := javaOrder([]int32{17, 1}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("a shared bucket keeps insertion order: %v", got)
	}
	if got := javaOrder([]int32{2, 1}); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("%v, want [1 0]", got)
	}
	if got := javaOrder([]int32{0x10000, 0}); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("the high half is folded in: %v, want [1 0] (0x10000 goes to bucket 1)", got)
	}
	// Twelve keys fit 16 buckets; the thirteenth doubles the table, and
	// 16 no longer shares bucket 0 with 0.
	twelve := []int32{16, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	if got := javaOrder(twelve); got[0] != 0 || got[1] != 1 {
		t.Errorf("12 keys: %v, want 16 then 0 first (bucket 0 of 16)", got)
	}
	if got := javaOrder(append(twelve, 12)); got[0] != 1 || got[len(got)-1] != 0 {
		t.Errorf("13 keys: %v, want 0 first and 16 last (bucket 16 of 32)", got)
	}
}

// Expression sizes count UTF-16 code units, as DynamoDB's Java does: a
// character past U+FFFF counts two; an expression of exactly 4,096 is
// accepted, one more is not.
func TestExpressionSizesInUTF16(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int
	}{{"a", 1}, {"é", 1}, {"\uffff", 1}, {"𐀀", 2}, {"a😀", 3}} {
		if got := utf16Len(c.s); got != c.want {
			t.Errorf("utf16Len(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	if javaStringHash("𐀀") != 31*0xD800+0xDC00 {
		t.Error("U+10000 is not hashed as a surrogate pair")
	}
	at := func(n int) string { return "attribute_exists(#a)" + strings.Repeat(" ", n-len("attribute_exists(#a)")) }
	for _, c := range []struct {
		update, cond string
		ok           bool
	}{
		{"", at(maxExpressionSize), true},
		{"", at(maxExpressionSize + 1), false},
		{"SET #a = :v" + strings.Repeat(" ", maxExpressionSize-11), "", true},
		{"SET #a = :v" + strings.Repeat(" ", maxExpressionSize-10), "", false},
	} {
		if _, err := Parse(c.update, c.cond); (err == nil) != c.ok {
			t.Errorf("an expression of %d units: %v, want ok %v", utf16Len(c.update+c.cond), err, c.ok)
		}
	}
}

// Number arithmetic in updates stops at the int64 range: a result past
// it is an overflow, not a wrapped number.
func TestNumberArithmeticOverflows(t *testing.T) {
	const minI, maxI = -1 << 63, 1<<63 - 1
	for _, c := range []struct {
		x, y     int64
		minus    bool
		overflow bool
	}{
		{0, minI, true, true},     // 0 - MinInt64 = 2^63
		{minI, minI, false, true}, // wraps to 0
		{maxI, 1, false, true},
		{minI, 1, true, true},
		{-1, maxI, true, false},
		{maxI, maxI, true, false},
		{minI, maxI, false, false},
	} {
		_, e := add(c.x, c.y, c.minus)
		if (e == msgOverflow) != c.overflow {
			t.Errorf("add(%d, %d, minus %v): overflow %v, want %v", c.x, c.y, c.minus, e == msgOverflow, c.overflow)
		}
	}
}

// The lexer at its edges: a name that starts with z or Z, list indexes
// with the digits 9 and 0, and comparison operators at the very end of an
// expression (a syntax error, not a read past the end).
func TestLexerEdges(t *testing.T) {
	for _, ok := range []string{"z = :v", "Z = :v", "a[9] = :v", "a[10] = :v", "a[90] = :v"} {
		if _, err := Parse("SET "+ok, ""); err != nil {
			t.Errorf("SET %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"a <", "a >", "a <=", "a >=", "a <>", "a =", "a !"} {
		if _, err := Parse("", bad); err == nil {
			t.Errorf("condition %q parsed", bad)
		}
	}
}
