package expr

import (
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/shardlimit/limiter/store"
)

// Bind makes DynamoDB's placeholder-dependent checks in DynamoDB's order
// (DynamoDB Local's InputConverter.externalToInternalUpdateAndConditionExpressions
// and ExpressionValidator):
//
//  1. ExpressionAttributeNames: not empty, keys well formed;
//  2. ExpressionAttributeValues: not empty, keys well formed;
//  3. every value valid; 4. every name a valid attribute name;
//  5. the update: the paths of its actions in reverse order (placeholders,
//     depth, overlap), then the values of its actions in reverse order
//     (placeholders, operand types and counts, ADD/DELETE operand types);
//  6. the condition, depth first;
//  7. unused names, then unused values;
//  8. nested access to a key attribute in the condition, an update of a key
//     attribute, nested access to a key attribute in the update.
//
// The common case allocates only the Bound.
func (p *Parsed) bind(names map[string]string, values map[string]store.Value, isKey func(string) bool) (*Bound, error) {
	if !p.hasUpdate && p.cond == nil {
		// LocalDBValidatorUtils.validateExpressions(UpdateItemRequest).
		if names != nil {
			return nil, verr("ExpressionAttributeNames can only be specified when using expressions")
		}
		if values != nil {
			return nil, verr("ExpressionAttributeValues can only be specified when using expressions: UpdateExpression and ConditionExpression are null")
		}
		return &Bound{p: p}, nil
	}
	b := &Bound{p: p, names: make([]string, len(p.names)), values: make([]store.Value, len(p.values))}
	namesAll, valuesAll := true, true
	badName, badValue := false, false // a used entry is invalid (or undefined)
	// A map holding exactly the used placeholders skips the checks of its
	// keys, which the lexer has made but for their length.
	for i, ph := range p.names {
		v, ok := names[ph]
		namesAll = namesAll && ok && len(ph) <= maxPlaceholderKey
		badName = badName || v == "" || len(v) > maxAttrNameBytes
		b.names[i] = v
	}
	for i, ph := range p.values {
		v, ok := values[ph]
		valuesAll = valuesAll && ok && len(ph) <= maxPlaceholderKey
		badValue = badValue || !v.IsValid()
		b.values[i] = v
	}
	exactNames := namesAll && len(names) == len(p.names)
	exactValues := valuesAll && len(values) == len(p.values)

	// 1, 2: the maps and their keys.
	if names != nil {
		if len(names) == 0 {
			return nil, verr("ExpressionAttributeNames must not be empty")
		}
		if !exactNames {
			if msg := checkKeys(sortedKeys(names), tNAME); msg != "" {
				return nil, verr("ExpressionAttributeNames contains invalid key: " + msg)
			}
		}
	}
	if values != nil {
		if len(values) == 0 {
			return nil, verr("ExpressionAttributeValues must not be empty")
		}
		if !exactValues {
			if msg := checkKeys(sortedKeys(values), tVALUE); msg != "" {
				return nil, verr("ExpressionAttributeValues contains invalid key: " + msg)
			}
		}
	}
	// 3: every value, used or not.
	bad := badValue
	if !exactValues {
		for _, v := range values {
			bad = bad || !v.IsValid()
		}
	}
	if bad {
		for _, k := range sortedKeys(values) {
			if !values[k].IsValid() {
				return nil, verr("ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, " +
					"must contain exactly one of the supported datatypes for key " + cleanUTF8(k))
			}
		}
	}
	// 4: every name, used or not.
	bad = badName
	if !exactNames {
		for _, n := range names {
			bad = bad || n == "" || len(n) > maxAttrNameBytes
		}
	}
	if bad {
		for _, k := range sortedKeys(names) {
			switch n := names[k]; {
			case n == "":
				return nil, verr("ExpressionAttributeNames contains invalid value: Empty attribute name for key " + cleanUTF8(k))
			case len(n) > maxAttrNameBytes:
				return nil, verr("ExpressionAttributeNames contains invalid value: Attribute name is too large, " +
					"must be less than 65536 bytes for key " + cleanUTF8(k))
			}
		}
	}
	// From here every used placeholder that is defined resolves to a valid
	// name or value, so "" and the zero Value mark undefined ones.

	// 5, 6.
	memo, err := b.validated(&p.memo, true)
	if err != nil {
		return nil, err
	}
	// 7. Every used placeholder is now known to be defined.
	if len(names) > len(p.names) {
		return nil, verr("Value provided in ExpressionAttributeNames unused in expressions: keys: {" +
			strings.Join(unused(sortedKeys(names), p.names), ", ") + "}")
	}
	if len(values) > len(p.values) {
		return nil, verr("Value provided in ExpressionAttributeValues unused in expressions: keys: {" +
			strings.Join(unused(sortedKeys(values), p.values), ", ") + "}")
	}
	// 8.
	if err := b.keyChecks(isKey); err != nil {
		return nil, err
	}
	b.touched = memo.touched
	return b, nil
}

