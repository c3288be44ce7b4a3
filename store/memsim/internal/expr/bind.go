package expr

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Bind resolves placeholders and makes DynamoDB's checks that depend on
// them, before any item is looked at, in DynamoDB's order (DynamoDB Local's
// InputConverter and ExpressionValidator): the Names and Values maps, the
// update's paths and values (last action first), the condition, unused
// entries, then access to the key attributes (isKey reports the table's
// key attribute names; nil skips these checks).
func (p *Parsed) Bind(names map[string]string, values map[string]store.Value, isKey func(string) bool) (*Bound, error) {
	b := &Bound{p: p, names: make([]string, len(p.names)), values: make([]store.Value, len(p.values))}
	if msg := b.bind(names, values, isKey); msg != "" {
		return nil, validationf("%s", msg)
	}
	return b, nil
}

func (b *Bound) bind(names map[string]string, values map[string]store.Value, isKey func(string) bool) string {
	p := b.p
	if len(p.actions) == 0 && p.cond == nil {
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
	b.touched = make([]string, len(p.actions))
	for i := range p.actions {
		b.touched[i] = b.head(i)
	}
	slices.Sort(b.touched)
	b.touched = slices.Compact(b.touched) // nested paths share their head
	// The first fault in DynamoDB's order. Once the entries of the maps are
	// known to be valid, "" and the zero Value mark undefined placeholders.
	counter := 0
	return cmp.Or(
		mapFault("Names", names, exactNames, tNAME),
		mapFault("Values", values, exactValues, tVALUE),
		badEntry(values, exactValues, func(v store.Value) string {
			if v.IsValid() {
				return ""
			}
			return "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, " +
				"must contain exactly one of the supported datatypes for key "
		}),
		badEntry(names, exactNames, func(n string) string {
			switch {
			case n == "":
				return "ExpressionAttributeNames contains invalid value: Empty attribute name for key "
			case len(n) > maxAttrNameBytes:
				return "ExpressionAttributeNames contains invalid value: Attribute name is too large, must be less than 65536 bytes for key "
			}
			return ""
		}),
		prefixed(prefixUpdate, b.validateUpdate()),
		prefixed(prefixCondition, b.validate(p.cond, &counter)),
		unused("Names", sortedKeys(names, len(names) <= len(p.names)), p.names),
		unused("Values", sortedKeys(values, len(values) <= len(p.values)), p.values),
		b.keyChecks(isKey),
	)
}

// badEntry returns the complaint fault makes about the first entry of m, in
// key order, followed by its key; none when exact.
func badEntry[V any](m map[string]V, exact bool, fault func(V) string) string {
	for _, k := range sortedKeys(m, exact) {
		if msg := fault(m[k]); msg != "" {
			return msg + cleanUTF8(k)
		}
	}
	return ""
}

func prefixed(prefix, msg string) string {
	if msg == "" {
		return ""
	}
	return prefix + msg
}

// keyChecks finds nested access to a key attribute in the condition, an
// update of a key attribute, nested access to a key attribute in the
// update.
func (b *Bound) keyChecks(isKey func(string) bool) string {
	if isKey == nil {
		return ""
	}
	if msg := b.nestedKey(b.p.cond, isKey); msg != "" {
		return msg
	}
	for i := range b.p.actions {
		if h := b.head(i); isKey(h) {
			return "One or more parameter values were invalid: Cannot update attribute " + cleanUTF8(h) + ". This attribute is part of the key"
		}
	}
	for _, a := range b.p.actions {
		if msg := cmp.Or(b.nestedKey(&node{kind: nPath, path: a.path}, isKey), b.nestedKey(a.val, isKey)); msg != "" {
			return msg
		}
	}
	return ""
}

// nestedKey reports the first nested path under n whose top-level
// attribute is a key attribute.
func (b *Bound) nestedKey(n *node, isKey func(string) bool) string {
	switch {
	case n == nil:
		return ""
	case n.kind == nPath && len(n.path) > 1 && isKey(b.elName(n.path[0])):
		return "Key attributes must be scalars; list random access '[]' and map lookup '.' are not allowed: Key: " + cleanUTF8(b.elName(n.path[0]))
	}
	for _, k := range n.kids {
		if msg := b.nestedKey(k, isKey); msg != "" {
			return msg
		}
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

func (b *Bound) elName(e pathEl) string {
	if e.kind == tNAME {
		return b.names[e.ph]
	}
	return e.text
}

// sameEl reports whether two path elements are the same once resolved.
func (b *Bound) sameEl(x, y pathEl) bool {
	return (x.kind == tINDEX) == (y.kind == tINDEX) && b.elName(x) == b.elName(y) // an index's text is its decimal digits
}

// resolve returns els with the name placeholders replaced by their names.
func (b *Bound) resolve(els []pathEl) []pathEl {
	out := make([]pathEl, len(els))
	for i, e := range els {
		out[i] = pathEl{kind: tID, text: b.elName(e)}
		if e.kind == tINDEX {
			out[i] = pathEl{kind: tINDEX, text: e.text, index: e.index}
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
		case e.kind == tNAME && b.names[e.ph] == "":
			return "An expression attribute name used in the document path is not defined; attribute name: " + e.text
		case e.kind == tVALUE:
			return "The document path cannot contain attribute value parameters; attribute value: " + e.text
		}
	}
	return ""
}

func (b *Bound) validateUpdate() string {
	acts := b.p.actions
	// Paths of one element each, with distinct names, cannot collide.
	mayCollide := len(b.touched) < len(acts) || slices.ContainsFunc(acts, func(a *action) bool { return len(a.path) > 1 })
	// The paths, last action first, into DynamoDB's tree of the paths
	// (ExpressionValidator.buildProjectionTree).
	root := &ptNode{}
	for i := len(acts) - 1; i >= 0; i-- {
		if msg := b.validatePath(acts[i].path); msg != "" {
			return msg
		}
		if !mayCollide {
			continue
		}
		if msg := root.insert(b.resolve(acts[i].path)); msg != "" {
			return msg
		}
	}
	// The values, last action first (ExpressionValidator.attachUpdateExpression).
	counter := 0
	for i := len(acts) - 1; i >= 0; i-- {
		a := acts[i]
		switch a.kind {
		case tSET:
			if msg := b.validate(a.val, &counter); msg != "" {
				return msg
			}
		case tADD, tDELETE:
			v := b.values[a.ph]
			switch {
			case !v.IsValid():
				return "An expression attribute value used in expression is not defined; attribute value: " + b.p.values[a.ph]
			case a.kind == tDELETE || v.Kind() != "N":
				return "Incorrect operand type for operator or function; operator: " + sectionNames[a.kind-tSET] + ", operand type: " +
					map[string]string{"N": "NUMBER", "S": "STRING"}[v.Kind()] + ", typeSet: ALLOWED_FOR_ADD_OPERAND"
			}
		}
	}
	return ""
}

// accepts reports whether an operand of DynamoDB type t ("" for any type)
// is in set, a list of type names between spaces (" N L "; "" for all).
func accepts(set, t string) bool {
	return set == "" || t == "" || strings.Contains(set, " "+t+" ")
}

// typeNames is a result type as DynamoDB prints it: one name, or all.
func typeNames(t string) string {
	if t == "" {
		return typeNamesAll
	}
	return t
}

// Where a function may be used.
const (
	useCond   uint8 = 1 << iota // in a condition expression
	useUpdate                   // in an update expression
	useBool                     // returns a boolean: may stand alone as a condition
)

// opSpec is an operator or function: its operand count (max < 0: no limit)
// and types, whether the first operand must differ from the others, its
// result type ("" for any) and where a function may be used.
type opSpec struct {
	name     string
	min, max int
	operands string
	distinct bool
	ret      string
	use      uint8
}

// opSpecs lists DynamoDB's operators and documented functions. DynamoDB
// Local also knows convert, contains_key, contains_value and list_delete,
// which the service does not document; they are unknown here.
var opSpecs = map[string]*opSpec{}

func init() {
	for _, o := range []opSpec{
		{"+", 2, 2, " N ", false, "N", 0},
		{"-", 2, 2, " N ", false, "N", 0},
		{"if_not_exists", 2, 2, "", true, "", useUpdate},
		{"list_append", 2, 2, " L ", false, "L", useUpdate},
		{"=", 2, 2, "", true, "BOOL", 0},
		{"<>", 2, 2, "", true, "BOOL", 0},
		{"<", 2, 2, " S N B ", true, "BOOL", 0},
		{"<=", 2, 2, " S N B ", true, "BOOL", 0},
		{">", 2, 2, " S N B ", true, "BOOL", 0},
		{">=", 2, 2, " S N B ", true, "BOOL", 0},
		{"BETWEEN", 3, 3, " S N B ", true, "BOOL", 0},
		{"IN", 1, -1, "", true, "BOOL", 0},
		{"attribute_exists", 1, 1, "", true, "BOOL", useCond | useBool},
		{"attribute_not_exists", 1, 1, "", true, "BOOL", useCond | useBool},
		{"attribute_type", 2, 2, "", true, "BOOL", useCond | useBool},
		{"contains", 2, 2, "", true, "BOOL", useCond | useBool},
		{"begins_with", 2, 2, " S B ", true, "BOOL", useCond | useBool},
		{"size", 1, 1, " S B L M SS NS BS ", true, "N", useCond},
	} {
		opSpecs[o.name] = &o
	}
}

// validate checks an operand, a SET value or a condition depth first, and
// counts its operators.
func (b *Bound) validate(n *node, counter *int) string {
	switch {
	case n == nil:
		return ""
	case n.kind == nPath:
		return b.validatePath(n.path)
	case n.kind == nValue && !b.values[n.ph].IsValid():
		return "An expression attribute value used in expression is not defined; attribute value: " + b.p.values[n.ph]
	case n.kind == nValue:
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
		case k.kind == nValue && !accepts(spec.operands, b.values[k.ph].Kind()):
			return badType + name + ", operand type: " + b.values[k.ph].Kind()
		case k.kind == nFunc && !accepts(spec.operands, k.spec.ret):
			return badType + name + ", operand type: " + typeNames(k.spec.ret)
		}
	}
	if spec.distinct && kids[0].kind == nPath {
		for _, k := range kids[1:] {
			if k.kind == nPath && slices.EqualFunc(kids[0].path, k.path, b.sameEl) {
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
			return badType + "attribute_type, operand type: " + typeNames(k.spec.ret)
		}
		v := b.values[kids[1].ph]
		s, ok := v.AsString()
		switch {
		case !ok:
			return badType + "attribute_type, operand type: " + v.Kind()
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
			if r, _ := ordered(lo, hi); r > 0 {
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
