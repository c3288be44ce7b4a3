// Package expr parses and evaluates DynamoDB update and condition
// expressions over store items, with DynamoDB's validation rules and
// messages. It is memsim's expression engine.
//
// Use is in two steps, so that parsing (the expensive part) can be cached by
// expression text:
//
//	p, err := expr.Parse(in.Expr.Update, in.Expr.Condition) // cacheable by the two strings
//	b, err := p.Bind(in.Expr.Names, in.Expr.Values, schema.IsKeyAttribute)
//	ok, err := b.Check(old)          // the condition on the pre-update item (old may be nil)
//	newItem, touched, err := b.Apply(old, key)
//
// Every error is a *store.ValidationError carrying DynamoDB's message.
//
// # Fidelity
//
// The grammar, the checks and their order follow DynamoDB Local (whose
// expression code is AWS's: its ANTLR grammar, its tree translation, its
// validator, its executor), confirmed where possible by tests that run
// against DynamoDB itself; see messages.go for the sources. Consequences
// worth knowing:
//
//   - A syntax error names the first token no valid expression can contain,
//     with its neighbours: Syntax error; token: "1", near: "+ 1".
//   - The actions of an update are validated last first, so of two faulty
//     actions the later one is reported (as DynamoDB does).
//   - "path two" of an overlap, and which of several failing actions Apply
//     reports, follow the iteration order of DynamoDB's java.util.HashMap;
//     this package reproduces that order.
//   - size() of a string counts UTF-16 code units (Java's String.length()),
//     so "é" is 1 and "😀" is 2.
//   - An update of a missing item that only removes attributes creates
//     nothing (Apply returns a nil item).
//
// Deliberate differences, all in what is reported when a request has
// several faults or in cases memsim's types cannot reach:
//
//   - Numbers are int64, not 38-digit decimals (the store contract allows
//     only int64). Arithmetic that leaves int64 fails with DynamoDB's
//     "Number overflow" message, where DynamoDB would still succeed up to
//     38 digits.
//   - DynamoDB validates the ExpressionAttributeNames/Values maps before it
//     parses the expressions, and validates the update expression against
//     them before it parses the condition. Parse reports syntax faults of
//     both expressions first, so a request with a syntax fault and a map or
//     placeholder fault gets the syntax message.
//   - Several keys at fault in a map (invalid, unused) are reported in
//     sorted order; DynamoDB's order is that of a Java hash set.
//   - Updating a key attribute is rejected by Bind, before the condition is
//     evaluated; DynamoDB Local checks it after the condition.
//   - A value placeholder used as a path element (a.:v) is rejected with
//     "The document path cannot contain attribute value parameters";
//     DynamoDB Local accepts it as an undocumented dictionary access and
//     DynamoDB answers it with an internal error.
//   - Secondary-index key attributes accessed with a nested path are not
//     rejected ("Key attributes must be scalars ... IndexKey: x"): Bind only
//     knows the table's key attributes.
//   - With neither expression, Bind rejects Names and Values with UpdateItem's
//     messages; PutItem and DeleteItem say "...: ConditionExpression is null".
//   - Single-item writes on DynamoDB prefix validation messages with
//     "1 validation error detected: " (TransactWriteItems does not); that
//     envelope belongs to the operation, not to this package.
package expr

import (
	"sync/atomic"

	"github.com/shardlimit/limiter/store"
)

// Parsed is a syntactically valid pair of update and condition expressions,
// with placeholders not yet resolved. It is immutable (but for an internal
// cache) and safe to share between goroutines (memsim caches it by
// expression text).
type Parsed struct {
	hasUpdate bool
	actions   []*action // the update's actions in text order
	heads     []headRef // per action: where its top-level name comes from
	cond      *condNode
	names     []string // name placeholders, by index
	values    []string // value placeholders, by index

	flatLHS bool // every update path is a single top-level element
	nested  bool // some path, anywhere, has more than one element

	sensitive []int32 // value placeholders whose contents (not only types) Bind checks

	// memo remembers the last resolution that passed the expression checks,
	// with its sorted top-level names: memsim sees the same expression with
	// the same names and value types over and over.
	memo atomic.Pointer[bindMemo]
}

// Parse parses an update expression and a condition expression; either may
// be empty. Syntax errors, repeated clauses, more than two operands in a SET
// value, unknown functions and the like are *store.ValidationError with
// DynamoDB's message.
func Parse(update, condition string) (*Parsed, error) {
	return parse(update, condition)
}

// HasUpdate reports whether p has an update expression.
func (p *Parsed) HasUpdate() bool { return p.hasUpdate }

// HasCondition reports whether p has a condition expression.
func (p *Parsed) HasCondition() bool { return p.cond != nil }

// Bound is a Parsed expression with its placeholders resolved against one
// request's Names and Values.
type Bound struct {
	p       *Parsed
	names   []string      // resolved name placeholders, by index
	values  []store.Value // resolved value placeholders, by index
	touched []string      // sorted distinct top-level names the update writes
}

// Bind resolves placeholders and checks what depends on them, as DynamoDB
// does before it looks at any item: undefined or unused names and values,
// an empty Values map, invalid (zero) values, overlapping or conflicting
// document paths, and an update of a key attribute (isKey reports the table's
// key attribute names).
func (p *Parsed) Bind(names map[string]string, values map[string]store.Value, isKey func(string) bool) (*Bound, error) {
	return p.bind(names, values, isKey)
}

// Check evaluates the condition against item (nil when the item does not
// exist). With no condition it returns true.
func (b *Bound) Check(item store.Item) (bool, error) {
	if b.p.cond == nil {
		return true, nil
	}
	return b.evalCond(b.p.cond, item), nil
}

// Apply evaluates the update against old (nil when the item does not exist,
// in which case the result is created with the attributes of key, the
// table's key attributes) and returns the new item as a fresh map (old is
// never modified) and the names of the attributes the update touched, in
// sorted order, for ReturnValues UPDATED_OLD and UPDATED_NEW.
// keyAttrs are the key attribute names and values to put into a created item.
//
// An update of a missing item that only removes attributes creates nothing,
// as in DynamoDB: Apply then returns a nil item (and no touched names).
// The touched slice may be shared with other calls; it must not be modified.
func (b *Bound) Apply(old store.Item, keyAttrs [2]KeyAttr) (store.Item, []string, error) {
	n, touched, _, err := b.apply(old, keyAttrs, nil, false)
	return n, touched, err
}

// ApplyChanges is Apply that also reports, when it can, what the update
// did to each attribute it touched: one Change per action, in action
// order, appended to chg[:0], so that a caller accounts for the new item
// without looking the attributes up again. It does for a non-nil chg, an
// existing item (old not nil) and an update whose paths are all top-level
// names; otherwise the changes are nil.
func (b *Bound) ApplyChanges(old store.Item, keyAttrs [2]KeyAttr, chg []Change) (store.Item, []string, []Change, error) {
	return b.apply(old, keyAttrs, chg, true)
}

// Touched returns the names of the attributes the update writes, in
// sorted order (what Apply returns beside the new item). The slice may be
// shared; it must not be modified.
func (b *Bound) Touched() []string { return b.touched }

// KeyAttr is one key attribute of the item being updated.
type KeyAttr struct {
	Name  string
	Value store.Value
}
