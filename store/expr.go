package store

import (
	"fmt"
	"maps"
	"slices"
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
	// Update is the update expression ("ADD #a0 :v0"); "" for none.
	Update string
	// Condition is the condition expression; "" for none.
	Condition string
	// Names binds each "#" placeholder to an attribute name. Every entry
	// must be used by an expression; nil when there is none.
	Names map[string]string
	// Values binds each ":" placeholder to a value. Every entry must be
	// used by an expression; nil when there is none.
	Values map[string]Value
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

// operand is an Operand as a condition or an action holds it: a Value, or
// a Name (isName) spelled in the Value's string.
type operand struct {
	value  Value
	isName bool
}

// toOperand returns o as an operand (nil: the zero Value, which Build
// rejects).
func toOperand(o Operand) operand {
	switch o := o.(type) {
	case Name:
		return operand{value: Value{s: string(o)}, isName: true}
	case Value:
		return operand{value: o}
	}
	return operand{}
}

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
	return Condition{op: opBetween, name: n, args: [2]operand{toOperand(lo), toOperand(hi)}}
}

// BeginsWith is the condition begins_with(n, prefix).
func (n Name) BeginsWith(prefix string) Condition {
	return Condition{op: opBeginsWith, name: n, args: [2]operand{{value: Str(prefix)}}}
}

// Exists is the condition attribute_exists(n).
func (n Name) Exists() Condition { return Condition{op: opExists, name: n} }

// NotExists is the condition attribute_not_exists(n).
func (n Name) NotExists() Condition { return Condition{op: opNotExists, name: n} }

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
	name     Name        // a comparison or a function: the attribute it tests
	args     [2]operand  // its other operands, as many as op takes
	children []Condition // And, Or, Not
}

func compare(op condOp, n Name, o Operand) Condition {
	return Condition{op: op, name: n, args: [2]operand{toOperand(o)}}
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
	value operand
	extra Value // actSetPlus: the increment
}

func (u Update) with(a action) Update {
	return Update{last: &actionNode{action: a, prev: u.last}, n: u.n + 1}
}

// each calls f on the actions up to n (the last), in the order they were
// added.
func (n *actionNode) each(f func(*action)) {
	if n != nil {
		n.prev.each(f)
		f(&n.action)
	}
}

// Set is SET name = v, where v is a [Value] or another attribute's [Name].
func (u Update) Set(name string, v Operand) Update {
	return u.with(action{kind: actSet, name: Name(name), value: toOperand(v)})
}

// SetIfNotExists is SET name = if_not_exists(name, v): it writes v only when
// the attribute is absent.
func (u Update) SetIfNotExists(name string, v Value) Update {
	return u.with(action{kind: actSetIfNotExists, name: Name(name), value: operand{value: v}})
}

// SetIfNotExistsPlus is SET name = if_not_exists(name, start) + delta: the
// safe increment of an attribute that may not exist yet.
func (u Update) SetIfNotExistsPlus(name string, start, delta Value) Update {
	return u.with(action{kind: actSetPlus, name: Name(name), value: operand{value: start}, extra: delta})
}

// Remove is REMOVE name.
func (u Update) Remove(name string) Update {
	return u.with(action{kind: actRemove, name: Name(name)})
}

// Add is ADD name v: for a number, adds v to the attribute, which counts as 0
// when absent (on a missing item too). A negative v subtracts.
func (u Update) Add(name string, v Value) Update {
	return u.with(action{kind: actAdd, name: Name(name), value: operand{value: v}})
}

// Len returns the number of actions in u.
func (u Update) Len() int { return u.n }

// Build renders u and c into an [Expr] with deterministic placeholders:
// attribute names get #a0, #a1, ... in order of first use (update actions
// first, then the condition) and each value gets its own :v0, :v1, ....
// The same inputs always give the same Expr.
//
// Build fails with a [*ValidationError] (errors.Is(err, ErrValidation)) on
// an empty attribute name or an invalid (zero) Value, and on nothing else:
// with non-empty names and valid values it always succeeds. It does not
// check what only the backend can judge (overlapping paths, key
// attributes): backends answer those with a ValidationError.
func Build(u Update, c Condition) (Expr, error) {
	var b builder
	// One string holds both expressions, about 16 bytes per action or
	// comparison; the values map is sized once, for their exact number.
	leaves, values := c.count()
	parts := u.n + leaves
	b.w.Grow(16 * parts)
	b.names = make([]placed, 0, parts)
	if values += u.values(); values > 0 {
		b.values = make(map[string]Value, values)
	}
	b.update(u)
	split := b.w.Len()
	b.condition(c)
	if b.err != nil {
		return Expr{}, b.err
	}
	// The maps' keys are the placeholders as the text spells them.
	text := b.w.String()
	e := Expr{Update: text[:split], Condition: text[split:], Values: b.values}
	if len(b.names) > 0 {
		e.Names = make(map[string]string, len(b.names))
		for _, n := range b.names {
			e.Names[text[n.from:n.to]] = n.name
		}
	}
	return e, nil
}

// A placeholder is a prefix and an index: #a0, :v0.
const (
	namePrefix  = "#a"
	valuePrefix = ":v"
)

