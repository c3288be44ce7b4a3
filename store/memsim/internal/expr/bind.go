package expr

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Bind resolves placeholders and makes DynamoDB's checks that depend on
// them, before any item is looked at, in DynamoDB's order (DynamoDB
// Local's InputConverter.externalToInternalUpdateAndConditionExpressions
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
//     attribute, nested access to a key attribute in the update (isKey
//     reports the table's key attribute names; nil skips these checks).
func (p *Parsed) Bind(names map[string]string, values map[string]store.Value, isKey func(string) bool) (*Bound, error) {
	b := &Bound{p: p, names: make([]string, len(p.names)), values: make([]store.Value, len(p.values))}
	if msg := b.bind(names, values, isKey); msg != "" {
		return nil, validationf("%s", msg)
	}
	return b, nil
}

func (b *Bound) bind(names map[string]string, values map[string]store.Value, isKey func(string) bool) string {
	p := b.p
	if !p.hasUpdate && p.cond == nil {
		// LocalDBValidatorUtils.validateExpressions(UpdateItemRequest).
		switch {
		case names != nil:
			return "ExpressionAttributeNames can only be specified when using expressions"
		case values != nil:
			return "ExpressionAttributeValues can only be specified when using expressions: UpdateExpression and ConditionExpression are null"
		}
		return ""
	}
	// A map holding exactly the used placeholders, all valid, needs no
	// check of its keys (the lexer has made them but for their length) nor
	// of its entries.
	exactNames, exactValues := len(names) == len(p.names), len(values) == len(p.values)
	for i, ph := range p.names {
		v, ok := names[ph]
		exactNames = exactNames && ok && len(ph) <= maxPlaceholderKey && v != "" && len(v) <= maxAttrNameBytes
		b.names[i] = v
	}
	for i, ph := range p.values {
		v, ok := values[ph]
		exactValues = exactValues && ok && len(ph) <= maxPlaceholderKey && v.IsValid()
		b.values[i] = v
	}
	// 1, 2: the maps and their keys.
	if msg := mapFault("Names", names, exactNames, tNAME); msg != "" {
		return msg
	}
	if msg := mapFault("Values", values, exactValues, tVALUE); msg != "" {
		return msg
	}
	// 3, 4: every value, every name, used or not.
	for _, k := range sortedKeys(values, exactValues) {
		if !values[k].IsValid() {
			return "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, " +
				"must contain exactly one of the supported datatypes for key " + cleanUTF8(k)
		}
	}
	for _, k := range sortedKeys(names, exactNames) {
		switch n := names[k]; {
		case n == "":
			return "ExpressionAttributeNames contains invalid value: Empty attribute name for key " + cleanUTF8(k)
		case len(n) > maxAttrNameBytes:
			return "ExpressionAttributeNames contains invalid value: Attribute name is too large, " +
				"must be less than 65536 bytes for key " + cleanUTF8(k)
		}
	}
	// From here every used placeholder that is defined resolves to a valid
	// name or value, so "" and the zero Value mark undefined ones.

	// 5, 6.
	if p.hasUpdate {
		b.touched = make([]string, len(p.actions))
		for i := range p.actions {
			b.touched[i] = b.head(i)
		}
		slices.Sort(b.touched)
		b.touched = slices.Compact(b.touched) // nested paths share their head
		if msg := b.validateUpdate(); msg != "" {
			return prefixUpdate + msg
		}
	}
	if counter := 0; p.cond != nil {
		if msg := b.validate(p.cond, &counter); msg != "" {
			return prefixCondition + msg
		}
	}
	// 7. Every used placeholder is now known to be defined.
	if msg := unused("Names", sortedKeys(names, len(names) <= len(p.names)), p.names); msg != "" {
		return msg
	}
	if msg := unused("Values", sortedKeys(values, len(values) <= len(p.values)), p.values); msg != "" {
		return msg
	}
	// 8.
	if isKey == nil {
		return ""
	}
	if msg := b.nestedKey(p.cond, isKey); msg != "" {
		return msg
	}
	for i := range p.actions {
		if h := b.head(i); isKey(h) {
			return "One or more parameter values were invalid: Cannot update attribute " + cleanUTF8(h) + ". This attribute is part of the key"
		}
	}
	for _, a := range p.actions {
		if msg := b.nestedKeyPath(a.path, isKey); msg != "" {
			return msg
		}
		if msg := b.nestedKey(a.val, isKey); msg != "" {
			return msg
		}
	}
	return ""
}

