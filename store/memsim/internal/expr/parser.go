package expr

import (
	"math"
	"strconv"
)

// Parse parses an update expression and a condition expression; either may
// be empty. Syntax errors, repeated clauses, more than two operands in a SET
// value, unknown functions and the like are *store.ValidationError with
// DynamoDB's message.
func Parse(update, condition string) (*Parsed, error) {
	p := &Parsed{}
	names, values := &phTable{}, &phTable{}
	if update != "" {
		if utf16Len(update) > maxExpressionSize {
			return nil, validationf("%s%s", prefixUpdate, msgSizeExceeded)
		}
		ps := &parser{src: update, toks: lex(update), names: names, values: values}
		if msg := ps.run(func() { p.actions = ps.parseUpdate() }); msg != "" {
			return nil, validationf("%s%s", prefixUpdate, msg)
		}
		w := &walker{update: true}
		if w.actions(p.actions); w.err != "" {
			return nil, validationf("%s%s", prefixUpdate, w.err)
		}
		p.hasUpdate = true
	}
	if condition != "" {
		if n := utf16Len(condition); n > maxExpressionSize {
			return nil, validationf("%s%s expression size: %d", prefixCondition, msgSizeExceeded, n)
		}
		ps := &parser{src: condition, toks: lex(condition), names: names, values: values}
		if msg := ps.run(func() { p.cond = ps.parseCondition() }); msg != "" {
			return nil, validationf("%s%s", prefixCondition, msg)
		}
		w := &walker{}
		if w.walk(p.cond); w.err != "" {
			return nil, validationf("%s%s", prefixCondition, w.err)
		}
	}
	p.names, p.values = names.list, values.list
	return p, nil
}

// The parser is a recursive-descent rendering of DynamoDB's ANTLR grammar:
//
//	condition : operand comparator operand
//	          | operand IN '(' operand (',' operand)* ')'
//	          | operand BETWEEN operand AND operand
//	          | function
//	          | '(' condition ')'          (redundant-parentheses check)
//	          | NOT condition              (binds tighter than AND)
//	          | condition AND condition
//	          | condition OR condition ;
//	update    : (SET set_action (',' set_action)*
//	          |  ADD path literal (',' path literal)*
//	          |  DELETE path literal (',' path literal)*
//	          |  REMOVE path (',' path)*)+ ;
//	set_action: path '=' set_value ;
//	set_value : operand | arithmetic ;
//	arithmetic: operand ('+'|'-') operand | '(' arithmetic ')' ;
//	operand   : path | literal | function | '(' operand ')' ;
//	function  : ID '(' operand (',' operand)* ')' ;
//	path      : (ID | #name) ('.' (ID | #name | :value) | '[' INDEX ']')* ;
//
// Where the grammar is ambiguous for a while ('(' can open a condition or an
// operand; an operand can start a comparison or be a function condition),
// the parser parses a cover of both and decides when a token settles it, so
// a syntax error is reported at the first token that no valid expression
// can contain (as ANTLR's adaptive prediction does).
//
// The redundant-parentheses rule is an action of the grammar: ANTLR runs it
// when the closing parenthesis is consumed, but only once prediction has
// committed to that part of the tree. The parser therefore records, for
// each redundant pair, the index of the token at which the enclosing
// prediction settled; the error is reported if that happened before the
// first syntax error.

type syntaxError struct{ at int }

type parser struct {
	src    string
	toks   []token
	pos    int
	names  *phTable
	values *phTable

	fires   []int // per redundant pair: the token index at which ANTLR runs the action
	pending []int // indexes into fires of the pairs in the unsettled prediction region
	open    bool  // a prediction region is unsettled
}

// phTable numbers distinct placeholders in order of first appearance.
type phTable struct {
	list  []string
	index map[string]int32
}

