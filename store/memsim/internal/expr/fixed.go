package expr

import (
	"slices"
	"sync/atomic"

	"github.com/shardlimit/limiter/store"
)

// Fixed is a Parsed expression whose names are fixed and whose values come
// from a slice, call after call: the pre-bound form of a store.Template.
// Binding it skips what Bind does with the maps (lookups, key checks,
// unused placeholders) and gives the same Bound and the same errors as
// Bind on the maps the template would make. Safe for concurrent use.
type Fixed struct {
	p     *Parsed
	names []string // by name placeholder index
	src   []int    // by value placeholder index: the position of its value in Bind's args
	nargs int
	alias bool // src is the identity: Bind uses args as they are
	memo  atomic.Pointer[bindMemo]
	prog  atomic.Pointer[progBox]
}

// Fix resolves p's name placeholders against names, and locates its value
// placeholders in values (the placeholders whose values Bind will be
// given, in that order), once. It returns false when the pair is not one
// Fixed handles: maps that are not exact (a placeholder undefined or
// unused), a name or placeholder Bind would reject, or an expression with
// neither update nor condition. Such expressions must be bound with Bind.
func (p *Parsed) Fix(names map[string]string, values []string) (*Fixed, bool) {
	if !p.hasUpdate && p.cond == nil || len(names) != len(p.names) || len(values) != len(p.values) {
		return nil, false
	}
	if len(p.names) > 0 && names == nil {
		return nil, false
	}
	f := &Fixed{p: p, names: make([]string, len(p.names)), src: make([]int, len(p.values)), nargs: len(values), alias: true}
	for i, ph := range p.names {
		n, ok := names[ph]
		if !ok || n == "" || len(n) > maxAttrNameBytes || len(ph) > maxPlaceholderKey {
			return nil, false
		}
		f.names[i] = n
	}
	for i, ph := range p.values {
		j := slices.Index(values, ph)
		if j < 0 || len(ph) > maxPlaceholderKey {
			return nil, false
		}
		f.src[i] = j
		f.alias = f.alias && j == i
	}
	return f, true
}

// Names returns the attribute names of f's name placeholders, by
// placeholder index (the order of Bound.Known's slices). The slice must not
// be modified.
func (f *Fixed) Names() []string { return f.names }

// Heads returns, for each update action in text order, the index of the
// name placeholder of the attribute it writes (or removes), or -1 for an
// action whose path is not one name placeholder.
func (f *Fixed) Heads() []int {
	out := make([]int, len(f.p.actions))
	for i, a := range f.p.actions {
		out[i] = -1
		if h := f.p.heads[i]; h.ph >= 0 && len(a.path.els) == 1 {
			out[i] = int(h.ph)
		}
	}
	return out
}

// Nested reports whether some path of f's expressions has more than one
// element (Bind then needs isKey even when no action writes a key).
func (f *Fixed) Nested() bool { return f.p.nested }

// Bind binds f to one call's values: args[i] is the value of the i-th
// placeholder given to Fix. It returns false (and no error) when args do
// not give every placeholder a valid value: the maps of such a request
// hold an undefined or invalid entry, which Bind on the maps reports with
// DynamoDB's message. Otherwise its result is that of Bind on the maps.
// args must not change until the Bound is released.
func (f *Fixed) Bind(args []store.Value, isKey func(string) bool) (*Bound, bool, error) {
	if len(args) != f.nargs {
		return nil, false, nil
	}
	for _, v := range args {
		if !v.IsValid() {
			return nil, false, nil
		}
	}
	b := newBound(f.p)
	b.names = f.names
	if f.alias {
		b.values = args
	} else {
		b.values = bufOrMake(b.valueBuf[:], len(f.src))
		for i, j := range f.src {
			b.values[i] = args[j]
		}
	}
	// Checks 1 to 4 and 7 of bind hold by construction.
	memo, err := b.validated(&f.memo, false)
	if err != nil {
		return nil, true, err
	}
	if err := b.keyChecks(isKey); err != nil {
		return nil, true, err
	}
	b.touched = memo.touched
	return b, true, nil
}
