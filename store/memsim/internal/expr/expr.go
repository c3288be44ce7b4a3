// Package expr parses and evaluates DynamoDB update and condition
// expressions over store items, with DynamoDB's validation rules and
// messages. It is memsim's expression engine.
//
// Use is in two steps, so that parsing can be cached by expression text:
//
//	p, err := expr.Parse(in.Expr.Update, in.Expr.Condition) // cacheable by the two strings
//	b, err := p.Bind(in.Expr.Names, in.Expr.Values, schema.IsKeyAttribute)
//	ok, err := b.Check(old)          // the condition on the stored item (old may be nil)
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
//     reports, follow the iteration order of DynamoDB's java.util.HashMap.
//   - size() of a string counts UTF-16 code units (Java's String.length()).
//   - An update of a missing item that only removes attributes creates
//     nothing (Apply returns a nil item).
//
// Deliberate differences, all in what is reported when a request has
// several faults or in cases memsim's types cannot reach: numbers are int64
// (arithmetic that leaves int64 fails with "Number overflow"); Parse reports
// syntax faults of both expressions before Bind looks at the Names and
// Values maps (DynamoDB checks the maps first); several keys at fault in a
// map are reported in sorted order (DynamoDB's is a Java hash set's); an
// update of a key attribute is rejected by Bind, before the condition is
// evaluated; a value placeholder in a document path (a.:v) is rejected;
// nested access to a secondary index's key attribute is not (Bind knows
// only the table's key); with neither expression, Bind rejects Names and
// Values with UpdateItem's messages. The "1 validation error detected: "
// prefix of single-item writes belongs to the operation.
package expr

import "github.com/shardlimit/limiter/store"

// Parsed is a syntactically valid pair of update and condition expressions,
// with placeholders not yet resolved. It is immutable and safe to share
// between goroutines (memsim caches it by expression text).
type Parsed struct {
	hasUpdate bool
	actions   []*action // the update's actions in text order
	cond      *node
	names     []string // name placeholders, by index
	values    []string // value placeholders, by index
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

// Touched returns the names of the top-level attributes the update writes,
// sorted, without repeats (what Apply returns beside the new item). The
// slice must not be modified.
func (b *Bound) Touched() []string { return b.touched }

// KeyAttr is one key attribute of the item being updated.
type KeyAttr struct {
	Name  string
	Value store.Value
}

// The syntax tree keeps what the later phases need to reproduce DynamoDB's
// checks in DynamoDB's order: placeholders by index (resolved per request
// by Bind), parentheses (for the redundant-parentheses rule), raw
// identifiers (for the reserved-word rule).
const (
	peID    uint8 = iota // a raw identifier: a
	peName               // a name placeholder: #a
	peIndex              // a list index: [3]
	peValue              // a value placeholder used as a path element: a.:v
)

type pathEl struct {
	kind  uint8
	text  string // identifier, placeholder, or the digits of an index
	ph    int32  // placeholder index (peName: into names, peValue: into values)
	index int64  // list index; -1 when it does not fit in an int32 (an error at the walk)
}

// Node kinds: operands (a path, a value placeholder, a function call),
// the arithmetic of a SET value, and conditions.
const (
	nPath    uint8 = iota
	nValue         // ph
	nFunc          // name, spec, kids: the arguments
	nArith         // kids: 2; op: 1 for minus
	nCmp           // kids: 2; op: the comparator
	nIn            // kids: the operand, then the list
	nBetween       // kids: 3
	nAnd           // kids: 2
	nOr            // kids: 2
	nNot           // kids: 1
)

type node struct {
	kind   uint8
	op     uint8
	parens bool // written in parentheses (for the redundant-parentheses rule)
	path   []pathEl
	ph     int32  // nValue: value placeholder index
	name   string // nFunc: the function's name as written
	spec   *opSpec
	kids   []*node
}

// Comparators, in the order of the op field of an nCmp node.
const (
	cmpEQ uint8 = iota
	cmpLT
	cmpGT
	cmpNE
	cmpLE
	cmpGE
)

var cmpNames = [...]string{"=", "<", ">", "<>", "<=", ">="}

// Update action kinds.
const (
	aSet uint8 = iota
	aRemove
	aAdd
	aDelete
)

var sectionNames = [...]string{aSet: "SET", aRemove: "REMOVE", aAdd: "ADD", aDelete: "DELETE"}

type action struct {
	kind uint8
	path []pathEl
	val  *node // aSet: an operand or nArith
	ph   int32 // aAdd, aDelete: value placeholder index
	last bool  // the last action of its section
}
