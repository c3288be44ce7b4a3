package expr

import "strconv"

func parse(update, condition string) (*Parsed, error) {
	p := &Parsed{}
	names, values := &phTable{}, &phTable{}
	if update != "" {
		if utf16Len(update) > maxExpressionSize {
			return nil, verr(prefixUpdate + msgSizeExceeded)
		}
		ps := &parser{src: update, toks: lex(update), names: names, values: values}
		var secs []*section
		if msg, failed := ps.run(func() { secs = ps.parseUpdate() }); failed {
			return nil, verr(prefixUpdate + msg)
		}
		w := &walker{update: true}
		if w.sections(secs); w.err != "" {
			return nil, verr(prefixUpdate + w.err)
		}
		p.hasUpdate = true
		for _, s := range secs {
			p.actions = append(p.actions, s.actions...)
		}
	}
	if condition != "" {
		if n := utf16Len(condition); n > maxExpressionSize {
			return nil, verr(prefixCondition + msgSizeExceeded + " expression size: " + strconv.Itoa(n))
		}
		ps := &parser{src: condition, toks: lex(condition), names: names, values: values}
		if msg, failed := ps.run(func() { p.cond = ps.parseCondition() }); failed {
			return nil, verr(prefixCondition + msg)
		}
		w := &walker{}
		if w.cond(p.cond); w.err != "" {
			return nil, verr(prefixCondition + w.err)
		}
	}
	p.names, p.values = names.list, values.list
	p.flatLHS = true
	for _, a := range p.actions {
		e := a.path.els[0]
		h := headRef{ph: -1, text: e.text}
		if e.kind == peName {
			h.ph = e.ph
		}
		p.heads = append(p.heads, h)
		if len(a.path.els) > 1 {
			p.flatLHS = false
		}
		if a.kind == aSet {
			p.nested = p.nested || nestedOperand(a.val.l) || a.val.arith && nestedOperand(a.val.r)
		}
	}
	p.nested = p.nested || !p.flatLHS || p.cond != nil && nestedCond(p.cond)
	if p.cond != nil {
		p.sensitive = sensitiveValues(p.cond, p.sensitive)
	}
	return p, nil
}

// sensitiveValues lists the value placeholders whose contents Bind checks:
// BETWEEN bounds and attribute_type's type name.
func sensitiveValues(c *condNode, out []int32) []int32 {
	add := func(o *operandNode) {
		if o.kind == oValue {
			out = append(out, o.ph)
		}
	}
	var walkOp func(o *operandNode)
	walkOp = func(o *operandNode) {
		if o.kind == oFunc {
			if o.fn.name == "attribute_type" && len(o.fn.args) == 2 {
				add(o.fn.args[1])
			}
			for _, a := range o.fn.args {
				walkOp(a)
			}
		}
	}
	switch c.kind {
	case cAnd, cOr:
		out = sensitiveValues(c.l, out)
		return sensitiveValues(c.r, out)
	case cNot:
		return sensitiveValues(c.l, out)
	case cFunc:
		walkOp(&operandNode{kind: oFunc, fn: c.fn})
	case cBetween:
		add(c.ops[1])
		add(c.ops[2])
		fallthrough
	default:
		for _, o := range c.ops {
			walkOp(o)
		}
	}
	return out
}

// headRef locates the top-level name of an update path: a raw identifier,
// or name placeholder ph.
type headRef struct {
	ph   int32
	text string
}

func nestedOperand(o *operandNode) bool {
	switch o.kind {
	case oPath:
		return len(o.path.els) > 1
	case oFunc:
		for _, a := range o.fn.args {
			if nestedOperand(a) {
				return true
			}
		}
	}
	return false
}

func nestedCond(c *condNode) bool {
	switch c.kind {
	case cAnd, cOr:
		return nestedCond(c.l) || nestedCond(c.r)
	case cNot:
		return nestedCond(c.l)
	case cFunc:
		for _, a := range c.fn.args {
			if nestedOperand(a) {
				return true
			}
		}
	default:
		for _, o := range c.ops {
			if nestedOperand(o) {
				return true
			}
		}
	}
	return false
}
