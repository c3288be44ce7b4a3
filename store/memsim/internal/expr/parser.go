package expr

import "math"

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
// committed to that part of the tree. The parser therefore records each
// redundant pair with the index of the token at which the enclosing
// prediction settled; the error is reported if that happened before the
// first syntax error.

type syntaxError struct{ at int }

type parenEvent struct {
	fire int // token index at which ANTLR would run the action
}

type region struct {
	events []int // indexes into parser.events
}

type parser struct {
	src    string
	toks   []token
	pos    int
	names  *phTable
	values *phTable

	events []parenEvent
	reg    *region // the prediction region not yet settled, if any
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
	i := int32(len(t.list))
	t.list = append(t.list, s)
	t.index[s] = i
	return i
}

func (p *parser) tok() tokKind       { return p.toks[p.pos].kind }
func (p *parser) peek(n int) tokKind { return p.toks[min(p.pos+n, len(p.toks)-1)].kind }
func (p *parser) text(i int) string  { t := p.toks[i]; return p.src[t.start:t.end] }
func (p *parser) fail(at int)        { panic(syntaxError{at}) }
func (p *parser) expect(k tokKind)   { p.must(p.tok() == k); p.pos++ }
func (p *parser) must(ok bool) {
	if !ok {
		p.fail(p.pos)
	}
}
func isComparator(k tokKind) bool { return k >= tEQ && k <= tGE }

// openRegion starts a prediction region unless one is unsettled; it reports
// whether the caller owns the new region.
func (p *parser) openRegion() bool {
	if p.reg != nil {
		return false
	}
	p.reg = &region{}
	return true
}

// settle marks the open region as decided at token index at.
func (p *parser) settle(at int) {
	if p.reg == nil {
		return
	}
	for _, e := range p.reg.events {
		p.events[e].fire = at
	}
	p.reg = nil
}

// closeRegion settles the region the caller owns, if still open, at the
// current token (the one that follows the construct).
func (p *parser) closeRegion(owner bool) {
	if owner && p.reg != nil {
		p.settle(p.pos)
	}
}

// redundant records a redundant pair of parentheses closed at token index
// closeAt.
func (p *parser) redundant(closeAt int) {
	if p.reg == nil {
		p.events = append(p.events, parenEvent{fire: closeAt})
		return
	}
	p.reg.events = append(p.reg.events, len(p.events))
	p.events = append(p.events, parenEvent{fire: math.MaxInt})
}

// run parses with fn and returns the first error as DynamoDB would report
// it: a redundant pair of parentheses that ANTLR acts on before the first
// syntax error, else the syntax error.
func (p *parser) run(fn func()) (msg string, failed bool) {
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
	for _, e := range p.events {
		if e.fire < errAt {
			return msgRedundant, true
		}
	}
	if errAt != math.MaxInt {
		return syntaxMessage(p.src, p.toks, errAt), true
	}
	return "", false
}

// ---- paths and operands ----

func (p *parser) parsePath() *pathNode {
	pn := &pathNode{}
	switch p.tok() {
	case tID:
		pn.els = append(pn.els, pathEl{kind: peID, text: p.text(p.pos)})
	case tNAME:
		s := p.text(p.pos)
		pn.els = append(pn.els, pathEl{kind: peName, text: s, ph: p.names.add(s)})
	default:
		p.fail(p.pos)
	}
	p.pos++
	for {
		switch p.tok() {
		case tDot:
			p.pos++
			s := p.text(p.pos)
			switch p.tok() {
			case tID:
				pn.els = append(pn.els, pathEl{kind: peID, text: s})
			case tNAME:
				pn.els = append(pn.els, pathEl{kind: peName, text: s, ph: p.names.add(s)})
			case tVALUE:
				pn.els = append(pn.els, pathEl{kind: peValue, text: s, ph: p.values.add(s)})
			default:
				p.fail(p.pos)
			}
			p.pos++
		case tLBrack:
			p.pos++
			p.must(p.tok() == tINDEX)
			digits := p.text(p.pos)
			p.pos++
			p.expect(tRBrack)
			pn.els = append(pn.els, pathEl{kind: peIndex, text: digits, index: parseIndex(digits)})
		default:
			return pn
		}
	}
}

