package store

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// Expr is an expression in the form DynamoDB accepts: an update expression
// and a condition expression whose attribute names and values are
// placeholders, bound by Names ("#a0" -> "b_rpm_tk") and Values (":v0" ->
// Int(-1000)). Either expression may be empty.
//
// Build one with [Build]. A hand-written Expr is also accepted by every
// backend, which must then validate it as DynamoDB does.
type Expr struct {
	Update    string
	Condition string
	Names     map[string]string
	Values    map[string]Value
}

// IsZero reports whether e has neither an update nor a condition.
func (e Expr) IsZero() bool { return e.Update == "" && e.Condition == "" }

// Equal reports whether e and o are the same request: the same expression
// strings, the same Names and the same Values (a nil map and an empty one
// differ, as they do for DynamoDB).
func (e Expr) Equal(o Expr) bool {
	return e.Update == o.Update && e.Condition == o.Condition &&
		(e.Names == nil) == (o.Names == nil) && maps.Equal(e.Names, o.Names) &&
		(e.Values == nil) == (o.Values == nil) && maps.Equal(e.Values, o.Values)
}

// Clone returns a copy of e that shares no map with it.
func (e Expr) Clone() Expr {
	e.Names, e.Values = maps.Clone(e.Names), maps.Clone(e.Values)
	return e
}

// Operand is one side of a comparison: a [Name] or a [Value].
type Operand interface{ operand() }

// Name is a top-level attribute name used in an expression. It is always
// sent as a placeholder, so any name works, reserved words included.
type Name string

func (Name) operand()  {}
func (Value) operand() {}

// Equal is the condition n = o.
func (n Name) Equal(o Operand) Condition { return compare(opEq, n, o) }

// NotEqual is the condition n <> o.
func (n Name) NotEqual(o Operand) Condition { return compare(opNe, n, o) }

// LessThan is the condition n < o.
func (n Name) LessThan(o Operand) Condition { return compare(opLt, n, o) }

// LessThanEqual is the condition n <= o.
func (n Name) LessThanEqual(o Operand) Condition { return compare(opLe, n, o) }

// GreaterThan is the condition n > o.
func (n Name) GreaterThan(o Operand) Condition { return compare(opGt, n, o) }

// GreaterThanEqual is the condition n >= o.
func (n Name) GreaterThanEqual(o Operand) Condition { return compare(opGe, n, o) }

// Between is the condition n BETWEEN lo AND hi (inclusive at both ends).
func (n Name) Between(lo, hi Operand) Condition {
	return Condition{op: opBetween, operands: []Operand{n, lo, hi}}
}

// BeginsWith is the condition begins_with(n, prefix).
func (n Name) BeginsWith(prefix string) Condition {
	return Condition{op: opBeginsWith, operands: []Operand{n, Str(prefix)}}
}

// Exists is the condition attribute_exists(n).
func (n Name) Exists() Condition { return Condition{op: opExists, operands: []Operand{n}} }

// NotExists is the condition attribute_not_exists(n).
func (n Name) NotExists() Condition { return Condition{op: opNotExists, operands: []Operand{n}} }

type condOp uint8

const (
	opNone condOp = iota
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	opBetween
	opBeginsWith
	opExists
	opNotExists
	opAnd
	opOr
	opNot
)

var comparators = [...]string{opEq: "=", opNe: "<>", opLt: "<", opLe: "<=", opGt: ">", opGe: ">="}

// Condition is an immutable condition tree. The zero Condition is "no
// condition". Build leaves with the methods of [Name]; combine them with
// [And], [Or] and [Not].
type Condition struct {
	op       condOp
	operands []Operand
	children []Condition
}

func compare(op condOp, n Name, o Operand) Condition {
	return Condition{op: op, operands: []Operand{n, o}}
}

// IsZero reports whether c is the empty condition.
func (c Condition) IsZero() bool { return c.op == opNone }

// And is the conjunction of the non-empty conditions in cs. With one, it is
// that condition; with none, the empty condition.
func And(cs ...Condition) Condition { return combine(opAnd, cs) }

// Or is the disjunction of the non-empty conditions in cs. With one, it is
// that condition; with none, the empty condition.
func Or(cs ...Condition) Condition { return combine(opOr, cs) }

// Not is the negation of c. Not of the empty condition is empty.
func Not(c Condition) Condition {
	if c.IsZero() {
		return c
	}
	return Condition{op: opNot, children: []Condition{c}}
}

func combine(op condOp, cs []Condition) Condition {
	kept := make([]Condition, 0, len(cs))
	for _, c := range cs {
		if !c.IsZero() {
			kept = append(kept, c)
		}
	}
	switch len(kept) {
	case 0:
		return Condition{}
	case 1:
		return kept[0]
	}
	return Condition{op: op, children: kept}
}

