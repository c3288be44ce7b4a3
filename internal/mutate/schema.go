package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"
)

// Mutant schemata: every mutant of a package is compiled into one build.
// Each mutation site becomes code that behaves as the original unless the
// process's active mutant (LIMITER_MUTANT) is one of the site's, so one
// test binary serves every mutant and a mutant costs a test run, not a
// build. Sites are rewritten as text, splicing the original source: line
// numbers do not move, so compiler errors point at the site.

// Mutant is one change to the code.
type Mutant struct {
	ID     int    `json:"id"`
	Target string `json:"target"`
	File   string `json:"file"` // relative to the module root
	Line   int    `json:"line"`
	Col    int    `json:"col"`
	Func   string `json:"func"`
	Kind   string `json:"kind"`
	Change string `json:"change"` // e.g. "< → <="
	Source string `json:"source"` // the line, trimmed

	Status string `json:"status"`
	Raw    string `json:"raw,omitempty"`    // the status before equivalent.txt was applied
	Killer string `json:"killer,omitempty"` // the test that failed first
	Reason string `json:"reason,omitempty"` // why a survivor is equivalent
}

// Mutant kinds.
const (
	kindBoundary   = "CONDITIONALS_BOUNDARY" // < ↔ <=, > ↔ >=
	kindNegation   = "CONDITIONALS_NEGATION" // == ↔ !=, < ↔ >=, !x → x
	kindArithmetic = "ARITHMETIC_BASE"       // + ↔ -, * ↔ /, % → *
	kindLogical    = "INVERT_LOGICAL"        // && ↔ ||
	kindNegative   = "INVERT_NEGATIVES"      // -x → x
	kindIncDec     = "INCREMENT_DECREMENT"   // ++ ↔ --
	kindAssign     = "INVERT_ASSIGNMENTS"    // += ↔ -=, *= ↔ /=
	kindBool       = "INVERT_BOOLEAN"        // true ↔ false
	kindRemoveCall = "REMOVE_CALL"           // a call statement removed
)

type siteKind uint8

const (
	siteOrdered  siteKind = iota // < <= > >=: boundary, then negation
	siteEquality                 // == !=: negation
	siteLogical                  // && ||
	siteArith                    // + - * / %
	siteNeg                      // -x
	siteNot                      // !x
	siteBool                     // true, false
	siteIncDec                   // x++, x--
	siteAssign                   // x += y ...
	siteCall                     // f(...) as a statement
)

// site is one place in a file where mutants live: ids first .. first+n-1.
type site struct {
	kind       siteKind
	start, end int // byte offsets of the node
	node       ast.Node
	first      int
	n          int
}

// fileSchema collects a file's sites and renders the file with them.
type fileSchema struct {
	fset  *token.FileSet
	tf    *token.File
	file  *ast.File
	src   []byte
	info  *types.Info
	sites []*site
	skip  map[int]bool // lines excluded (the build refused a site there)
}

func (fs *fileSchema) off(p token.Pos) int { return fs.tf.Offset(p) }

// isConst reports whether e is a constant expression (left alone: a
// mutant there could not be a run-time switch).
func (fs *fileSchema) isConst(e ast.Expr) bool {
	tv, ok := fs.info.Types[e]
	return ok && tv.Value != nil
}

// numeric reports whether e has a numeric type (not a type parameter).
func (fs *fileSchema) numeric(e ast.Expr) bool {
	tv, ok := fs.info.Types[e]
	if !ok || tv.Type == nil {
		return false
	}
	if _, ok := tv.Type.(*types.TypeParam); ok {
		return false
	}
	b, ok := tv.Type.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsNumeric != 0 && b.Info()&types.IsComplex == 0
}

func (fs *fileSchema) integer(e ast.Expr) bool {
	tv, ok := fs.info.Types[e]
	if !ok || tv.Type == nil {
		return false
	}
	b, ok := tv.Type.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsInteger != 0
}

// boolType reports whether e's type is the predeclared bool or untyped
// bool (a named boolean type would not take the helpers' bool).
func (fs *fileSchema) boolType(e ast.Expr) bool {
	tv, ok := fs.info.Types[e]
	if !ok || tv.Type == nil {
		return false
	}
	b, ok := tv.Type.(*types.Basic)
	return ok && (b.Kind() == types.Bool || b.Kind() == types.UntypedBool)
}

