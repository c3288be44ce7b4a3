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
package expr

import "github.com/shardlimit/limiter/store"

// Parsed is a syntactically valid pair of update and condition expressions,
// with placeholders not yet resolved. It is immutable and safe to share
// between goroutines (memsim caches it by expression text).
type Parsed struct {
	// implementation-defined
}

// Parse parses an update expression and a condition expression; either may
// be empty. Syntax errors, repeated clauses, more than two operands in a SET
// value, unknown functions and the like are *store.ValidationError with
// DynamoDB's message.
func Parse(update, condition string) (*Parsed, error) {
	return nil, store.Validationf("expr: not implemented")
}

// HasUpdate reports whether p has an update expression.
func (p *Parsed) HasUpdate() bool { return false }

// HasCondition reports whether p has a condition expression.
func (p *Parsed) HasCondition() bool { return false }

// Bound is a Parsed expression with its placeholders resolved against one
// request's Names and Values.
type Bound struct {
	// implementation-defined
}

// Bind resolves placeholders and checks what depends on them, as DynamoDB
// does before it looks at any item: undefined or unused names and values,
// an empty Values map, invalid (zero) values, overlapping or conflicting
// document paths, and an update of a key attribute (isKey reports the table's
// key attribute names).
func (p *Parsed) Bind(names map[string]string, values map[string]store.Value, isKey func(string) bool) (*Bound, error) {
	return nil, store.Validationf("expr: not implemented")
}

// Check evaluates the condition against item (nil when the item does not
// exist). With no condition it returns true.
func (b *Bound) Check(item store.Item) (bool, error) {
	return false, store.Validationf("expr: not implemented")
}

// Apply evaluates the update against old (nil when the item does not exist,
// in which case the result is created with the attributes of key, the
// table's key attributes) and returns the new item as a fresh map (old is
// never modified) and the names of the attributes the update touched, in
// sorted order, for ReturnValues UPDATED_OLD and UPDATED_NEW.
// keyAttrs are the key attribute names and values to put into a created item.
func (b *Bound) Apply(old store.Item, keyAttrs [2]KeyAttr) (store.Item, []string, error) {
	return nil, nil, store.Validationf("expr: not implemented")
}

// KeyAttr is one key attribute of the item being updated.
type KeyAttr struct {
	Name  string
	Value store.Value
}
