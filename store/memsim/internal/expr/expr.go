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
// expression code is AWS's), confirmed where possible by tests run against
// DynamoDB itself (messages.go names the sources), down to which of several
// faults is reported: the actions of an update are validated last first,
// and "path two" of an overlap and the fault of several failing actions
// follow the iteration order of Java's HashMap. size() counts UTF-16 code
// units. Deliberate differences, in cases memsim's types cannot reach or
// in which of several faults is reported: numbers are int64 (arithmetic
// that leaves int64 fails with "Number overflow"); Parse reports syntax
// faults of both expressions before Bind looks at the Names and Values
// maps; several keys at fault in a map are reported in sorted order; an
// update of a key attribute is rejected before the condition is evaluated;
// a value placeholder in a document path (a.:v) is rejected; nested access
// to a secondary index's key attribute is not; with neither expression,
// Bind rejects Names and Values with UpdateItem's messages.
package expr

import "github.com/shardlimit/limiter/store"

// Parsed is a syntactically valid pair of update and condition expressions,
// with placeholders not yet resolved. It is immutable and safe to share
// between goroutines (memsim caches it by expression text).
type Parsed struct {
	actions []*action // the update's actions in text order
	cond    *node
	names   []string // name placeholders, by index
	values  []string // value placeholders, by index
}

// Bound is a Parsed expression with its placeholders resolved against one
// request's Names and Values.
type Bound struct {
	p       *Parsed
	names   []string      // resolved name placeholders, by index
	values  []store.Value // resolved value placeholders, by index
	touched []string      // sorted distinct top-level names the update writes
}

// The syntax tree keeps placeholders by index (Bind resolves them per
// request) and raw identifiers (for the reserved-word rule).
type pathEl struct {
	kind  tokKind // tID, tNAME, tINDEX, or tVALUE (a.:v)
	text  string  // identifier, placeholder, or the digits of an index
	ph    int32   // placeholder index (tNAME: into names, tVALUE: into values)
	index int64   // list index; -1 when it does not fit in an int32 (an error at the walk)
}

// Node kinds: operands (a path, a value placeholder, a function call),
// the arithmetic of a SET value, and conditions.
const (
	nPath    uint8 = iota
	nValue         // ph
	nFunc          // spec, kids: the arguments
	nArith         // kids: 2; spec: + or -
	nCmp           // kids: 2; spec: the comparator
	nIn            // kids: the operand, then the list
	nBetween       // kids: 3
	nAnd           // kids: 2
	nOr            // kids: 2
	nNot           // kids: 1
)

type node struct {
	kind   uint8
	parens bool // written in parentheses (for the redundant-parentheses rule)
	path   []pathEl
	ph     int32 // nValue: value placeholder index
	spec   *opSpec
	kids   []*node
}

type action struct {
	kind tokKind // tSET, tREMOVE, tADD, tDELETE
	path []pathEl
	val  *node // SET: an operand or nArith
	ph   int32 // ADD, DELETE: value placeholder index
	last bool  // the last action of its section
}