// collect finds the sites of a file.
func (fs *fileSchema) collect(f *ast.File) {
	simple := map[ast.Stmt]bool{} // init and post statements: no if allowed there
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok == token.CONST {
				return false
			}
		case *ast.ArrayType, *ast.FieldList:
			// Array lengths are constant; parameter lists hold no code.
			if _, ok := n.(*ast.FieldList); ok {
				return true
			}
			return false
		case *ast.ForStmt:
			simple[n.Init], simple[n.Post] = true, true
		case *ast.IfStmt:
			simple[n.Init] = true
		case *ast.SwitchStmt:
			simple[n.Init] = true
		case *ast.TypeSwitchStmt:
			simple[n.Init] = true
		case *ast.BinaryExpr:
			fs.binary(n)
		case *ast.UnaryExpr:
			if fs.isConst(n) {
				return false
			}
			switch {
			case n.Op == token.SUB && fs.numeric(n.X):
				fs.add(siteNeg, n, 1)
			case n.Op == token.NOT:
				fs.add(siteNot, n, 1)
			}
		case *ast.Ident:
			if (n.Name == "true" || n.Name == "false") && fs.info.Uses[n] == types.Universe.Lookup(n.Name) {
				fs.add(siteBool, n, 1)
			}
		case *ast.IncDecStmt:
			if !simple[n] {
				fs.add(siteIncDec, n, 1)
			}
		case *ast.AssignStmt:
			if simple[n] {
				return true
			}
			switch n.Tok {
			case token.ADD_ASSIGN, token.SUB_ASSIGN, token.MUL_ASSIGN, token.QUO_ASSIGN:
				if fs.numeric(n.Lhs[0]) {
					fs.add(siteAssign, n, 1)
				}
			}
		case *ast.ExprStmt:
			if call, ok := n.X.(*ast.CallExpr); ok && !simple[n] && fs.removable(call) {
				fs.add(siteCall, n, 1)
			}
		}
		return true
	})
}

func (fs *fileSchema) binary(n *ast.BinaryExpr) {
	if fs.isConst(n) {
		return
	}
	switch n.Op {
	case token.LSS, token.LEQ, token.GTR, token.GEQ:
		fs.add(siteOrdered, n, 2)
	case token.EQL, token.NEQ:
		fs.add(siteEquality, n, 1)
	case token.LAND, token.LOR:
		if fs.boolType(n.X) && fs.boolType(n.Y) {
			fs.add(siteLogical, n, 1)
		}
	case token.ADD, token.SUB, token.MUL, token.QUO:
		if fs.numeric(n) {
			fs.add(siteArith, n, 1)
		}
	case token.REM:
		if fs.integer(n) {
			fs.add(siteArith, n, 1)
		}
	}
}

// removable reports whether a call statement may be removed: not panic
// (a terminating statement), not a lock (a mutant that deadlocks or races
// costs a timeout and teaches nothing the race detector does not), not a
// call that only logs or only reserves capacity (unmuted).
func (fs *fileSchema) removable(call *ast.CallExpr) bool {
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		if obj, ok := fs.info.Uses[fn].(*types.Builtin); ok {
			return obj.Name() != "panic" && obj.Name() != "print" && obj.Name() != "println"
		}
	case *ast.SelectorExpr:
		switch fn.Sel.Name {
		case "Lock", "Unlock", "RLock", "RUnlock":
			return false
		}
		if f, ok := fs.info.Uses[fn.Sel].(*types.Func); ok && unmuted[f.FullName()] {
			return false
		}
	}
	return true
}

// unmuted are the calls whose removal changes nothing a test can pin:
// log records (what a log line says is not the behaviour under test) and
// capacity hints.
var unmuted = map[string]bool{
	"(*log/slog.Logger).Debug": true, "(*log/slog.Logger).Info": true, "(*log/slog.Logger).Warn": true,
	"(*log/slog.Logger).Error": true, "(*log/slog.Logger).Log": true, "(*log/slog.Logger).LogAttrs": true,
	"(*strings.Builder).Grow": true, "(*bytes.Buffer).Grow": true,
}