// nestedKey reports the first nested path under n whose top-level
// attribute is a key attribute.
func (b *Bound) nestedKey(n *node, isKey func(string) bool) string {
	if n == nil {
		return ""
	}
	if n.kind == nPath {
		return b.nestedKeyPath(n.path, isKey)
	}
	for _, k := range n.kids {
		if msg := b.nestedKey(k, isKey); msg != "" {
			return msg
		}
	}
	return ""
}

func (b *Bound) nestedKeyPath(els []pathEl, isKey func(string) bool) string {
	if len(els) > 1 && isKey(b.elName(els[0])) {
		return "Key attributes must be scalars; list random access '[]' and map lookup '.' are not allowed: Key: " + cleanUTF8(b.elName(els[0]))
	}
	return ""
}

// head is the top-level attribute name that update action i writes.
func (b *Bound) head(i int) string { return b.elName(b.p.actions[i].path[0]) }

// sortedKeys returns the keys of m in order; none when skip is set.
func sortedKeys[V any](m map[string]V, skip bool) []string {
	if skip {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// mapFault is DynamoDB's complaint about an empty Names or Values map
// (what), or one of its keys.
func mapFault[V any](what string, m map[string]V, exact bool, want tokKind) string {
	if m != nil && len(m) == 0 {
		return "ExpressionAttribute" + what + " must not be empty"
	}
	if msg := checkKeys(sortedKeys(m, exact), want); msg != "" {
		return "ExpressionAttribute" + what + " contains invalid key: " + msg
	}
	return ""
}

// unused is DynamoDB's complaint about the keys of a Names or Values map
// (what) not among used; "" when all are.
func unused(what string, keys, used []string) string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(used, k) {
			out = append(out, cleanUTF8(k))
		}
	}
	if out == nil {
		return ""
	}
	return "Value provided in ExpressionAttribute" + what + " unused in expressions: keys: {" + strings.Join(out, ", ") + "}"
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
		if toks := lex(k); len(toks) != 2 || toks[0].kind != want {
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

// sameEl reports whether two path elements are the same once resolved.
func (b *Bound) sameEl(x, y pathEl) bool {
	if x.kind == peIndex || y.kind == peIndex {
		return x.kind == y.kind && x.index == y.index
	}
	return b.elName(x) == b.elName(y)
}

func (b *Bound) samePath(x, y []pathEl) bool {
	return len(x) == len(y) && (len(x) == 0 || b.sameEl(x[0], y[0]) && b.samePath(x[1:], y[1:]))
}

// collide reports whether two update paths overlap (one is a prefix of the
// other) or conflict (one has a list index where the other has a name).
func (b *Bound) collide(x, y []pathEl) bool {
	for d := 0; d < len(x) && d < len(y); d++ {
		if (x[d].kind == peIndex) != (y[d].kind == peIndex) {
			return true
		}
		if !b.sameEl(x[d], y[d]) {
			return false
		}
	}
	return true
}

func (b *Bound) resolve(els []pathEl) []resolvedEl {
	out := make([]resolvedEl, len(els))
	for i, e := range els {
		out[i] = resolvedEl{list: e.kind == peIndex, index: e.index}
		if e.kind != peIndex {
			out[i].name = b.elName(e)
		}
	}
	return out
}

// validatePath is ExpressionValidator.validateDocPath.
func (b *Bound) validatePath(els []pathEl) string {
	if len(els) > maxPathDepth {
		return "The document path has too many nesting levels; nesting levels: " + strconv.Itoa(len(els))
	}
	for _, e := range els {
		switch {
		case e.kind == peName && b.names[e.ph] == "":
			return "An expression attribute name used in the document path is not defined; attribute name: " + e.text
		case e.kind == peValue:
			return "The document path cannot contain attribute value parameters; attribute value: " + e.text
		}
	}
	return ""
}

// ---- the update ----

func (b *Bound) validateUpdate() string {
	acts := b.p.actions
	// Paths of one element each, with distinct names, cannot collide.
	mayCollide := len(b.touched) < len(acts)
	for _, a := range acts {
		mayCollide = mayCollide || len(a.path) > 1
	}
	// The paths, last action first (ExpressionValidator.buildProjectionTree).
	for i := len(acts) - 1; i >= 0; i-- {
		if msg := b.validatePath(acts[i].path); msg != "" {
			return msg
		}
		for j := i + 1; j < len(acts) && mayCollide; j++ {
			if b.collide(acts[i].path, acts[j].path) {
				// DynamoDB's message names a path off its tree of the paths.
				root := &ptNode{}
				for k := len(acts) - 1; k > i; k-- {
					root.insert(b.resolve(acts[k].path))
				}
				return root.insert(b.resolve(acts[i].path))
			}
		}
	}
	// The values, last action first (ExpressionValidator.attachUpdateExpression).
	counter := 0
	for i := len(acts) - 1; i >= 0; i-- {
		a := acts[i]
		switch a.kind {
		case aSet:
			if msg := b.validate(a.val, &counter); msg != "" {
				return msg
			}
		case aAdd, aDelete:
			v := b.values[a.ph]
			switch {
			case !v.IsValid():
				return "An expression attribute value used in expression is not defined; attribute value: " + b.p.values[a.ph]
			case a.kind == aDelete || v.Kind() != store.KindNumber:
				return "Incorrect operand type for operator or function; operator: " + sectionNames[a.kind] +
					", operand type: " + typeWord(v) + addTypeSet
			}
		}
	}
	return ""
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

// Where a function may be used.
const (
	useNone   uint8 = 0
	useCond   uint8 = 1 << iota // in a condition expression
	useUpdate                   // in an update expression
	useBool                     // returns a boolean: may stand alone as a condition
)

// opSpec is an operator or function: its operand count (max < 0: no
// limit) and types, whether the first operand must differ from the others
// (distinct), its result type and where a function may be used.
type opSpec struct {
	name     string
	min, max int
	operands typeSet
	distinct bool
	ret      typeSet
	use      uint8
}

// opSpecs lists DynamoDB's operators and documented functions. DynamoDB
// Local also knows convert, contains_key, contains_value and list_delete,
// which the service does not document; they are unknown here.
var opSpecs = map[string]*opSpec{}

func init() {
	for _, o := range []opSpec{
		{"+", 2, 2, tsN, false, tsN, 0},
		{"-", 2, 2, tsN, false, tsN, 0},
		{"if_not_exists", 2, 2, tsAll, true, tsAll, useUpdate},
		{"list_append", 2, 2, tsL, false, tsL, useUpdate},
		{"=", 2, 2, tsAll, true, tsBOOL, 0},
		{"<>", 2, 2, tsAll, true, tsBOOL, 0},
		{"<", 2, 2, tsOrdered, true, tsBOOL, 0},
		{"<=", 2, 2, tsOrdered, true, tsBOOL, 0},
		{">", 2, 2, tsOrdered, true, tsBOOL, 0},
		{">=", 2, 2, tsOrdered, true, tsBOOL, 0},
		{"BETWEEN", 3, 3, tsOrdered, true, tsBOOL, 0},
		{"IN", 1, -1, tsAll, true, tsBOOL, 0},
		{"attribute_exists", 1, 1, tsAll, true, tsBOOL, useCond | useBool},
		{"attribute_not_exists", 1, 1, tsAll, true, tsBOOL, useCond | useBool},
		{"attribute_type", 2, 2, tsAll, true, tsBOOL, useCond | useBool},
		{"contains", 2, 2, tsAll, true, tsBOOL, useCond | useBool},
		{"begins_with", 2, 2, tsS | tsB, true, tsBOOL, useCond | useBool},
		{"size", 1, 1, tsIterable, true, tsN, useCond},
	} {
		opSpecs[o.name] = &o
	}
}

func valueType(v store.Value) typeSet {
	if v.Kind() == store.KindNumber {
		return tsN
	}
	return tsS
}

// validate checks an operand, a SET value or a condition depth first, and
// counts its operators.
func (b *Bound) validate(n *node, counter *int) string {
	switch n.kind {
	case nPath:
		return b.validatePath(n.path)
	case nValue:
		if !b.values[n.ph].IsValid() {
			return "An expression attribute value used in expression is not defined; attribute value: " + b.p.values[n.ph]
		}
		return ""
	}
	for _, k := range n.kids {
		if msg := b.validate(k, counter); msg != "" {
			return msg
		}
	}
	if n.spec != nil {
		if msg := b.validateOp(n.spec, n.kids); msg != "" {
			return msg
		}
	}
	*counter++
	if *counter > maxOperators {
		return "The expression contains too many operators; operator count: " + strconv.Itoa(*counter)
	}
	return ""
}

// validateOp is OperatorValidator.validateOperator followed by the
// operator's own checks.
func (b *Bound) validateOp(spec *opSpec, kids []*node) string {
	name, n := spec.name, len(kids)
	if n < spec.min || spec.max >= 0 && n > spec.max {
		return "Incorrect number of operands for operator or function; operator or function: " + name +
			", number of operands: " + strconv.Itoa(n)
	}
	const badType = "Incorrect operand type for operator or function; operator or function: "
	for _, k := range kids {
		switch {
		case k.kind == nValue && spec.operands&valueType(b.values[k.ph]) == 0:
			return badType + name + ", operand type: " + b.values[k.ph].Kind().String()
		case k.kind == nFunc && spec.operands&k.spec.ret == 0:
			return badType + name + ", operand type: " + k.spec.ret.symbols()
		}
	}
	if spec.distinct && kids[0].kind == nPath {
		for _, k := range kids[1:] {
			if k.kind == nPath && b.samePath(kids[0].path, k.path) {
				return "The first operand must be distinct from the remaining operands for this operator or function; operator: " +
					name + ", first operand: " + pathString(b.resolve(kids[0].path))
			}
		}
	}
	switch name {
	case "attribute_exists", "attribute_not_exists", "if_not_exists":
		if kids[0].kind != nPath {
			return "Operator or function requires a document path; operator or function: " + name
		}
	case "attribute_type":
		switch k := kids[1]; k.kind {
		case nPath:
			return badType + "attribute_type, operand type: " + typeNamesAll
		case nFunc:
			return badType + "attribute_type, operand type: " + k.spec.ret.symbols()
		}
		v := b.values[kids[1].ph]
		s, ok := v.AsString()
		switch {
		case !ok:
			return badType + "attribute_type, operand type: " + v.Kind().String()
		case !slices.Contains(strings.Split(typeNamesValid[1:len(typeNamesValid)-1], ","), s):
			return "Invalid attribute type name found; type: " + cleanUTF8(s) + ", valid types: " + typeNamesValid
		}
	case "BETWEEN":
		if kids[1].kind == nValue && kids[2].kind == nValue {
			lo, hi := b.values[kids[1].ph], b.values[kids[2].ph]
			bounds := "; lower bound operand: " + attrValueString(lo) + ", upper bound operand: " + attrValueString(hi)
			if lo.Kind() != hi.Kind() {
				return "The BETWEEN operator requires same data type for lower and upper bounds" + bounds
			}
			if compareValues(lo, hi) > 0 {
				return "The BETWEEN operator requires upper bound to be greater than or equal to lower bound" + bounds
			}
		}
	case "IN":
		if n > maxInOperands+1 {
			return "The IN operator is provided with too many operands; number of operands: " + strconv.Itoa(n-1)
		}
	}
	return ""
}