// count returns the number of comparisons and functions in c, and of the
// valid values they compare with (an operand a leaf does not use is zero).
func (c Condition) count() (leaves, values int) {
	switch c.op {
	case opNone:
		return 0, 0
	case opAnd, opOr, opNot:
		for _, ch := range c.children {
			l, v := ch.count()
			leaves, values = leaves+l, values+v
		}
		return leaves, values
	}
	return 1, c.args[0].values() + c.args[1].values()
}

// values returns the number of valid values in u's actions.
func (u Update) values() (n int) {
	for a := u.last; a != nil; a = a.prev {
		n += a.value.values() + operand{value: a.extra}.values()
	}
	return n
}

// values returns 1 for a valid value, 0 for a name or an invalid value
// (which Build writes no placeholder for: it fails).
func (o operand) values() int {
	if o.isName || !o.value.IsValid() {
		return 0
	}
	return 1
}

// builder writes an update expression, then a condition expression, into
// w, and collects the names and values their placeholders stand for. The
// first error stops nothing but is kept in err, for Build to return.
type builder struct {
	w      strings.Builder
	names  []placed // by placeholder index
	values map[string]Value
	err    error
}

// placed is a name and where its placeholder is in the text (the first
// place, for a name used more than once).
type placed struct {
	name     string
	from, to int
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// text writes each of parts.
func (b *builder) text(parts ...string) {
	for _, p := range parts {
		b.w.WriteString(p)
	}
}

// placeholder writes prefix and i, and returns where they are in w.
func (b *builder) placeholder(prefix string, i int) (from, to int) {
	var digits [20]byte
	from = b.w.Len()
	b.w.WriteString(prefix)
	b.w.Write(strconv.AppendInt(digits[:0], int64(i), 10))
	return from, b.w.Len()
}

// name writes n's placeholder: the one it already has, or the next.
func (b *builder) name(n Name) {
	if n == "" {
		b.fail(&ValidationError{Message: "store: expression uses an empty attribute name"})
	}
	i := slices.IndexFunc(b.names, func(p placed) bool { return p.name == string(n) })
	if i >= 0 {
		b.placeholder(namePrefix, i)
		return
	}
	from, to := b.placeholder(namePrefix, len(b.names))
	b.names = append(b.names, placed{string(n), from, to})
}

// value writes the next value placeholder, for v.
func (b *builder) value(v Value) {
	if !v.IsValid() {
		b.fail(&ValidationError{Message: "store: expression uses an invalid (zero) Value"})
		return
	}
	// The key is the placeholder in the text written so far: bytes that
	// later writes never change.
	from, to := b.placeholder(valuePrefix, len(b.values))
	b.values[b.w.String()[from:to]] = v
}

func (b *builder) operand(o operand) {
	if o.isName {
		b.name(Name(o.value.s))
	} else {
		b.value(o.value)
	}
}

func (b *builder) update(u Update) {
	// Clauses in a fixed order: SET, REMOVE, ADD. Within a clause, actions
	// keep the order they were added in.
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
		u.last.each(func(a *action) {
			if !slices.Contains(clause.kinds[:clause.n], a.kind) {
				return
			}
			switch {
			case !first:
				b.text(", ")
			case b.w.Len() > 0:
				b.text(" ", clause.word, " ")
			default:
				b.text(clause.word, " ")
			}
			first = false
			b.action(a)
		})
	}
}

func (b *builder) action(a *action) {
	b.name(a.name)
	switch a.kind {
	case actRemove:
	case actAdd:
		b.text(" ")
		b.operand(a.value)
	case actSet:
		b.text(" = ")
		b.operand(a.value)
	case actSetIfNotExists, actSetPlus:
		b.text(" = if_not_exists(")
		b.name(a.name)
		b.text(", ")
		b.operand(a.value)
		b.text(")")
		if a.kind == actSetPlus {
			b.text(" + ")
			b.value(a.extra)
		}
	default:
		b.fail(fmt.Errorf("store: unknown update action %d", a.kind))
	}
}

func (b *builder) condition(c Condition) {
	switch c.op {
	case opNone:
	case opEq, opNe, opLt, opLe, opGt, opGe:
		b.name(c.name)
		b.text(" ", comparators[c.op], " ")
		b.operand(c.args[0])
	case opBetween:
		b.name(c.name)
		b.text(" BETWEEN ")
		b.operand(c.args[0])
		b.text(" AND ")
		b.operand(c.args[1])
	case opBeginsWith:
		b.text("begins_with(")
		b.name(c.name)
		b.text(", ")
		b.operand(c.args[0])
		b.text(")")
	case opExists:
		b.text("attribute_exists(")
		b.name(c.name)
		b.text(")")
	case opNotExists:
		b.text("attribute_not_exists(")
		b.name(c.name)
		b.text(")")
	case opNot:
		b.text("NOT (")
		b.condition(c.children[0])
		b.text(")")
	case opAnd, opOr:
		sep := " AND "
		if c.op == opOr {
			sep = " OR "
		}
		for i, ch := range c.children {
			if i > 0 {
				b.text(sep)
			}
			b.text("(")
			b.condition(ch)
			b.text(")")
		}
	default:
		b.fail(fmt.Errorf("store: unknown condition operator %d", c.op))
	}
}