func (fs *fileSchema) add(k siteKind, n ast.Node, count int) {
	if fs.skip[fs.fset.Position(n.Pos()).Line] {
		return
	}
	fs.sites = append(fs.sites, &site{kind: k, node: n, start: fs.off(n.Pos()), end: fs.off(n.End()), n: count})
}

// number assigns mutant ids in source order from next; it returns the
// next free id.
func (fs *fileSchema) number(next int) int {
	slices.SortStableFunc(fs.sites, func(a, b *site) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end // the outer node first
	})
	for _, s := range fs.sites {
		s.first = next
		next += s.n
	}
	return next
}

// render returns the file with every site in schema form.
func (fs *fileSchema) render() []byte {
	return []byte(fs.span(0, len(fs.src), nil))
}

// span renders src[start:end], replacing each outermost site inside it
// but self (the site whose part this is: a call statement and its call
// span the same bytes).
func (fs *fileSchema) span(start, end int, self *site) string {
	var b strings.Builder
	cur := start
	for _, s := range fs.sites {
		if s == self || s.start < cur || s.end > end {
			continue
		}
		b.Write(fs.src[cur:s.start])
		b.WriteString(fs.expand(s))
		cur = s.end
	}
	b.Write(fs.src[cur:end])
	return b.String()
}

// text renders a part of site s.
func (fs *fileSchema) text(s *site, n ast.Node) string {
	return fs.span(fs.off(n.Pos()), fs.off(n.End()), s)
}

var orderedHelpers = map[token.Token]string{token.LSS: "zzLSS", token.LEQ: "zzLEQ", token.GTR: "zzGTR", token.GEQ: "zzGEQ"}
var arithHelpers = map[token.Token]string{token.ADD: "zzADD", token.SUB: "zzSUB", token.MUL: "zzMUL", token.QUO: "zzQUO", token.REM: "zzREM"}

func (fs *fileSchema) expand(s *site) string {
	id := s.first
	switch n := s.node.(type) {
	case *ast.BinaryExpr:
		x, y := fs.text(s, n.X), fs.text(s, n.Y)
		switch s.kind {
		case siteOrdered:
			return fmt.Sprintf("%s(%d, %s, %s)", orderedHelpers[n.Op], id, x, y)
		case siteEquality:
			return fmt.Sprintf("(zzOn(%d) != (%s %s %s))", id, x, n.Op, y)
		case siteLogical:
			h := "zzLAND"
			if n.Op == token.LOR {
				h = "zzLOR"
			}
			return fmt.Sprintf("%s(%d, %s, func() bool { return %s })", h, id, x, y)
		case siteArith:
			return fmt.Sprintf("%s(%d, %s, %s)", arithHelpers[n.Op], id, x, y)
		}
	case *ast.UnaryExpr:
		if s.kind == siteNeg {
			return fmt.Sprintf("zzNEG(%d, %s)", id, fs.text(s, n.X))
		}
		return fmt.Sprintf("(zzOn(%d) != !(%s))", id, fs.text(s, n.X))
	case *ast.Ident:
		return fmt.Sprintf("(zzOn(%d) != %s)", id, n.Name)
	case *ast.IncDecStmt:
		x := fs.text(s, n.X)
		return fmt.Sprintf("if zzOn(%d) { %s%s } else { %s%s }", id, x, flipIncDec[n.Tok], x, n.Tok)
	case *ast.AssignStmt:
		l, r := fs.text(s, n.Lhs[0]), fs.text(s, n.Rhs[0])
		return fmt.Sprintf("if zzOn(%d) { %s %s %s } else { %s %s %s }", id, l, flipAssign[n.Tok], r, l, n.Tok, r)
	case *ast.ExprStmt:
		return fmt.Sprintf("if !zzOn(%d) { %s }", id, fs.text(s, n.X))
	}
	panic("mutate: unknown site")
}

var flipIncDec = map[token.Token]token.Token{token.INC: token.DEC, token.DEC: token.INC}
var flipAssign = map[token.Token]token.Token{
	token.ADD_ASSIGN: token.SUB_ASSIGN, token.SUB_ASSIGN: token.ADD_ASSIGN,
	token.MUL_ASSIGN: token.QUO_ASSIGN, token.QUO_ASSIGN: token.MUL_ASSIGN,
}