func parseIndex(digits string) int64 {
	var n int64
	for i := 0; i < len(digits); i++ {
		n = n*10 + int64(digits[i]-'0')
		if n > math.MaxInt32 {
			return -1
		}
	}
	return n
}

// parseOperand parses an operand where the grammar allows nothing else
// (function arguments, the right side of comparisons, arithmetic).
func (p *parser) parseOperand() *operandNode {
	switch p.tok() {
	case tLParen:
		p.pos++
		o := p.parseOperand()
		p.expect(tRParen)
		if o.parens {
			p.redundant(p.pos - 1)
		}
		o.parens = true
		return o
	case tID:
		if p.peek(1) == tLParen {
			return &operandNode{kind: oFunc, fn: p.parseFunc()}
		}
		return &operandNode{kind: oPath, path: p.parsePath()}
	case tNAME:
		return &operandNode{kind: oPath, path: p.parsePath()}
	case tVALUE:
		o := &operandNode{kind: oValue, ph: p.values.add(p.text(p.pos))}
		p.pos++
		return o
	}
	p.fail(p.pos)
	return nil
}

func (p *parser) parseFunc() *funcNode {
	f := &funcNode{name: p.text(p.pos)}
	f.spec = opSpecs[f.name]
	p.pos += 2 // name and '('
	f.args = append(f.args, p.parseOperand())
	for p.tok() == tComma {
		p.pos++
		f.args = append(f.args, p.parseOperand())
	}
	p.expect(tRParen)
	return f
}

// ---- conditions ----

func (p *parser) parseCondition() *condNode {
	c, _ := p.parseOr(false)
	p.must(p.tok() == tEOF)
	return c
}

// parseOr parses a condition. With allowOp (directly inside parentheses),
// the content may turn out to be a lone operand, returned as op.
func (p *parser) parseOr(allowOp bool) (c *condNode, op *operandNode) {
	c, op = p.parseAnd(allowOp)
	if op != nil {
		return nil, op
	}
	for p.tok() == tOR {
		p.settle(p.pos)
		p.pos++
		r, _ := p.parseAnd(false)
		c = &condNode{kind: cOr, l: c, r: r}
	}
	return c, nil
}

func (p *parser) parseAnd(allowOp bool) (c *condNode, op *operandNode) {
	c, op = p.parseNot(allowOp)
	if op != nil {
		return nil, op
	}
	for p.tok() == tAND {
		p.settle(p.pos)
		p.pos++
		r, _ := p.parseNot(false)
		c = &condNode{kind: cAnd, l: c, r: r}
	}
	return c, nil
}

func (p *parser) parseNot(allowOp bool) (*condNode, *operandNode) {
	if p.tok() == tNOT {
		p.settle(p.pos)
		p.pos++
		inner, _ := p.parseNot(false)
		return &condNode{kind: cNot, l: inner}, nil
	}
	return p.parsePrimary(allowOp)
}

func (p *parser) parsePrimary(allowOp bool) (c *condNode, op *operandNode) {
	owner := p.openRegion()
	defer p.closeRegion(owner)
	switch p.tok() {
	case tLParen:
		p.pos++
		inner, iop := p.parseOr(true)
		p.expect(tRParen)
		closeAt := p.pos - 1
		if iop != nil {
			if iop.parens {
				p.redundant(closeAt)
			}
			iop.parens = true
			return p.afterFirstOperand(iop, allowOp)
		}
		if inner.parens {
			p.redundant(closeAt)
		}
		inner.parens = true
		return inner, nil
	case tID, tNAME, tVALUE:
		return p.afterFirstOperand(p.parseOperand(), allowOp)
	}
	p.fail(p.pos)
	return nil, nil
}