// And returns And(c, cs...).
func (c Condition) And(cs ...Condition) Condition {
	return And(append([]Condition{c}, cs...)...)
}

// Update is an immutable list of update actions. The zero Update has no
// actions. Each method returns a new Update and leaves its receiver as it
// was, so a base Update can be shared and extended safely.
type Update struct {
	last *actionNode // the last action added (nil: none)
	n    int
}

// actionNode is one action of an Update and the actions before it: a
// list that updates derived from one base share, and never change.
type actionNode struct {
	action
	prev *actionNode
}

type actionKind uint8

const (
	actSet actionKind = iota
	actSetIfNotExists
	actSetPlus
	actRemove
	actAdd
)

type action struct {
	kind  actionKind
	name  Name
	value Operand
	extra Value // actSetPlus: the increment
}

func (u Update) with(a action) Update {
	return Update{last: &actionNode{action: a, prev: u.last}, n: u.n + 1}
}

// actions returns u's actions in the order they were added.
func (u Update) actions() []action {
	out := make([]action, u.n)
	i := u.n - 1
	for n := u.last; n != nil; n = n.prev {
		out[i] = n.action
		i--
	}
	return out
}

// Set is SET name = v, where v is a [Value] or another attribute's [Name].
func (u Update) Set(name string, v Operand) Update {
	return u.with(action{kind: actSet, name: Name(name), value: v})
}

// SetIfNotExists is SET name = if_not_exists(name, v): it writes v only when
// the attribute is absent.
func (u Update) SetIfNotExists(name string, v Value) Update {
	return u.with(action{kind: actSetIfNotExists, name: Name(name), value: v})
}

// SetIfNotExistsPlus is SET name = if_not_exists(name, start) + delta: the
// safe increment of an attribute that may not exist yet.
func (u Update) SetIfNotExistsPlus(name string, start, delta Value) Update {
	return u.with(action{kind: actSetPlus, name: Name(name), value: start, extra: delta})
}

// Remove is REMOVE name.
func (u Update) Remove(name string) Update {
	return u.with(action{kind: actRemove, name: Name(name)})
}

// Add is ADD name v: for a number, adds v to the attribute, which counts as 0
// when absent (on a missing item too). A negative v subtracts.
func (u Update) Add(name string, v Value) Update {
	return u.with(action{kind: actAdd, name: Name(name), value: v})
}

// Len returns the number of actions in u.
func (u Update) Len() int { return u.n }

// ErrEmptyName is returned by [Build] for an expression that uses an empty
// attribute name.
var ErrEmptyName = errors.New("store: expression uses an empty attribute name")

// Build renders u and c into an [Expr] with deterministic placeholders:
// attribute names get #a0, #a1, ... in order of first use (update actions
// first, then the condition) and each value gets its own :v0, :v1, ....
// The same inputs always give the same Expr.
//
// Build fails on an empty attribute name or an invalid (zero) Value. It does
// not check what only the backend can judge (overlapping paths, key
// attributes): backends answer those with a ValidationError.
func Build(u Update, c Condition) (Expr, error) {
	var b builder
	if err := b.build(u, c); err != nil {
		return Expr{}, err
	}
	e := Expr{Update: b.upd.String(), Condition: b.cond.String(), Names: b.nameMap()}
	if len(b.values) > 0 {
		e.Values = make(map[string]Value, len(b.values))
		for i, v := range b.values {
			e.Values[valuePlaceholder(i)] = v
		}
	}
	return e, nil
}

// MustBuild is [Build] for expressions fixed at compile time; it panics on
// an error. Use it only with constant names.
func MustBuild(u Update, c Condition) Expr {
	e, err := Build(u, c)
	if err != nil {
		panic(err)
	}
	return e
}

func namePlaceholder(i int) string  { return "#a" + strconv.Itoa(i) }
func valuePlaceholder(i int) string { return ":v" + strconv.Itoa(i) }

// build renders u, then c.
func (b *builder) build(u Update, c Condition) error {
	if err := b.update(u); err != nil {
		return err
	}
	return b.condition(&b.cond, c)
}

// nameMap binds the name placeholders (nil when there are none).
func (b *builder) nameMap() map[string]string {
	if len(b.names) == 0 {
		return nil
	}
	m := make(map[string]string, len(b.names))
	for i, n := range b.names {
		m[namePlaceholder(i)] = n
	}
	return m
}

type builder struct {
	upd, cond strings.Builder
	names     []string
	nameIdx   map[string]int
	values    []Value
}