func (t *phTable) add(s string) int32 {
	if i, ok := t.index[s]; ok {
		return i
	}
	if t.index == nil {
		t.index = make(map[string]int32)
	}
	t.index[s] = int32(len(t.list))
	t.list = append(t.list, s)
	return t.index[s]
}

func (p *parser) tok() tokKind       { return p.toks[p.pos].kind }
func (p *parser) peek(n int) tokKind { return p.toks[min(p.pos+n, len(p.toks)-1)].kind }
func (p *parser) text() string       { t := p.toks[p.pos]; return p.src[t.start:t.end] }
func (p *parser) expect(k tokKind)   { p.must(p.tok() == k); p.pos++ }
func (p *parser) must(ok bool) {
	if !ok {
		panic(syntaxError{p.pos})
	}
}

// openRegion starts a prediction region unless one is unsettled; it reports
// whether the caller owns the new region.
func (p *parser) openRegion() bool {
	if p.open {
		return false
	}
	p.open = true
	return true
}

// settle marks the open region, if any, as decided at token index at.
func (p *parser) settle(at int) {
	for _, e := range p.pending {
		p.fires[e] = at
	}
	p.pending, p.open = p.pending[:0], false
}

// closeRegion settles the region the caller owns, if still open, at the
// current token (the one that follows the construct).
func (p *parser) closeRegion(owner bool) {
	if owner && p.open {
		p.settle(p.pos)
	}
}

// closeParen consumes the ')' around n and records a redundant pair when n
// was already in parentheses.
func (p *parser) closeParen(n *node) *node {
	p.expect(tRParen)
	if n.parens {
		fire := p.pos - 1
		if p.open {
			p.pending = append(p.pending, len(p.fires))
			fire = math.MaxInt
		}
		p.fires = append(p.fires, fire)
	}
	n.parens = true
	return n
}

// run parses with fn and returns the first error as DynamoDB would report
// it ("" when none): a redundant pair of parentheses that ANTLR acts on
// before the first syntax error, else the syntax error.
func (p *parser) run(fn func()) string {
	errAt := math.MaxInt
	func() {
		defer func() {
			if r := recover(); r != nil {
				se, ok := r.(syntaxError)
				if !ok {
					panic(r)
				}
				errAt = se.at
			}
		}()
		fn()
	}()
	for _, fire := range p.fires {
		if fire < errAt {
			return msgRedundant
		}
	}
	if errAt != math.MaxInt {
		return syntaxMessage(p.src, p.toks, errAt)
	}
	return ""
}

func (p *parser) parsePath() []pathEl {
	var els []pathEl
	p.must(p.tok() == tID || p.tok() == tNAME)
	for {
		s := p.text()
		switch p.tok() {
		case tID:
			els = append(els, pathEl{kind: peID, text: s})
		case tNAME:
			els = append(els, pathEl{kind: peName, text: s, ph: p.names.add(s)})
		case tVALUE:
			els = append(els, pathEl{kind: peValue, text: s, ph: p.values.add(s)})
		case tINDEX:
			index, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				index = -1
			}
			els = append(els, pathEl{kind: peIndex, text: s, index: index})
			p.pos++
			p.must(p.tok() == tRBrack)
		default:
			panic(syntaxError{p.pos})
		}
		p.pos++
		switch p.tok() {
		case tDot:
			p.pos++
			p.must(p.tok() == tID || p.tok() == tNAME || p.tok() == tVALUE)
		case tLBrack:
			p.pos++
			p.must(p.tok() == tINDEX)
		default:
			return els
		}
	}
}

