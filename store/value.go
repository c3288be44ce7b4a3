package store

import (
	"fmt"
	"iter"
	"maps"
	"strconv"
)

// valueKind is the type of a [Value].
type valueKind uint8

const (
	kindNone valueKind = iota // the zero Value: not a valid attribute value
	kindString
	kindNumber
)

// Value is an attribute value: a string or an int64 number. The zero Value is
// invalid; backends reject it.
type Value struct {
	s    string
	n    int64
	kind valueKind
}

// Str returns a string value.
func Str(s string) Value { return Value{s: s, kind: kindString} }

// Int returns a number value.
func Int(n int64) Value { return Value{n: n, kind: kindNumber} }

// Kind returns DynamoDB's type descriptor of v: "S" for a string, "N" for
// a number, "" for the zero Value. Two values of the same kind have the
// same Kind.
func (v Value) Kind() string {
	switch v.kind {
	case kindString:
		return "S"
	case kindNumber:
		return "N"
	}
	return ""
}

// IsValid reports whether v is a string or a number.
func (v Value) IsValid() bool { return v.kind == kindString || v.kind == kindNumber }

// AsString returns v's string and true, or "" and false when v is not a string.
func (v Value) AsString() (string, bool) { return v.s, v.kind == kindString }

// AsInt returns v's number and true, or 0 and false when v is not a number.
func (v Value) AsInt() (int64, bool) { return v.n, v.kind == kindNumber }

// Equal reports whether v and w have the same kind and value.
func (v Value) Equal(w Value) bool { return v == w }

// String formats v for humans and logs: numbers in decimal, strings quoted.
func (v Value) String() string {
	switch v.kind {
	case kindString:
		return strconv.Quote(v.s)
	case kindNumber:
		return strconv.FormatInt(v.n, 10)
	}
	return "<invalid>"
}

// GoString formats v as the Go expression that builds it.
func (v Value) GoString() string {
	switch v.kind {
	case kindString:
		return fmt.Sprintf("store.Str(%q)", v.s)
	case kindNumber:
		return fmt.Sprintf("store.Int(%d)", v.n)
	}
	return "store.Value{}"
}

// Item is one stored item: attribute name to value, key attributes included.
// A nil Item means "no item".
type Item map[string]Value

// Clone returns a copy of it that shares no map with it. Clone of nil is nil.
func (it Item) Clone() Item { return maps.Clone(it) }

// Int returns the number stored under name, and whether there was one.
func (it Item) Int(name string) (int64, bool) { return it[name].AsInt() }

// Str returns the string stored under name, and whether there was one.
func (it Item) Str(name string) (string, bool) { return it[name].AsString() }

// Key returns the table key of it (its [AttrPK] and [AttrSK] strings), and
// false when it lacks either as a string.
func (it Item) Key() (Key, bool) {
	pk, ok1 := it.Str(AttrPK)
	sk, ok2 := it.Str(AttrSK)
	return Key{PK: pk, SK: sk}, ok1 && ok2
}

// Numbers yields every number attribute of it, in no particular order.
func (it Item) Numbers() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		for k, v := range it {
			if v.kind == kindNumber && !yield(k, v.n) {
				return
			}
		}
	}
}

// Key identifies one item: the values of the table's partition and sort key
// attributes ([AttrPK] and [AttrSK]). Both are strings.
type Key struct {
	PK string // the partition key; never "" in a request
	SK string // the sort key; never "" in a request
}

// String formats k as "PK|SK" for logs and errors.
func (k Key) String() string { return k.PK + "|" + k.SK }
