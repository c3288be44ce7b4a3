package engine

import "github.com/shardlimit/limiter/store"

// The writes are described by emit functions (paths.go) that give a
// builder their actions and conditions in order; build renders them with
// store.Build.

type condKind uint8

const (
	condEq condKind = iota
	condGe
	condGt
	condLe
	condLt
	condAbsent // attribute_not_exists(name): takes no value
)

// term is one comparison of an attribute with a value (condAbsent: the
// attribute's absence, no value).
type term struct {
	k    condKind
	name string
	v    int64
}

// builder collects the actions and conditions of one write (values are
// numbers: the writes of the engine set and compare numbers only). The
// usual write's conditions fit in condsIn: the builder is then the one
// allocation of its list.
type builder struct {
	u       store.Update
	conds   []store.Condition
	condsIn [8]store.Condition
	// start, when set, makes the write one that also creates its item
	// (see Plan.orCreate): each ADD becomes SET name = if_not_exists(name,
	// start[name]) + v, created records what each name written holds on
	// the item the write creates, and added what each ADD adds.
	start   map[string]int64
	created map[string]int64
	added   map[string]int64
	// push is the latest expiry (Unix seconds) the parts of a write that
	// sets no expiry otherwise need, over seen, the image's (see pushTTL).
	push, seen int64
	// pin makes a push conditional on the expiry as seen: a cap pushes
	// once an epoch, and writers that all pushed from their own images
	// would drive the expiry ever later (see concurrency.go).
	pin bool
}

// pushTTL asks that the write leave the item's expiry at exp or later,
// the image showing seen: build ADDs the difference once, for every part
// that asked.
func (b *builder) pushTTL(exp, seen int64) { b.push, b.seen = max(b.push, exp), seen }

func (b *builder) add(name string, v int64) {
	if b.start != nil {
		b.created[name] = b.start[name] + v
		b.added[name] = v
		b.u = b.u.SetIfNotExistsPlus(name, store.Int(b.start[name]), store.Int(v))
		return
	}
	b.u = b.u.Add(name, store.Int(v))
}

func (b *builder) set(name string, v int64) {
	if b.created != nil {
		b.created[name] = v
	}
	b.u = b.u.Set(name, store.Int(v))
}
func (b *builder) exists(name string)    { b.conds = append(b.conds, store.Name(name).Exists()) }
func (b *builder) notExists(name string) { b.conds = append(b.conds, store.Name(name).NotExists()) }

// cond is the condition name k v.
func (b *builder) cond(k condKind, name string, v int64) {
	b.conds = append(b.conds, compare(term{k, name, v}))
}

// either is the condition a OR (b AND c AND d).
func (b *builder) either(ta, tb, tc, td term) {
	b.conds = append(b.conds, store.Or(compare(ta), store.And(compare(tb), compare(tc), compare(td))))
}

// compare is the condition of t.
func compare(t term) store.Condition {
	n, v := store.Name(t.name), store.Int(t.v)
	switch t.k {
	case condGe:
		return n.GreaterThanEqual(v)
	case condGt:
		return n.GreaterThan(v)
	case condLe:
		return n.LessThanEqual(v)
	case condLt:
		return n.LessThan(v)
	case condAbsent:
		return n.NotExists()
	}
	return n.Equal(v)
}

// build returns the expression emit describes.
func build(emit func(*builder)) (store.Expr, error) {
	b := &builder{}
	b.conds = b.condsIn[:0]
	emit(b)
	if b.push > b.seen {
		b.add(store.AttrTTL, b.push-b.seen)
		if b.pin {
			b.cond(condEq, store.AttrTTL, b.seen)
		}
	}
	return store.Build(b.u, store.And(b.conds...))
}