var flipOrdered = map[token.Token][2]token.Token{
	token.LSS: {token.LEQ, token.GEQ}, token.LEQ: {token.LSS, token.GTR},
	token.GTR: {token.GEQ, token.LEQ}, token.GEQ: {token.GTR, token.LSS},
}
var flipArith = map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL}

// mutants describes the mutants of every site. A change made at several
// places of one function with the same source line ("&& → ||" in
// a && b && c, or two lines that read alike) is told apart by its place
// among them, "2nd && → ||" (in source order), so that equivalent.txt
// justifies each on its own.
func (fs *fileSchema) mutants(target, file string, funcs funcIndex) []Mutant {
	var out []Mutant
	opPos := map[int]token.Pos{} // index in out → the operator's position
	for _, s := range fs.sites {
		pos := fs.fset.Position(s.node.Pos())
		at := s.node.Pos()
		if b, ok := s.node.(*ast.BinaryExpr); ok {
			at = b.OpPos
			pos = fs.fset.Position(at)
		}
		m := Mutant{Target: target, File: file, Line: pos.Line, Col: pos.Column, Func: funcs.at(s.start), Source: fs.line(pos.Line)}
		var ms [][2]string
		switch n := s.node.(type) {
		case *ast.BinaryExpr:
			switch s.kind {
			case siteOrdered:
				f := flipOrdered[n.Op]
				ms = [][2]string{{kindBoundary, fmt.Sprintf("%s → %s", n.Op, f[0])}, {kindNegation, fmt.Sprintf("%s → %s", n.Op, f[1])}}
			case siteEquality:
				ms = [][2]string{{kindNegation, fmt.Sprintf("%s → %s", n.Op, negEq(n.Op))}}
			case siteLogical:
				ms = [][2]string{{kindLogical, fmt.Sprintf("%s → %s", n.Op, flipLogical(n.Op))}}
			case siteArith:
				ms = [][2]string{{kindArithmetic, fmt.Sprintf("%s → %s", n.Op, flipArith[n.Op])}}
			}
		case *ast.UnaryExpr:
			if s.kind == siteNeg {
				ms = [][2]string{{kindNegative, "-x → x"}}
			} else {
				ms = [][2]string{{kindNegation, "!x → x"}}
			}
		case *ast.Ident:
			ms = [][2]string{{kindBool, fmt.Sprintf("%s → %v", n.Name, n.Name != "true")}}
		case *ast.IncDecStmt:
			ms = [][2]string{{kindIncDec, fmt.Sprintf("%s → %s", n.Tok, flipIncDec[n.Tok])}}
		case *ast.AssignStmt:
			ms = [][2]string{{kindAssign, fmt.Sprintf("%s → %s", n.Tok, flipAssign[n.Tok])}}
		case *ast.ExprStmt:
			ms = [][2]string{{kindRemoveCall, "remove " + callName(fs.src[s.start:s.end])}}
		}
		for i, k := range ms {
			m.ID, m.Kind, m.Change = s.first+i, k[0], k[1]
			opPos[len(out)] = at
			out = append(out, m)
		}
	}
	ordinals(out, opPos)
	return out
}

// ordinals prefixes each change that more than one place of a function
// shares with the same source line (the keys of equivalent.txt) with its
// place among them ("1st", "2nd", ...), in source order.
func ordinals(ms []Mutant, pos map[int]token.Pos) {
	type key struct{ fn, change, source string }
	same := map[key][]int{}
	for i, m := range ms {
		k := key{m.Func, m.Change, m.Source}
		same[k] = append(same[k], i)
	}
	for _, idx := range same {
		if len(idx) < 2 {
			continue
		}
		slices.SortFunc(idx, func(a, b int) int { return int(pos[a]) - int(pos[b]) })
		for n, i := range idx {
			ms[i].Change = ordinal(n+1) + " " + ms[i].Change
		}
	}
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

func negEq(t token.Token) token.Token {
	if t == token.EQL {
		return token.NEQ
	}
	return token.EQL
}

func flipLogical(t token.Token) token.Token {
	if t == token.LAND {
		return token.LOR
	}
	return token.LAND
}

// callName is a call statement's callee, for the report.
func callName(src []byte) string {
	s := string(src)
	if i := strings.IndexByte(s, '('); i >= 0 {
		s = s[:i]
	}
	return s + "(…)"
}

func (fs *fileSchema) line(n int) string {
	start := fs.off(fs.tf.LineStart(n))
	end := len(fs.src)
	if n < fs.tf.LineCount() {
		end = fs.off(fs.tf.LineStart(n+1)) - 1
	}
	return strings.TrimSpace(string(fs.src[start:end]))
}

// funcIndex names the function around an offset: "Type.Method" or "func".
type funcIndex []funcSpan

type funcSpan struct {
	start, end int
	name       string
}

func indexFuncs(fs *fileSchema, f *ast.File) funcIndex {
	var idx funcIndex
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		idx = append(idx, funcSpan{fs.off(fd.Pos()), fs.off(fd.End()), name})
	}
	return idx
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	}
	return "?"
}

