package store

import "fmt"

// Template is an update and a condition compiled once, whose values are
// given later, call by call: the shape of a write a caller sends over and
// over (the limiter's acquire: the same attributes, new amounts and times).
//
// Compile it from builders in which [Slot] values stand for the values to
// come; [Template.Expr] then makes the [Expr] for one set of values without
// rendering or placeholder assignment, and backends that know templates
// (store/memsim) run its pre-parsed form without parsing the strings. The
// Expr is exactly what [Build] would return for the same builders with the
// slots replaced by the values, so a backend that only reads the strings
// and maps (store/dynamo sends them to DynamoDB) sees no difference.
//
// A Template is immutable and safe for concurrent use.
type Template struct {
	update, condition string
	names             map[string]string // shared by every Expr of the template
	values            []templateValue   // by placeholder number: :v0, :v1, ...
	placeholders      []string          // ":v0", ":v1", ...
	slots             int
	consts            bool // some placeholder is a constant (slot < 0)
}

// templateValue is where a value placeholder takes its value from: slot
// number slot of Expr's vals, or the constant v when slot is negative.
type templateValue struct {
	slot int
	v    Value
}

// Compile renders u and c as [Build] does, with each [Slot] value left to
// be filled by [Template.Expr]. Other values are constants of the template.
//
// The slots must be numbered 0 to n-1 without gaps (a slot may be used
// more than once: each use is a placeholder of its own, all given the same
// value). Compile fails where Build would, and on a negative or missing
// slot number.
func Compile(u Update, c Condition) (*Template, error) {
	b := builder{slots: true}
	if err := b.build(u, c); err != nil {
		return nil, err
	}
	t := &Template{update: b.upd.String(), condition: b.cond.String(), names: b.nameMap()}
	used := make(map[int64]bool)
	for i, v := range b.values {
		tv := templateValue{slot: -1, v: v}
		if n, ok := v.slot(); ok {
			tv = templateValue{slot: int(n)}
			used[n] = true
		} else {
			t.consts = true
		}
		t.values = append(t.values, tv)
		t.placeholders = append(t.placeholders, valuePlaceholder(i))
	}
	var top int64 = -1
	for n := range used {
		top = max(top, n)
	}
	if top >= int64(len(used)) { // a gap: find the first one
		m := int64(0)
		for used[m] {
			m++
		}
		return nil, fmt.Errorf("store: template slots must be numbered 0 to n-1 without gaps: Slot(%d) is used, Slot(%d) is not", top, m)
	}
	t.slots = len(used)
	return t, nil
}

// MustCompile is [Compile] for templates fixed at compile time; it panics
// on an error. Use it only with constant names.
func MustCompile(u Update, c Condition) *Template {
	t, err := Compile(u, c)
	if err != nil {
		panic(err)
	}
	return t
}

// Slots returns the number of slots of t: the length of the vals
// [Template.Expr] expects. It is 0 for a nil Template.
func (t *Template) Slots() int {
	if t == nil {
		return 0
	}
	return t.slots
}

// Expr returns the expression for one set of slot values: vals[i] is the
// value of Slot(i). The result equals what [Build] returns for the
// template's builders with every Slot(i) replaced by vals[i] (see
// [Expr.Equal]), and also carries the template, so that backends that
// know templates skip parsing it.
//
// Expr copies vals: the caller may reuse the slice. The Names map is
// shared by every Expr of the template and the Values map belongs to the
// Expr: neither may be modified. Values beyond [Template.Slots] are
// ignored. A slot with no value (vals too short) leaves its placeholders
// undefined and a zero Value is sent as given: backends reject both, as
// DynamoDB does. A nil Template gives the zero Expr.
func (t *Template) Expr(vals []Value) Expr {
	e, _ := t.expr(vals, true)
	return e
}

// Compact is [Template.Expr] without the Values map, for callers that send
// the Expr only to the backends of this module (store/memsim, store/dynamo),
// which read the values from the template form: it saves building a map per
// call. Its Values field is nil; [Expr.ValueMap] returns the map (made on
// each call) and [Expr.Equal] compares it. When vals leave a slot without
// a valid value, Compact returns the full Expr, whose maps carry the fault
// to the backend.
func (t *Template) Compact(vals []Value) Expr {
	e, complete := t.expr(vals, false)
	if !complete {
		e, _ = t.expr(vals, true)
	}
	return e
}

