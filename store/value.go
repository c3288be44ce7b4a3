package store

import (
	"fmt"
	"iter"
	"strconv"
)

// Kind is the type of a [Value].
type Kind uint8

// The kinds of value a store holds. The zero Value has kind KindNone and is
// not a valid attribute value.
const (
	KindNone Kind = iota
	KindString
	KindNumber
)

// String returns the DynamoDB type descriptor of k: "S", "N", or "" for
// KindNone.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "S"
	case KindNumber:
		return "N"
	}
	return ""
}

// Value is an attribute value: a string or an int64 number. The zero Value is
// invalid (KindNone); backends reject it.
type Value struct {
	s    string
	n    int64
	kind Kind
}

// Str returns a string value.
func Str(s string) Value { return Value{s: s, kind: KindString} }

// Int returns a number value.
func Int(n int64) Value { return Value{n: n, kind: KindNumber} }

// Kind returns the kind of v.
func (v Value) Kind() Kind { return v.kind }

// IsValid reports whether v is a string or a number.
func (v Value) IsValid() bool { return v.kind == KindString || v.kind == KindNumber }

// AsString returns v's string and true, or "" and false when v is not a string.
func (v Value) AsString() (string, bool) { return v.s, v.kind == KindString }

// AsInt returns v's number and true, or 0 and false when v is not a number.
func (v Value) AsInt() (int64, bool) { return v.n, v.kind == KindNumber }

// Equal reports whether v and w have the same kind and value.
func (v Value) Equal(w Value) bool { return v == w }

// String formats v for humans and logs: numbers in decimal, strings quoted.
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return strconv.Quote(v.s)
	case KindNumber:
		return strconv.FormatInt(v.n, 10)
	}
	return "<invalid>"
}

// GoString formats v as the Go expression that builds it.
func (v Value) GoString() string {
	switch v.kind {
	case KindString:
		return fmt.Sprintf("store.Str(%q)", v.s)
	case KindNumber:
		return fmt.Sprintf("store.Int(%d)", v.n)
	}
	return "store.Value{}"
}

// Item is one stored item: attribute name to value, key attributes included.
// A nil Item means "no item".
type Item map[string]Value

// Clone returns a copy of it that shares no map with it. Clone of nil is nil.
func (it Item) Clone() Item {
	if it == nil {
		return nil
	}
	c := make(Item, len(it))
	for k, v := range it {
		c[k] = v
	}
	return c
}

// Int returns the number stored under name, and whether there was one.
func (it Item) Int(name string) (int64, bool) {
	v, ok := it[name]
	if !ok {
		return 0, false
	}
	return v.AsInt()
}

// Str returns the string stored under name, and whether there was one.
func (it Item) Str(name string) (string, bool) {
	v, ok := it[name]
	if !ok {
		return "", false
	}
	return v.AsString()
}

// Numbers yields every number attribute of it, in no particular order.
func (it Item) Numbers() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		for k, v := range it {
			if v.kind == KindNumber && !yield(k, v.n) {
				return
			}
		}
	}
}

// Key identifies one item: the values of the table's partition and sort key
// attributes (named by the [Schema]). Both are strings.
type Key struct {
	PK string
	SK string
}

// String formats k as "PK|SK" for logs and errors.
func (k Key) String() string { return k.PK + "|" + k.SK }