func (b *builder) name(n Name) (string, error) {
	if n == "" {
		return "", ErrEmptyName
	}
	if i, ok := b.nameIdx[string(n)]; ok {
		return namePlaceholder(i), nil
	}
	if b.nameIdx == nil {
		b.nameIdx = make(map[string]int)
	}
	i := len(b.names)
	b.nameIdx[string(n)] = i
	b.names = append(b.names, string(n))
	return namePlaceholder(i), nil
}

func (b *builder) value(v Value) (string, error) {
	if !v.IsValid() {
		return "", errors.New("store: expression uses an invalid (zero) Value")
	}
	b.values = append(b.values, v)
	return valuePlaceholder(len(b.values) - 1), nil
}

func (b *builder) operand(o Operand) (string, error) {
	switch o := o.(type) {
	case Name:
		return b.name(o)
	case Value:
		return b.value(o)
	}
	return "", fmt.Errorf("store: unsupported operand %T", o)
}

func (b *builder) update(u Update) error {
	// Clauses in a fixed order: SET, REMOVE, ADD. Within a clause, actions
	// keep the order they were added in.
	actions := u.actions()
	for _, clause := range [...]struct {
		word  string
		kinds [3]actionKind
		n     int
	}{
		{"SET", [3]actionKind{actSet, actSetIfNotExists, actSetPlus}, 3},
		{"REMOVE", [3]actionKind{actRemove}, 1},
		{"ADD", [3]actionKind{actAdd}, 1},
	} {
		first := true
		for _, a := range actions {
			if !kindIn(a.kind, clause.kinds[:clause.n]) {
				continue
			}
			if first {
				if b.upd.Len() > 0 {
					b.upd.WriteByte(' ')
				}
				b.upd.WriteString(clause.word)
				b.upd.WriteByte(' ')
				first = false
			} else {
				b.upd.WriteString(", ")
			}
			if err := b.action(a); err != nil {
				return err
			}
		}
	}
	return nil
}

func kindIn(k actionKind, ks []actionKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func (b *builder) action(a action) error {
	n, err := b.name(a.name)
	if err != nil {
		return err
	}
	w := &b.upd
	switch a.kind {
	case actRemove:
		w.WriteString(n)
		return nil
	case actAdd:
		v, err := b.operand(a.value)
		if err != nil {
			return err
		}
		writeAll(w, n, " ", v)
		return nil
	case actSet:
		v, err := b.operand(a.value)
		if err != nil {
			return err
		}
		writeAll(w, n, " = ", v)
		return nil
	case actSetIfNotExists, actSetPlus:
		v, err := b.operand(a.value)
		if err != nil {
			return err
		}
		writeAll(w, n, " = if_not_exists(", n, ", ", v, ")")
		if a.kind == actSetPlus {
			d, err := b.value(a.extra)
			if err != nil {
				return err
			}
			writeAll(w, " + ", d)
		}
		return nil
	}
	return fmt.Errorf("store: unknown update action %d", a.kind)
}

// writeAll writes each of parts to w.
func writeAll(w *strings.Builder, parts ...string) {
	for _, p := range parts {
		w.WriteString(p)
	}
}

func (b *builder) condition(w *strings.Builder, c Condition) error {
	switch c.op {
	case opNone:
		return nil
	case opEq, opNe, opLt, opLe, opGt, opGe:
		l, err := b.operand(c.operands[0])
		if err != nil {
			return err
		}
		r, err := b.operand(c.operands[1])
		if err != nil {
			return err
		}
		writeAll(w, l, " ", comparators[c.op], " ", r)
	case opBetween:
		var s [3]string
		for i := range s {
			var err error
			if s[i], err = b.operand(c.operands[i]); err != nil {
				return err
			}
		}
		writeAll(w, s[0], " BETWEEN ", s[1], " AND ", s[2])
	case opBeginsWith:
		n, err := b.operand(c.operands[0])
		if err != nil {
			return err
		}
		p, err := b.operand(c.operands[1])
		if err != nil {
			return err
		}
		writeAll(w, "begins_with(", n, ", ", p, ")")
	case opExists, opNotExists:
		n, err := b.operand(c.operands[0])
		if err != nil {
			return err
		}
		fn := "attribute_exists("
		if c.op == opNotExists {
			fn = "attribute_not_exists("
		}
		writeAll(w, fn, n, ")")
	case opNot:
		w.WriteString("NOT (")
		if err := b.condition(w, c.children[0]); err != nil {
			return err
		}
		w.WriteByte(')')
	case opAnd, opOr:
		sep := " AND "
		if c.op == opOr {
			sep = " OR "
		}
		for i, ch := range c.children {
			if i > 0 {
				w.WriteString(sep)
			}
			w.WriteByte('(')
			if err := b.condition(w, ch); err != nil {
				return err
			}
			w.WriteByte(')')
		}
	default:
		return fmt.Errorf("store: unknown condition operator %d", c.op)
	}
	return nil
}