// SlotOf returns the slot whose value placeholder number i (":v"+i, see
// [Template.ValuePlaceholders]) takes, or -1 when that placeholder is a
// constant of the template or i is out of range.
func (t *Template) SlotOf(i int) int {
	if t == nil || i < 0 || i >= len(t.values) {
		return -1
	}
	return t.values[i].slot
}

// CompactArgs is [Template.Compact] for values given by placeholder rather
// than by slot: args[i] is the value of placeholder number i (see
// [Template.SlotOf]; for a constant of the template, args[i] is ignored
// and set to the constant). Values beyond the placeholders are ignored.
// The Expr keeps args instead of copying it: the caller must not modify
// args afterwards. It saves a copy per call to a caller that fills the
// values in place. When args is short or a value is not valid,
// CompactArgs returns the full Expr, as Compact does (a placeholder
// beyond args left undefined).
func (t *Template) CompactArgs(args []Value) Expr {
	if t == nil || len(t.values) == 0 {
		return t.Compact(nil)
	}
	complete := len(args) >= len(t.values)
	if complete {
		args = args[:len(t.values):len(t.values)]
		if t.consts {
			for i := range args {
				if t.values[i].slot < 0 {
					args[i] = t.values[i].v
				}
			}
		}
		for i := range args {
			if !args[i].IsValid() {
				complete = false
				break
			}
		}
	}
	e := Expr{Update: t.update, Condition: t.condition, Names: t.names, tmpl: t}
	if complete {
		e.args = args
		return e
	}
	m := make(map[string]Value, len(t.values))
	for i, tv := range t.values {
		switch {
		case tv.slot < 0:
			m[t.placeholders[i]] = tv.v
		case i < len(args):
			m[t.placeholders[i]] = args[i]
		}
	}
	e.Values, e.values = m, mapID(m)
	return e
}

// expr makes the Expr of vals, with its Values map when withMap, and
// reports whether every placeholder got a valid value.
func (t *Template) expr(vals []Value, withMap bool) (Expr, bool) {
	if t == nil {
		return Expr{}, true
	}
	e := Expr{Update: t.update, Condition: t.condition, Names: t.names, tmpl: t}
	if len(t.values) == 0 {
		return e, true
	}
	// The values by placeholder, for backends that run the template, and
	// the Values map, for those that read the maps.
	args := make([]Value, len(t.values))
	var m map[string]Value
	if withMap {
		m = make(map[string]Value, len(t.values))
	}
	complete := true
	for i, tv := range t.values {
		v := tv.v
		if tv.slot >= 0 {
			if tv.slot >= len(vals) {
				complete = false
				continue
			}
			v = vals[tv.slot]
		}
		complete = complete && v.IsValid()
		args[i] = v
		if withMap {
			m[t.placeholders[i]] = v
		}
	}
	e.Values, e.values = m, mapID(m)
	if complete {
		e.args = args
	}
	return e, complete
}

// ValuePlaceholders returns the value placeholders of t's expressions,
// ":v0", ":v1", ... in order: the order of the values [Expr.Template]
// returns. The slice is a copy.
func (t *Template) ValuePlaceholders() []string {
	if t == nil {
		return nil
	}
	return append([]string(nil), t.placeholders...)
}

// Strings returns the update and condition expressions of t, as every
// Expr of t carries them.
func (t *Template) Strings() (update, condition string) {
	if t == nil {
		return "", ""
	}
	return t.update, t.condition
}

// Parametrize compiles u and c into a template in which every value is a
// slot, numbered in placeholder order (the value of ":v0" is Slot(0), and
// so on), and returns it with the values u and c hold, in that order:
// t.Expr(vals) equals Build(u, c). Compile the same shape with new values
// by building it again and calling Parametrize, or, cheaper, keep t and
// call t.Expr with new values in the same order. u and c must hold no
// slots.
func Parametrize(u Update, c Condition) (t *Template, vals []Value, err error) {
	var b builder
	if err := b.build(u, c); err != nil {
		return nil, nil, err
	}
	t = &Template{update: b.upd.String(), condition: b.cond.String(), names: b.nameMap(), slots: len(b.values)}
	for i := range b.values {
		t.values = append(t.values, templateValue{slot: i})
		t.placeholders = append(t.placeholders, valuePlaceholder(i))
	}
	return t, b.values, nil
}
