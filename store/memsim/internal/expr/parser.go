package expr

import (
	"math"
	"slices"
	"strconv"
)

// Parse parses an update expression and a condition expression; either may
// be empty. Syntax errors, repeated clauses, more than two operands in a SET
// value, unknown functions and the like are *store.ValidationError with
// DynamoDB's message.
func Parse(update, condition string) (*Parsed, error) {
	p := &Parsed{}
	for i, src := range [2]string{update, condition} {
		prefix, ps, w := prefixCondition, &parser{src: src, toks: lex(src), names: &p.names, values: &p.values}, &walker{update: i == 0}
		if w.update {
			prefix = prefixUpdate
		}
		switch n := utf16Len(src); {
		case src == "":
			continue
		case n > maxExpressionSize && w.update:
			return nil, validationf("%s%s", prefix, msgSizeExceeded)
		case n > maxExpressionSize:
			return nil, validationf("%s%s expression size: %d", prefix, msgSizeExceeded, n)
		}
		msg := ps.run(func() {
			if w.update {
				p.actions = ps.parseUpdate()
				w.actions(p.actions)
			} else {
				p.cond = ps.parseCondition()
				w.walk(p.cond)
			}
		})
		if msg == "" {
			msg = w.err
		}
		if msg != "" {
			return nil, validationf("%s%s", prefix, msg)
		}
	}
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
// the parser parses a cover of both, so that a syntax error is reported at
// the first token no valid expression can contain (as ANTLR's adaptive
// prediction does). ANTLR runs the redundant-parentheses action when the
// ')' is consumed, but only once prediction has committed to that part of
// the tree: the parser records for each redundant pair the token at which
// the enclosing prediction settled, and reports the pair if that came
// before the first syntax error.

type syntaxError struct{ at int }

type parser struct {
	src    string
	toks   []token
	pos    int
	names  *[]string // placeholders, numbered in order of first appearance
	values *[]string

	fires   []int // per redundant pair: the token index at which ANTLR runs the action
	pending []int // indexes into fires of the pairs in the unsettled prediction region
	open    bool  // a prediction region is unsettled
}

// placeholder returns the index of placeholder s in *list, added if new.
func placeholder(list *[]string, s string) int32 {
	i := slices.Index(*list, s)
	if i < 0 {
		i, *list = len(*list), append(*list, s)
	}
	return int32(i)
}

func (p *parser) tok() tokKind     { return p.toks[p.pos].kind }
func (p *parser) text() string     { t := p.toks[p.pos]; return p.src[t.start:t.end] }
func (p *parser) expect(k tokKind) { p.must(p.tok() == k); p.pos++ }
func (p *parser) must(ok bool) {
	if !ok {
		panic(syntaxError{p.pos})
	}
}

// region starts a prediction region unless one is unsettled, and returns
// what settles the region it started, if still open, at the current token
// (the one that follows the construct).
func (p *parser) region() func() {
	if p.open {
		return func() {}
	}
	p.open = true
	return func() {
		if p.open {
			p.settle(p.pos)
		}
	}
}

// settle marks the open region, if any, as decided at token index at.
func (p *parser) settle(at int) {
	for _, e := range p.pending {
		p.fires[e] = at
	}
	p.pending, p.open = p.pending[:0], false
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
func (p *parser) run(fn func()) (msg string) {
	defer func() {
		errAt := math.MaxInt
		if r := recover(); r != nil {
			se, ok := r.(syntaxError)
			if !ok {
				panic(r)
			}
			errAt, msg = se.at, syntaxMessage(p.src, p.toks, se.at)
		}
		for _, fire := range p.fires {
			if fire < errAt {
				msg = msgRedundant
			}
		}
	}()
	fn()
	return ""
}

func (p *parser) parsePath() []pathEl {
	var els []pathEl
	p.must(p.tok() == tID || p.tok() == tNAME)
	for {
		e := pathEl{kind: p.tok(), text: p.text()}
		switch e.kind {
		case tNAME:
			e.ph = placeholder(p.names, e.text)
		case tVALUE:
			e.ph = placeholder(p.values, e.text)
		case tINDEX:
			var err error
			if e.index, err = strconv.ParseInt(e.text, 10, 32); err != nil {
				e.index = -1
			}
			p.pos++
			p.must(p.tok() == tRBrack)
		}
		els = append(els, e)
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
		if p.toks[p.pos+1].kind == tLParen {
			f := &node{kind: nFunc, spec: opSpecs[p.text()]}
			if f.spec == nil { // an unknown function: rejected by the walk
				f.spec = &opSpec{name: p.text()}
			}
			p.pos += 2 // name and '('
			f.kids = p.operands()
			p.expect(tRParen)
			return f
		}
		return &node{kind: nPath, path: p.parsePath()}
	case tNAME:
		return &node{kind: nPath, path: p.parsePath()}
	case tVALUE:
		o := &node{kind: nValue, ph: placeholder(p.values, p.text())}
		p.pos++
		return o
	}
	panic(syntaxError{p.pos})
}

// operands parses operand (',' operand)* after kids.
func (p *parser) operands(kids ...*node) []*node {
	for kids = append(kids, p.parseOperand()); p.tok() == tComma; {
		p.pos++
		kids = append(kids, p.parseOperand())
	}
	return kids
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
	defer p.region()()
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
	if k == tCmp || k == tIN || k == tBETWEEN {
		p.settle(p.pos)
		p.pos++
	}
	switch {
	case k == tCmp:
		t := p.toks[p.pos-1]
		return &node{kind: nCmp, spec: opSpecs[p.src[t.start:t.end]], kids: []*node{o, p.parseOperand()}}, nil
	case k == tIN:
		p.expect(tLParen)
		c := &node{kind: nIn, kids: p.operands(o), spec: opSpecs["IN"]}
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
		for {
			p.pos++
			a := &action{kind: k, path: p.parsePath()}
			switch k {
			case tSET:
				p.must(p.tok() == tCmp && p.text() == "=")
				p.pos++
				settle := p.region()
				a.val = p.setCover(false)
				settle()
			case tADD, tDELETE:
				p.must(p.tok() == tVALUE)
				a.ph = placeholder(p.values, p.text())
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
			n.spec = opSpecs["-"]
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
	err     string // the first fault
}

func (w *walker) path(els []pathEl) {
	for _, e := range els {
		switch {
		case w.err != "":
			return
		case e.kind == tID && isReserved(e.text):
			w.err = "Attribute name is a reserved keyword; reserved keyword: " + e.text
		case e.kind == tINDEX && e.index < 0:
			w.err = "List index is not within the allowable range; index: [" + e.text + "]"
		}
	}
}

func (w *walker) walk(n *node) {
	switch {
	case w.err != "":
		return
	case n.kind == nPath:
		w.path(n.path)
	case n.kind == nFunc:
		w.call(n)
	}
	nest := 0
	if n.kind < nAnd { // functions and operators nest their operands; AND, OR and NOT do not
		nest = 1
	}
	w.nesting += nest
	for _, k := range n.kids {
		w.walk(k)
	}
	w.nesting -= nest
}

// call checks the name of a function and its place.
func (w *walker) call(f *node) {
	name, use := f.spec.name, f.spec.use
	switch {
	case use == 0:
		w.err = "Invalid function name; function: " + name
	case w.update && use&useUpdate == 0:
		w.err = "The function is not allowed in an update expression; function: " + name
	case !w.update && use&useCond == 0:
		w.err = "The function is not allowed in a condition expression; function: " + name
	case w.nesting > 0 && name != "if_not_exists" && name != "size", w.nesting == 0 && !w.update && use&useBool == 0:
		w.err = "The function is not allowed to be used this way in an expression; function: " + name
	}
}

func (w *walker) actions(acts []*action) {
	var seen [tREMOVE + 1]bool
	for _, a := range acts {
		w.path(a.path)
		if a.kind == tSET {
			w.walk(a.val)
		}
		if a.last && w.err == "" {
			if seen[a.kind] {
				w.err = `The "` + sectionNames[a.kind-tSET] + `" section can only be used once in an update expression;`
			}
			seen[a.kind] = true
		}
	}
}