// parseOperand parses an operand where the grammar allows nothing else
// (function arguments, the right side of comparisons, arithmetic).
func (p *parser) parseOperand() *node {
	switch p.tok() {
	case tLParen:
		p.pos++
		return p.closeParen(p.parseOperand())
	case tID:
		if p.peek(1) == tLParen {
			f := &node{kind: nFunc, name: p.text()}
			f.spec = opSpecs[f.name]
			p.pos += 2 // name and '('
			f.kids = append(f.kids, p.parseOperand())
			for p.tok() == tComma {
				p.pos++
				f.kids = append(f.kids, p.parseOperand())
			}
			p.expect(tRParen)
			return f
		}
		return &node{kind: nPath, path: p.parsePath()}
	case tNAME:
		return &node{kind: nPath, path: p.parsePath()}
	case tVALUE:
		o := &node{kind: nValue, ph: p.values.add(p.text())}
		p.pos++
		return o
	}
	panic(syntaxError{p.pos})
}

func (p *parser) parseCondition() *node {
	c, _ := p.parseOr(false)
	p.must(p.tok() == tEOF)
	return c
}

// parseOr parses a condition. With allowOp (directly inside parentheses),
// the content may turn out to be a lone operand, returned as op.
func (p *parser) parseOr(allowOp bool) (c, op *node) {
	return p.parseBinary(allowOp, tOR, nOr, func(allowOp bool) (*node, *node) { return p.parseBinary(allowOp, tAND, nAnd, p.parseNot) })
}

// parseBinary parses next (join next)*: AND binds tighter than OR.
func (p *parser) parseBinary(allowOp bool, join tokKind, kind uint8, next func(bool) (*node, *node)) (c, op *node) {
	c, op = next(allowOp)
	if op != nil {
		return nil, op
	}
	for p.tok() == join {
		p.settle(p.pos)
		p.pos++
		r, _ := next(false)
		c = &node{kind: kind, kids: []*node{c, r}}
	}
	return c, nil
}

func (p *parser) parseNot(allowOp bool) (*node, *node) {
	if p.tok() == tNOT {
		p.settle(p.pos)
		p.pos++
		inner, _ := p.parseNot(false)
		return &node{kind: nNot, kids: []*node{inner}}, nil
	}
	owner := p.openRegion()
	defer p.closeRegion(owner)
	switch p.tok() {
	case tLParen:
		p.pos++
		inner, iop := p.parseOr(true)
		if iop != nil {
			return p.afterFirstOperand(p.closeParen(iop), allowOp)
		}
		return p.closeParen(inner), nil
	case tID, tNAME, tVALUE:
		return p.afterFirstOperand(p.parseOperand(), allowOp)
	}
	panic(syntaxError{p.pos})
}

// afterFirstOperand continues a condition whose first operand is o.
func (p *parser) afterFirstOperand(o *node, allowOp bool) (*node, *node) {
	k := p.tok()
	if k >= tEQ && k <= tGE || k == tIN || k == tBETWEEN {
		p.settle(p.pos)
		p.pos++
	}
	switch {
	case k >= tEQ && k <= tGE:
		return &node{kind: nCmp, op: uint8(k - tEQ), kids: []*node{o, p.parseOperand()}, spec: opSpecs[cmpNames[k-tEQ]]}, nil
	case k == tIN:
		p.expect(tLParen)
		c := &node{kind: nIn, kids: []*node{o, p.parseOperand()}, spec: opSpecs["IN"]}
		for p.tok() == tComma {
			p.pos++
			c.kids = append(c.kids, p.parseOperand())
		}
		p.expect(tRParen)
		return c, nil
	case k == tBETWEEN:
		lo := p.parseOperand()
		p.expect(tAND)
		return &node{kind: nBetween, kids: []*node{o, lo, p.parseOperand()}, spec: opSpecs["BETWEEN"]}, nil
	case allowOp && k == tRParen:
		return nil, o // decided by what follows the enclosing parenthesis
	case o.kind == nFunc:
		p.settle(p.pos)
		return o, nil
	}
	panic(syntaxError{p.pos})
}