// afterFirstOperand continues a condition whose first operand is o.
func (p *parser) afterFirstOperand(o *operandNode, allowOp bool) (*condNode, *operandNode) {
	k := p.tok()
	switch {
	case isComparator(k):
		p.settle(p.pos)
		p.pos++
		r := p.parseOperand()
		return &condNode{kind: cCmp, cmp: uint8(k - tEQ), ops: []*operandNode{o, r}, spec: opSpecs[cmpNames[k-tEQ]]}, nil
	case k == tIN:
		p.settle(p.pos)
		p.pos++
		p.expect(tLParen)
		ops := []*operandNode{o, p.parseOperand()}
		for p.tok() == tComma {
			p.pos++
			ops = append(ops, p.parseOperand())
		}
		p.expect(tRParen)
		return &condNode{kind: cIn, ops: ops, spec: opSpecs["IN"]}, nil
	case k == tBETWEEN:
		p.settle(p.pos)
		p.pos++
		lo := p.parseOperand()
		p.expect(tAND)
		hi := p.parseOperand()
		return &condNode{kind: cBetween, ops: []*operandNode{o, lo, hi}, spec: opSpecs["BETWEEN"]}, nil
	case allowOp && k == tRParen:
		return nil, o // decided by what follows the enclosing parenthesis
	case o.kind == oFunc:
		p.settle(p.pos)
		return &condNode{kind: cFunc, fn: o.fn, parens: o.parens}, nil
	}
	p.fail(p.pos)
	return nil, nil
}

// ---- update expressions ----

func (p *parser) parseUpdate() []*section {
	var secs []*section
	for {
		var kind uint8
		switch p.tok() {
		case tSET:
			kind = aSet
		case tREMOVE:
			kind = aRemove
		case tADD:
			kind = aAdd
		case tDELETE:
			kind = aDelete
		default:
			p.must(len(secs) > 0 && p.tok() == tEOF)
			return secs
		}
		p.pos++
		s := &section{kind: kind}
		for {
			s.actions = append(s.actions, p.parseAction(kind))
			if p.tok() != tComma {
				break
			}
			p.pos++
		}
		secs = append(secs, s)
	}
}

func (p *parser) parseAction(kind uint8) *action {
	a := &action{kind: kind, path: p.parsePath()}
	switch kind {
	case aSet:
		p.expect(tEQ)
		a.val = p.parseSetValue()
	case aAdd, aDelete:
		p.must(p.tok() == tVALUE)
		a.ph = p.values.add(p.text(p.pos))
		p.pos++
	}
	return a
}

func (p *parser) parseSetValue() *setValue {
	owner := p.openRegion()
	defer p.closeRegion(owner)
	return p.setCover(false)
}

func (p *parser) setCover(inParen bool) *setValue {
	if p.tok() == tLParen {
		p.pos++
		inner := p.setCover(true)
		p.expect(tRParen)
		closeAt := p.pos - 1
		if inner.arith {
			if inner.parens {
				p.redundant(closeAt)
			}
			inner.parens = true
			return inner
		}
		if inner.l.parens {
			p.redundant(closeAt)
		}
		inner.l.parens = true
		return p.afterSetOperand(inner.l, inParen)
	}
	return p.afterSetOperand(p.parseOperand(), inParen)
}

func (p *parser) afterSetOperand(o *operandNode, inParen bool) *setValue {
	if k := p.tok(); k == tPlus || k == tMinus {
		p.settle(p.pos)
		p.pos++
		r := p.parseOperand()
		v := &setValue{arith: true, minus: k == tMinus, l: o, r: r, kids: []*operandNode{o, r}, spec: opSpecs["+"]}
		if v.minus {
			v.spec = opSpecs["-"]
		}
		return v
	}
	if !inParen || p.tok() != tRParen {
		p.settle(p.pos)
	}
	return &setValue{l: o}
}