// validated makes checks 5 and 6. Their outcome depends only on the
// resolved names, the types of the values and the contents of the few
// values checked by content, so a memo of the last success spares the walk
// (withNames: the memo must match the names too; a Fixed's never change).
func (b *Bound) validated(slot *atomic.Pointer[bindMemo], withNames bool) (*bindMemo, error) {
	p := b.p
	memo := slot.Load()
	if memo != nil && (!withNames || equalStrings(memo.names, b.names)) && memo.matches(b) {
		return memo, nil
	}
	if p.hasUpdate {
		if msg := b.validateUpdate(); msg != "" {
			return nil, verr(prefixUpdate + msg)
		}
	}
	if p.cond != nil {
		counter := 0
		if msg := b.validateCond(p.cond, &counter); msg != "" {
			return nil, verr(prefixCondition + msg)
		}
	}
	memo = newMemo(b)
	slot.Store(memo)
	return memo, nil
}

// keyChecks makes check 8: nested access to a key attribute in the
// condition, an update of a key attribute, nested access to a key attribute
// in the update.
func (b *Bound) keyChecks(isKey func(string) bool) error {
	p := b.p
	if isKey == nil {
		return nil
	}
	if p.nested && p.cond != nil {
		if msg := b.nestedKeyInCond(p.cond, isKey); msg != "" {
			return verr(msg)
		}
	}
	if p.hasUpdate {
		for i := range p.actions {
			if h := b.head(i); isKey(h) {
				return verr("One or more parameter values were invalid: Cannot update attribute " +
					cleanUTF8(h) + ". This attribute is part of the key")
			}
		}
		if p.nested {
			if msg := b.nestedKeyInUpdate(isKey); msg != "" {
				return verr(msg)
			}
		}
	}
	return nil
}

// head is the top-level attribute name that update action i writes.
func (b *Bound) head(i int) string {
	if h := b.p.heads[i]; h.ph >= 0 {
		return b.names[h.ph]
	}
	return b.p.heads[i].text
}

// sig is a 6-bit signature of a name, for a quick test of distinctness.
func sig(s string) uint64 {
	if s == "" {
		return 1
	}
	return 1 << ((uint(len(s))*7 + uint(s[0])*3 + uint(s[len(s)-1])) & 63)
}