func (p *parser) parseUpdate() []*action {
	var acts []*action
	for {
		k := p.tok()
		if k < tSET || k > tREMOVE {
			p.must(len(acts) > 0 && k == tEOF)
			return acts
		}
		kind := [...]uint8{aSet, aAdd, aDelete, aRemove}[k-tSET]
		for {
			p.pos++
			a := &action{kind: kind, path: p.parsePath()}
			switch kind {
			case aSet:
				p.expect(tEQ)
				owner := p.openRegion()
				a.val = p.setCover(false)
				p.closeRegion(owner)
			case aAdd, aDelete:
				p.must(p.tok() == tVALUE)
				a.ph = p.values.add(p.text())
				p.pos++
			}
			acts = append(acts, a)
			if p.tok() != tComma {
				a.last = true
				break
			}
		}
	}
}

// setCover parses a SET value: an operand, or arithmetic (nArith).
func (p *parser) setCover(inParen bool) *node {
	var o *node
	if p.tok() == tLParen {
		p.pos++
		if o = p.closeParen(p.setCover(true)); o.kind == nArith {
			return o
		}
	} else {
		o = p.parseOperand()
	}
	if k := p.tok(); k == tPlus || k == tMinus {
		p.settle(p.pos)
		p.pos++
		n := &node{kind: nArith, kids: []*node{o, p.parseOperand()}, spec: opSpecs["+"]}
		if k == tMinus {
			n.op, n.spec = 1, opSpecs["-"]
		}
		return n
	}
	if !inParen || p.tok() != tRParen {
		p.settle(p.pos)
	}
	return o
}

// The walker reproduces the checks DynamoDB makes while translating the
// parse tree (DynamoDB Local's ASTListener), in the same order: a
// depth-first walk in which function names are checked when a call is
// entered, identifiers and list indexes when they are left, and repeated
// sections when a section is left.
type walker struct {
	update  bool
	nesting int
	err     string
}

func (w *walker) fail(msg string) {
	if w.err == "" {
		w.err = msg
	}
}

func (w *walker) path(els []pathEl) {
	for _, e := range els {
		switch {
		case w.err != "":
			return
		case e.kind == peID && isReserved(e.text):
			w.fail("Attribute name is a reserved keyword; reserved keyword: " + e.text)
		case e.kind == peIndex && e.index < 0:
			w.fail("List index is not within the allowable range; index: [" + e.text + "]")
		}
	}
}

func (w *walker) walk(n *node) {
	if w.err != "" {
		return
	}
	switch n.kind {
	case nPath:
		w.path(n.path)
	case nFunc:
		w.call(n)
	case nAnd, nOr, nNot:
		for _, k := range n.kids {
			w.walk(k)
		}
	default: // operators
		w.nesting++
		for _, k := range n.kids {
			w.walk(k)
		}
		w.nesting--
	}
}

func (w *walker) call(f *node) {
	name, use := f.name, useNone
	if f.spec != nil {
		use = f.spec.use
	}
	switch {
	case use == useNone:
		w.fail("Invalid function name; function: " + name)
	case w.update && use&useUpdate == 0:
		w.fail("The function is not allowed in an update expression; function: " + name)
	case !w.update && use&useCond == 0:
		w.fail("The function is not allowed in a condition expression; function: " + name)
	case w.nesting > 0 && name != "if_not_exists" && name != "size", w.nesting == 0 && !w.update && use&useBool == 0:
		w.fail("The function is not allowed to be used this way in an expression; function: " + name)
	}
	w.nesting++
	for _, a := range f.kids {
		w.walk(a)
	}
	w.nesting--
}

func (w *walker) actions(acts []*action) {
	var seen [4]bool
	for _, a := range acts {
		w.path(a.path)
		if a.kind == aSet {
			w.walk(a.val)
		}
		if a.last && w.err == "" {
			if seen[a.kind] {
				w.fail(`The "` + sectionNames[a.kind] + `" section can only be used once in an update expression;`)
			}
			seen[a.kind] = true
		}
		if w.err != "" {
			return
		}
	}
}
