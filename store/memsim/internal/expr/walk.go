package expr

import "strings"

// The walk reproduces the checks DynamoDB makes while translating the parse
// tree (DynamoDB Local's ASTListener), in the same order: a depth-first walk
// in which function names are checked when a call is entered, identifiers
// and list indexes when they are left, and repeated sections when a section
// is left.

type fnInfo struct {
	cond    bool // a condition-expression function
	value   bool // an update-expression function
	boolRet bool // returns a boolean (may stand alone as a condition)
}

// functions lists DynamoDB's documented functions. DynamoDB Local also
// knows convert, contains_key, contains_value and list_delete, which the
// service does not document; they are treated as unknown here.
var functions = map[string]fnInfo{
	"attribute_exists":     {cond: true, boolRet: true},
	"attribute_not_exists": {cond: true, boolRet: true},
	"attribute_type":       {cond: true, boolRet: true},
	"begins_with":          {cond: true, boolRet: true},
	"contains":             {cond: true, boolRet: true},
	"size":                 {cond: true},
	"if_not_exists":        {value: true},
	"list_append":          {value: true},
}

type walker struct {
	update  bool
	nesting int
	seen    [4]bool
	err     string
}

func (w *walker) fail(msg string) {
	if w.err == "" {
		w.err = msg
	}
}

func isReserved(id string) bool {
	_, ok := reservedWords[strings.ToUpper(id)]
	return ok
}

func (w *walker) path(pn *pathNode) {
	for _, e := range pn.els {
		if w.err != "" {
			return
		}
		switch e.kind {
		case peID:
			if isReserved(e.text) {
				w.fail("Attribute name is a reserved keyword; reserved keyword: " + e.text)
			}
		case peIndex:
			if e.index < 0 {
				w.fail("List index is not within the allowable range; index: [" + e.text + "]")
			}
		}
	}
}

func (w *walker) operand(o *operandNode) {
	if w.err != "" {
		return
	}
	switch o.kind {
	case oPath:
		w.path(o.path)
	case oFunc:
		w.call(o.fn)
	}
}

func (w *walker) call(f *funcNode) {
	info, ok := functions[f.name]
	switch {
	case !ok:
		w.fail("Invalid function name; function: " + f.name)
	case w.update && !info.value:
		w.fail("The function is not allowed in an update expression; function: " + f.name)
	case w.update && w.nesting > 0 && f.name != "if_not_exists":
		w.fail("The function is not allowed to be used this way in an expression; function: " + f.name)
	case !w.update && !info.cond:
		w.fail("The function is not allowed in a condition expression; function: " + f.name)
	case !w.update && w.nesting == 0 && !info.boolRet:
		w.fail("The function is not allowed to be used this way in an expression; function: " + f.name)
	case !w.update && w.nesting > 0 && f.name != "size":
		w.fail("The function is not allowed to be used this way in an expression; function: " + f.name)
	}
	if w.err != "" {
		return
	}
	w.nesting++
	for _, a := range f.args {
		w.operand(a)
	}
	w.nesting--
}

func (w *walker) cond(c *condNode) {
	if w.err != "" {
		return
	}
	switch c.kind {
	case cCmp, cIn, cBetween:
		w.nesting++
		for _, o := range c.ops {
			w.operand(o)
		}
		w.nesting--
	case cFunc:
		w.call(c.fn)
	case cAnd, cOr:
		w.cond(c.l)
		w.cond(c.r)
	case cNot:
		w.cond(c.l)
	}
}

func (w *walker) sections(secs []*section) {
	for _, s := range secs {
		for _, a := range s.actions {
			w.path(a.path)
			if a.kind == aSet && w.err == "" {
				if a.val.arith {
					w.nesting++
					w.operand(a.val.l)
					w.operand(a.val.r)
					w.nesting--
				} else {
					w.operand(a.val.l)
				}
			}
			if w.err != "" {
				return
			}
		}
		if w.seen[s.kind] {
			w.fail(`The "` + sectionNames[s.kind] + `" section can only be used once in an update expression;`)
			return
		}
		w.seen[s.kind] = true
	}
}