func bufOrMake[T any](buf []T, n int) []T {
	if n <= len(buf) {
		return buf[:n:n]
	}
	return make([]T, n)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func unused(keys, used []string) []string {
	var out []string
	for _, k := range keys {
		found := false
		for _, u := range used {
			if u == k {
				found = true
				break
			}
		}
		if !found {
			out = append(out, cleanUTF8(k))
		}
	}
	return out
}

// checkKeys returns DynamoDB's complaint about the first malformed
// placeholder among keys (DynamoDbParser.validateAttributeNameParameter /
// validateLiteralParametersKeys): empty, longer than 255, or not exactly
// one #name (:value) token.
func checkKeys(keys []string, want tokKind) string {
	for _, k := range keys {
		if k == "" {
			return "The expression attribute map contains an empty key;"
		}
		if n := utf16Len(k); n > maxPlaceholderKey {
			if want == tNAME {
				return "The expression attribute map contains a key that is too long; size of key: " + strconv.Itoa(n)
			}
			return "The expression attribute map contains a key that is too long;"
		}
		toks := lex(k)
		if len(toks) != 2 || toks[0].kind != want {
			return `Syntax error; key: "` + cleanUTF8(k) + `"`
		}
	}
	return ""
}

// ---- paths ----

func (b *Bound) elName(e pathEl) string {
	if e.kind == peName {
		return b.names[e.ph]
	}
	return e.text
}

// validatePath is ExpressionValidator.validateDocPath.
func (b *Bound) validatePath(pn *pathNode) string {
	if len(pn.els) > maxPathDepth {
		return "The document path has too many nesting levels; nesting levels: " + strconv.Itoa(len(pn.els))
	}
	for _, e := range pn.els {
		switch e.kind {
		case peName:
			if b.names[e.ph] == "" {
				return "An expression attribute name used in the document path is not defined; attribute name: " + e.text
			}
		case peValue:
			return "The document path cannot contain attribute value parameters; attribute value: " + e.text
		}
	}
	return ""
}

func (b *Bound) resolvePath(pn *pathNode) []resolvedEl {
	out := make([]resolvedEl, len(pn.els))
	for i, e := range pn.els {
		if e.kind == peIndex {
			out[i] = resolvedEl{list: true, index: e.index}
		} else {
			out[i] = resolvedEl{name: b.elName(e)}
		}
	}
	return out
}

func (b *Bound) samePath(x, y *pathNode) bool {
	if len(x.els) != len(y.els) {
		return false
	}
	for i, e := range x.els {
		f := y.els[i]
		if (e.kind == peIndex) != (f.kind == peIndex) {
			return false
		}
		if e.kind == peIndex {
			if e.index != f.index {
				return false
			}
		} else if b.elName(e) != b.elName(f) {
			return false
		}
	}
	return true
}

// ---- the update ----

func (b *Bound) validateUpdate() string {
	acts := b.p.actions
	n := len(acts)
	// The paths, last action first (ExpressionValidator.buildProjectionTree).
	if b.p.flatLHS {
		var seen uint64 // signatures of the heads of actions i+1..
		for i := n - 1; i >= 0; i-- {
			// validatePath, for a path of one element
			hr := b.p.heads[i]
			h := hr.text
			if hr.ph >= 0 {
				if h = b.names[hr.ph]; h == "" {
					return "An expression attribute name used in the document path is not defined; attribute name: " + hr.text
				}
			}
			if sg := sig(h); seen&sg != 0 {
				for j := i + 1; j < n; j++ {
					if b.head(j) == h {
						return b.flatOverlap(h, i)
					}
				}
			} else {
				seen |= sg
			}
		}
	} else {
		root := &ptNode{}
		for i := n - 1; i >= 0; i-- {
			if msg := b.validatePath(acts[i].path); msg != "" {
				return msg
			}
			if msg := root.insert(b.resolvePath(acts[i].path)); msg != "" {
				return msg
			}
		}
	}
	// The values, last action first (ExpressionValidator.attachUpdateExpression).
	counter := 0
	for i := n - 1; i >= 0; i-- {
		a := acts[i]
		switch a.kind {
		case aSet:
			v := a.val
			if msg := b.validateOperand(v.l, &counter); msg != "" {
				return msg
			}
			if v.arith {
				if msg := b.validateOperand(v.r, &counter); msg != "" {
					return msg
				}
				if msg := b.validateOp(v.spec, v.kids, &counter); msg != "" {
					return msg
				}
			}
		case aAdd, aDelete:
			v := b.values[a.ph]
			if !v.IsValid() {
				return "An expression attribute value used in expression is not defined; attribute value: " + b.p.values[a.ph]
			}
			if a.kind == aDelete {
				return "Incorrect operand type for operator or function; operator: DELETE, operand type: " + typeWord(v) + addTypeSet
			}
			if v.Kind() != "N" {
				return "Incorrect operand type for operator or function; operator: ADD, operand type: " + typeWord(v) + addTypeSet
			}
		}
	}
	return ""
}

// flatOverlap formats the overlap of action i's top-level path with a later
// action's: "path two" is the first key, in Java HashMap order, of the tree
// built so far from actions i+1.. (inserted last first).
func (b *Bound) flatOverlap(h string, i int) string {
	n := len(b.p.actions)
	inserted := make([]int32, 0, n-i-1)
	for j := n - 1; j > i; j-- {
		inserted = append(inserted, elHash(resolvedEl{name: b.head(j)}))
	}
	first := n - 1 - javaOrder(inserted)[0]
	return "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [" +
		h + "], path two: [" + b.head(first) + "]"
}

// bindMemo is a resolution that passed the expression checks.
type bindMemo struct {
	names     []string
	kinds     []string
	sensitive []store.Value // by Parsed.sensitive
	touched   []string      // sorted distinct heads
}

// matches reports whether b's values have the memo's kinds and sensitive
// contents (the caller compares the names).
func (m *bindMemo) matches(b *Bound) bool {
	if len(m.kinds) != len(b.values) {
		return false
	}
	for i, v := range b.values {
		if m.kinds[i] != v.Kind() {
			return false
		}
	}
	for i, ph := range b.p.sensitive {
		if m.sensitive[i] != b.values[ph] {
			return false
		}
	}
	return true
}

func newMemo(b *Bound) *bindMemo {
	m := &bindMemo{
		names:     append([]string(nil), b.names...),
		kinds:     make([]string, len(b.values)),
		sensitive: make([]store.Value, len(b.p.sensitive)),
	}
	for i, v := range b.values {
		m.kinds[i] = v.Kind()
	}
	for i, ph := range b.p.sensitive {
		m.sensitive[i] = b.values[ph]
	}
	if b.p.hasUpdate {
		hs := make([]string, len(b.p.actions))
		for i := range hs {
			hs[i] = b.head(i)
		}
		sort.Strings(hs)
		t := hs[:0]
		for i, h := range hs {
			if i == 0 || h != hs[i-1] { // nested paths share their head
				t = append(t, h)
			}
		}
		m.touched = t
	}
	return m
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---- operands and operators ----

// Type sets of DynamoDB's operators, over DynamoDB's types.
type typeSet uint16

const (
	tsS typeSet = 1 << iota
	tsN
	tsB
	tsBOOL
	tsNULL
	tsL
	tsM
	tsSS
	tsNS
	tsBS
	tsAll      = tsS | tsN | tsB | tsBOOL | tsNULL | tsL | tsM | tsSS | tsNS | tsBS
	tsOrdered  = tsS | tsN | tsB
	tsIterable = tsS | tsB | tsL | tsM | tsSS | tsNS | tsBS
)

func (t typeSet) symbols() string {
	switch t {
	case tsN:
		return "N"
	case tsL:
		return "L"
	case tsBOOL:
		return "BOOL"
	}
	return typeNamesAll
}

type opSpec struct {
	code      uint8 // opOther, or the operator's own checks
	name      string
	min, max  int // max < 0: no limit
	operands  typeSet
	allowNull bool // also: the first operand must differ from the others
	ret       typeSet
}

// Operators with checks of their own.
const (
	opOther uint8 = iota
	opNeedsPath
	opAttributeType
	opBetween
	opIn
)

var opSpecs = map[string]*opSpec{}

func init() {
	for _, o := range []opSpec{
		{0, "+", 2, 2, tsN, false, tsN},
		{0, "-", 2, 2, tsN, false, tsN},
		{0, "if_not_exists", 2, 2, tsAll, true, tsAll},
		{0, "list_append", 2, 2, tsL, false, tsL},
		{0, "=", 2, 2, tsAll, true, tsBOOL},
		{0, "<>", 2, 2, tsAll, true, tsBOOL},
		{0, "<", 2, 2, tsOrdered, true, tsBOOL},
		{0, "<=", 2, 2, tsOrdered, true, tsBOOL},
		{0, ">", 2, 2, tsOrdered, true, tsBOOL},
		{0, ">=", 2, 2, tsOrdered, true, tsBOOL},
		{0, "BETWEEN", 3, 3, tsOrdered, true, tsBOOL},
		{0, "IN", 1, -1, tsAll, true, tsBOOL},
		{0, "attribute_exists", 1, 1, tsAll, true, tsBOOL},
		{0, "attribute_not_exists", 1, 1, tsAll, true, tsBOOL},
		{0, "attribute_type", 2, 2, tsAll, true, tsBOOL},
		{0, "contains", 2, 2, tsAll, true, tsBOOL},
		{0, "begins_with", 2, 2, tsS | tsB, true, tsBOOL},
		{0, "size", 1, 1, tsIterable, true, tsN},
	} {
		switch o.name {
		case "attribute_exists", "attribute_not_exists", "if_not_exists":
			o.code = opNeedsPath
		case "attribute_type":
			o.code = opAttributeType
		case "BETWEEN":
			o.code = opBetween
		case "IN":
			o.code = opIn
		}
		opSpecs[o.name] = &o
	}
}

func valueType(v store.Value) typeSet {
	if v.Kind() == "N" {
		return tsN
	}
	return tsS
}

func (b *Bound) validateOperand(o *operandNode, counter *int) string {
	switch o.kind {
	case oPath:
		return b.validatePath(o.path)
	case oValue:
		if !b.values[o.ph].IsValid() {
			return "An expression attribute value used in expression is not defined; attribute value: " + b.p.values[o.ph]
		}
	case oFunc:
		for _, a := range o.fn.args {
			if msg := b.validateOperand(a, counter); msg != "" {
				return msg
			}
		}
		return b.validateOp(o.fn.spec, o.fn.args, counter)
	}
	return ""
}

// validateOp is OperatorValidator.validateOperator followed by the
// operator's own checks, then the operator count.
func (b *Bound) validateOp(spec *opSpec, kids []*operandNode, counter *int) string {
	name := spec.name
	n := len(kids)
	if n < spec.min || spec.max >= 0 && n > spec.max {
		return "Incorrect number of operands for operator or function; operator or function: " + name +
			", number of operands: " + strconv.Itoa(n)
	}
	for _, k := range kids {
		switch k.kind {
		case oValue:
			if v := b.values[k.ph]; spec.operands&valueType(v) == 0 {
				return "Incorrect operand type for operator or function; operator or function: " + name +
					", operand type: " + typeAbbr(v)
			}
		case oFunc:
			if ret := k.fn.spec.ret; spec.operands&ret == 0 {
				return "Incorrect operand type for operator or function; operator or function: " + name +
					", operand type: " + ret.symbols()
			}
		}
	}
	if spec.allowNull && n > 1 && kids[0].kind == oPath {
		for _, k := range kids[1:] {
			if k.kind == oPath && b.samePath(kids[0].path, k.path) {
				return "The first operand must be distinct from the remaining operands for this operator or function; operator: " +
					name + ", first operand: " + pathString(b.resolvePath(kids[0].path))
			}
		}
	}
	switch spec.code {
	case opNeedsPath:
		if kids[0].kind != oPath {
			return "Operator or function requires a document path; operator or function: " + name
		}
	case opAttributeType:
		k := kids[1]
		switch k.kind {
		case oPath:
			return "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: " + typeNamesAll
		case oFunc:
			return "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: " +
				k.fn.spec.ret.symbols()
		}
		v := b.values[k.ph]
		s, ok := v.AsString()
		if !ok {
			return "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: " + typeAbbr(v)
		}
		if !validTypeName(s) {
			return "Invalid attribute type name found; type: " + cleanUTF8(s) + ", valid types: " + typeNamesValid
		}
	case opBetween:
		if kids[1].kind == oValue && kids[2].kind == oValue {
			lo, hi := b.values[kids[1].ph], b.values[kids[2].ph]
			if lo.Kind() != hi.Kind() {
				return "The BETWEEN operator requires same data type for lower and upper bounds; lower bound operand: " +
					attrValueString(lo) + ", upper bound operand: " + attrValueString(hi)
			}
			if compareValues(lo, hi) > 0 {
				return "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: " +
					attrValueString(lo) + ", upper bound operand: " + attrValueString(hi)
			}
		}
	case opIn:
		if n > maxInOperands+1 {
			return "The IN operator is provided with too many operands; number of operands: " + strconv.Itoa(n-1)
		}
	}
	return countOp(counter)
}

func countOp(counter *int) string {
	*counter++
	if *counter > maxOperators {
		return "The expression contains too many operators; operator count: " + strconv.Itoa(*counter)
	}
	return ""
}

func validTypeName(s string) bool {
	switch s {
	case "N", "BS", "L", "B", "NULL", "M", "S", "SS", "NS", "BOOL":
		return true
	}
	return false
}

// ---- the condition ----

func (b *Bound) validateCond(c *condNode, counter *int) string {
	switch c.kind {
	case cCmp, cIn, cBetween:
		for _, o := range c.ops {
			if msg := b.validateOperand(o, counter); msg != "" {
				return msg
			}
		}
		return b.validateOp(c.spec, c.ops, counter)
	case cFunc:
		for _, a := range c.fn.args {
			if msg := b.validateOperand(a, counter); msg != "" {
				return msg
			}
		}
		return b.validateOp(c.fn.spec, c.fn.args, counter)
	case cAnd, cOr:
		if msg := b.validateCond(c.l, counter); msg != "" {
			return msg
		}
		if msg := b.validateCond(c.r, counter); msg != "" {
			return msg
		}
	case cNot:
		if msg := b.validateCond(c.l, counter); msg != "" {
			return msg
		}
	}
	return countOp(counter)
}

// ---- key attributes ----

const msgNestedKey = "Key attributes must be scalars; list random access '[]' and map lookup '.' are not allowed: Key: "

func (b *Bound) nestedKeyInPath(pn *pathNode, isKey func(string) bool) string {
	if len(pn.els) > 1 {
		if h := b.elName(pn.els[0]); isKey(h) {
			return msgNestedKey + cleanUTF8(h)
		}
	}
	return ""
}

func (b *Bound) nestedKeyInOperand(o *operandNode, isKey func(string) bool) string {
	switch o.kind {
	case oPath:
		return b.nestedKeyInPath(o.path, isKey)
	case oFunc:
		for _, a := range o.fn.args {
			if msg := b.nestedKeyInOperand(a, isKey); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func (b *Bound) nestedKeyInCond(c *condNode, isKey func(string) bool) string {
	switch c.kind {
	case cCmp, cIn, cBetween:
		for _, o := range c.ops {
			if msg := b.nestedKeyInOperand(o, isKey); msg != "" {
				return msg
			}
		}
	case cFunc:
		for _, a := range c.fn.args {
			if msg := b.nestedKeyInOperand(a, isKey); msg != "" {
				return msg
			}
		}
	case cAnd, cOr:
		if msg := b.nestedKeyInCond(c.l, isKey); msg != "" {
			return msg
		}
		return b.nestedKeyInCond(c.r, isKey)
	case cNot:
		return b.nestedKeyInCond(c.l, isKey)
	}
	return ""
}

func (b *Bound) nestedKeyInUpdate(isKey func(string) bool) string {
	for _, a := range b.p.actions {
		if msg := b.nestedKeyInPath(a.path, isKey); msg != "" {
			return msg
		}
		if a.kind == aSet {
			if msg := b.nestedKeyInOperand(a.val.l, isKey); msg != "" {
				return msg
			}
			if a.val.arith {
				if msg := b.nestedKeyInOperand(a.val.r, isKey); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}
