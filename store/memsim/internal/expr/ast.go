package expr

// The abstract syntax tree produced by the parser. It keeps everything the
// later phases need to reproduce DynamoDB's checks in DynamoDB's order:
// placeholders by index (resolved per request by Bind), parentheses (for the
// redundant-parentheses rule), raw identifiers (for the reserved-word rule).

// Path element kinds.
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

type pathNode struct {
	els []pathEl
}

// Operand kinds.
const (
	oPath uint8 = iota
	oValue
	oFunc
)

type operandNode struct {
	kind   uint8
	parens bool // written in parentheses (for the redundant-parentheses rule)
	path   *pathNode
	ph     int32 // oValue: value placeholder index
	fn     *funcNode
}

type funcNode struct {
	name string
	spec *opSpec // nil for an unknown function (rejected by the walk)
	args []*operandNode
}

// Condition node kinds.
const (
	cCmp uint8 = iota
	cIn
	cBetween
	cFunc
	cAnd
	cOr
	cNot
)

// Comparators, in the order of the cmp field.
const (
	cmpEQ uint8 = iota
	cmpNE
	cmpLT
	cmpLE
	cmpGT
	cmpGE
)

var cmpNames = [...]string{cmpEQ: "=", cmpNE: "<>", cmpLT: "<", cmpLE: "<=", cmpGT: ">", cmpGE: ">="}

// orderHolds reports whether an ordering comparator cmp (cmpLT, cmpLE, cmpGT,
// cmpGE) holds for operands that compared as r (below, at or above 0).
func orderHolds(cmp uint8, r int) bool {
	switch cmp {
	case cmpLT:
		return r < 0
	case cmpLE:
		return r <= 0
	case cmpGT:
		return r > 0
	}
	return r >= 0
}

type condNode struct {
	kind   uint8
	cmp    uint8
	parens bool
	spec   *opSpec        // cCmp, cIn, cBetween
	ops    []*operandNode // cCmp: 2; cBetween: 3; cIn: 1+n
	fn     *funcNode      // cFunc
	l, r   *condNode      // cAnd, cOr; cNot uses l
}

// Update action kinds.
const (
	aSet uint8 = iota
	aRemove
	aAdd
	aDelete
)

var sectionNames = [...]string{aSet: "SET", aRemove: "REMOVE", aAdd: "ADD", aDelete: "DELETE"}

// setValue is the right-hand side of a SET action: one operand, or two
// joined by + or -.
type setValue struct {
	arith  bool
	minus  bool
	parens bool // arithmetic written in parentheses
	l, r   *operandNode
	kids   []*operandNode // arith: l and r, for validation
	spec   *opSpec        // arith: + or -
}

type action struct {
	kind uint8
	path *pathNode
	val  *setValue // aSet
	ph   int32     // aAdd, aDelete: value placeholder index
}

type section struct {
	kind    uint8
	actions []*action
}