func (idx funcIndex) at(off int) string {
	for _, f := range idx {
		if off >= f.start && off < f.end {
			return f.name
		}
	}
	return "(package)"
}

// helperFile is the code every mutated package gets: the active mutant,
// the coverage trace (which sites the tests reached), and the generic
// helpers the sites call.
func helperFile(pkg string, base, end int) []byte {
	return fmt.Appendf(nil, helperTemplate, pkg, base, end-base)
}

const helperTemplate = `// Code generated by internal/mutate. DO NOT EDIT.

package %s

import (
	"cmp"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

const zzBase = %d

var (
	zzMutant  = zzEnv()
	zzTraceTo = os.Getenv("LIMITER_MUTANT_TRACE")
	zzSeen    [%d]atomic.Bool
	zzTraceMu sync.Mutex
)

func zzEnv() int {
	n, _ := strconv.Atoi(os.Getenv("LIMITER_MUTANT"))
	return n
}

// zzOn reports whether mutant id is the active one, and records that its
// site was reached when tracing.
func zzOn(id int) bool {
	if zzTraceTo != "" && !zzSeen[id-zzBase].Swap(true) {
		zzRecord(id)
	}
	return zzMutant == id
}

func zzRecord(id int) {
	zzTraceMu.Lock()
	defer zzTraceMu.Unlock()
	f, err := os.OpenFile(zzTraceTo, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	f.WriteString(strconv.Itoa(id) + "\n")
	f.Close()
}

type zzNumber interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr | ~float32 | ~float64
}

type zzInteger interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

func zzLSS[T cmp.Ordered](id int, a, b T) bool {
	if zzOn(id) {
		return a <= b
	}
	if zzOn(id + 1) {
		return a >= b
	}
	return a < b
}

func zzLEQ[T cmp.Ordered](id int, a, b T) bool {
	if zzOn(id) {
		return a < b
	}
	if zzOn(id + 1) {
		return a > b
	}
	return a <= b
}

func zzGTR[T cmp.Ordered](id int, a, b T) bool {
	if zzOn(id) {
		return a >= b
	}
	if zzOn(id + 1) {
		return a <= b
	}
	return a > b
}

func zzGEQ[T cmp.Ordered](id int, a, b T) bool {
	if zzOn(id) {
		return a > b
	}
	if zzOn(id + 1) {
		return a < b
	}
	return a >= b
}

func zzLAND(id int, a bool, b func() bool) bool {
	if zzOn(id) {
		return a || b()
	}
	return a && b()
}

func zzLOR(id int, a bool, b func() bool) bool {
	if zzOn(id) {
		return a && b()
	}
	return a || b()
}

func zzADD[T zzNumber](id int, a, b T) T {
	if zzOn(id) {
		return a - b
	}
	return a + b
}

func zzSUB[T zzNumber](id int, a, b T) T {
	if zzOn(id) {
		return a + b
	}
	return a - b
}

func zzMUL[T zzNumber](id int, a, b T) T {
	if zzOn(id) {
		return a / b
	}
	return a * b
}

func zzQUO[T zzNumber](id int, a, b T) T {
	if zzOn(id) {
		return a * b
	}
	return a / b
}

func zzREM[T zzInteger](id int, a, b T) T {
	if zzOn(id) {
		return a * b
	}
	return a %% b
}

func zzNEG[T zzNumber](id int, a T) T {
	if zzOn(id) {
		return a
	}
	return -a
}
`
