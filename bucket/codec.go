package bucket

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Attribute names. A bucket item stores, for each limit, the six attributes
// b_{limit}_{field} with field one of the Field constants, and one shared
// AttrRefill. All values are int64 numbers.
const (
	// AttrRefill is the name of the item's shared refill timestamp rf, in
	// Unix milliseconds: the stored Tokens of every limit exclude the refill
	// since rf.
	AttrRefill = "rf"

	FieldTokens        = "tk" // State.Tokens
	FieldCapacity      = "cp" // Limit.Capacity
	FieldBurst         = "bx" // Limit.Burst
	FieldRefillAmount  = "ra" // Limit.RefillAmount
	FieldRefillPeriod  = "rp" // Limit.RefillPeriod
	FieldTotalConsumed = "tc" // State.TotalConsumed
)

const attrPrefix = "b_"

// fields lists the per-limit fields in encoding order; a field's position
// is also its bit in a decode mask.
var fields = [numFields]string{FieldTokens, FieldCapacity, FieldBurst, FieldRefillAmount, FieldRefillPeriod, FieldTotalConsumed}

const numFields = 6

// AttrName returns the attribute name b_{limit}_{field}, e.g.
// AttrName("rpm", FieldTokens) == "b_rpm_tk". It does not validate its
// arguments; limit must be non-empty for [ParseAttrName] to parse the result.
func AttrName(limit, field string) string {
	return attrPrefix + limit + "_" + field
}

// ParseAttrName splits an attribute name b_{limit}_{field} into its limit
// name and field. It parses from the right, so the limit name may itself
// contain underscores: "b_gpt_4_tk" is limit "gpt_4", field "tk". ok is false
// for any other attribute: one without the "b_" prefix, an unknown field, or
// an empty limit name ("b__tk"). The results are substrings of attr; nothing
// is allocated. Whether the limit name is acceptable beyond being non-empty
// is for the caller to decide.
func ParseAttrName(attr string) (limit, field string, ok bool) {
	limit, f := parseAttr(attr)
	if f < 0 {
		return "", "", false
	}
	return limit, attr[len(attr)-2:], true
}

// parseAttr returns the limit name and field index of a b_{limit}_{field}
// attribute name; f < 0 for any other attribute (limit is then not a name).
func parseAttr(attr string) (limit string, f int) {
	// The shortest valid name is "b_" + one byte + "_" + field.
	n := len(attr)
	if n < len(attrPrefix)+4 || attr[0] != 'b' || attr[1] != '_' || attr[n-3] != '_' {
		return "", -1
	}
	return attr[len(attrPrefix) : n-3], slices.Index(fields[:], attr[n-2:])
}

// Named is the State of one named limit in a [Composite].
type Named struct {
	// Name is the limit's name, non-empty.
	Name string
	// State is the limit and its counters.
	State
}

// A Composite is the bucket data of one item: the shared refill timestamp
// and the state of each limit.
//
// Limits is sorted by Name, with unique, non-empty names, as [Decode] and
// [Composite.Set] keep it; [Composite.Attrs] emits the limits in slice order.
type Composite struct {
	// Refill is the shared refill timestamp rf, in Unix milliseconds.
	Refill int64
	// Limits holds one entry per limit, sorted by Name.
	Limits []Named
}

// Get returns the state of the limit called name; the zero State and
// false when c has no such limit.
func (c Composite) Get(name string) (State, bool) {
	for i := range c.Limits {
		if c.Limits[i].Name == name {
			return c.Limits[i].State, true
		}
	}
	return State{}, false
}

// Set stores s as the state of the limit called name, replacing an existing
// entry or inserting one at its sorted position. The name must be non-empty:
// [Decode] ignores the attributes of an empty name. Set on a nil
// *Composite does nothing.
func (c *Composite) Set(name string, s State) {
	if c == nil {
		return
	}
	i, found := slices.BinarySearchFunc(c.Limits, name, func(n Named, name string) int {
		return strings.Compare(n.Name, name)
	})
	if found {
		c.Limits[i].State = s
		return
	}
	c.Limits = slices.Insert(c.Limits, i, Named{Name: name, State: s})
}

// Attrs returns the item attributes that store c, in a deterministic order:
// AttrRefill first, then for each limit in slice order its six attributes
// in the order tk, cp, bx, ra, rp, tc. Decode(c.Attrs()) returns c again.
func (c Composite) Attrs() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		if !yield(AttrRefill, c.Refill) {
			return
		}
		for i := range c.Limits {
			s := &c.Limits[i].State
			vals := [numFields]int64{s.Tokens, s.Capacity, s.Burst, s.RefillAmount, s.RefillPeriod, s.TotalConsumed}
			for j, f := range fields {
				if !yield(AttrName(c.Limits[i].Name, f), vals[j]) {
					return
				}
			}
		}
	}
}

// A DecodeError reports bucket data that [Decode] cannot accept: a limit
// with some but not all of its attributes, limits without the shared
// AttrRefill, or a limit field out of bounds.
type DecodeError struct {
	Limit   string // the limit concerned
	Attr    string // the full attribute name, e.g. "b_rpm_bx" or "rf"
	Missing bool   // the attribute is absent (otherwise Value is out of bounds)
	Value   int64  // the offending value when Missing is false
}

// Error returns the error's message.
func (e *DecodeError) Error() string {
	if e == nil {
		return "bucket: invalid item"
	}
	if e.Missing {
		return fmt.Sprintf("bucket: limit %q: missing attribute %s", e.Limit, e.Attr)
	}
	lo, hi := fieldBounds(e.Attr[max(0, len(e.Attr)-2):])
	return fmt.Sprintf("bucket: limit %q: attribute %s = %d out of range [%d, %d]", e.Limit, e.Attr, e.Value, lo, hi)
}

// fieldBounds returns the bounds Decode enforces on a field; Tokens and
// TotalConsumed are unbounded.
func fieldBounds(field string) (lo, hi int64) {
	switch field {
	case FieldCapacity, FieldBurst, FieldRefillAmount:
		return 1, MaxTokens
	case FieldRefillPeriod:
		return 1, MaxRefillPeriod
	}
	return -1 << 63, 1<<63 - 1
}

// A decoder accumulates one item's attributes. Its first few limits are
// stored in the decoder itself, which the result then shares: an item with
// up to four limits costs Decode two allocations (the decoder and the
// function that feeds it).
type decoder struct {
	refill     int64
	haveRefill bool
	limits     []Named
	seen       []uint8 // seen[i] has bit j set when field j of limits[i] was read
	limitsIn   [4]Named
	seenIn     [4]uint8
}

// Decode reads the bucket data of an item from its numeric attributes (the
// caller adapts its own item type and leaves out non-numeric attributes).
// Attributes that are neither AttrRefill nor a b_{limit}_{field} name are
// ignored, as is an empty limit name; if an attribute appears twice, the
// last value wins. The limit names in the result are substrings of the
// attribute names.
//
// Every limit must have all six attributes, with Capacity, Burst and
// RefillAmount in [1, MaxTokens] and RefillPeriod in [1, MaxRefillPeriod]
// (Tokens and TotalConsumed may hold any int64; Burst >= Capacity is not
// required of stored data), and an item with limits must have AttrRefill.
// Otherwise Decode returns a *[DecodeError], e.g.
// `bucket: limit "rpm": missing attribute b_rpm_bx`; when several
// attributes are wrong it names the first by limit name, then field order
// (tk, cp, bx, ra, rp, tc), then rf, whatever the order of attrs.
//
// An item without limits decodes to Composite{Refill: rf} (rf is 0 when
// absent) and no error; a nil attrs is an item without attributes.
func Decode(attrs iter.Seq2[string, int64]) (Composite, error) {
	d := &decoder{}
	d.limits, d.seen = d.limitsIn[:0], d.seenIn[:0]
	if attrs != nil {
		attrs(d.add)
	}
	if len(d.limits) == 0 {
		return Composite{Refill: d.refill}, nil
	}

	// Report the first problem by limit name, independent of input order.
	var bad *DecodeError
	for i := range d.limits {
		if bad != nil && d.limits[i].Name >= bad.Limit {
			continue
		}
		if e := checkLimit(&d.limits[i], d.seen[i]); e != nil {
			bad = e
		}
	}
	if bad != nil {
		return Composite{}, bad
	}
	if !d.haveRefill {
		first := d.limits[0].Name
		for i := range d.limits {
			first = min(first, d.limits[i].Name)
		}
		return Composite{}, &DecodeError{Limit: first, Attr: AttrRefill, Missing: true}
	}
	// No spare capacity: a Set on one copy of the result never writes
	// into capacity another copy could later append to.
	limits := slices.Clip(d.limits)
	slices.SortFunc(limits, func(a, b Named) int { return cmp.Compare(a.Name, b.Name) })
	return Composite{Refill: d.refill, Limits: limits}, nil
}

// add records one attribute. It is the decoder's yield function.
func (d *decoder) add(attr string, v int64) bool {
	if attr == AttrRefill {
		d.refill, d.haveRefill = v, true
		return true
	}
	name, f := parseAttr(attr)
	if f < 0 {
		return true
	}
	i := slices.IndexFunc(d.limits, func(n Named) bool { return n.Name == name })
	if i < 0 {
		i = len(d.limits)
		d.limits = append(d.limits, Named{Name: name})
		d.seen = append(d.seen, 0)
	}
	d.seen[i] |= 1 << f
	s := &d.limits[i].State
	switch f {
	case 0:
		s.Tokens = v
	case 1:
		s.Capacity = v
	case 2:
		s.Burst = v
	case 3:
		s.RefillAmount = v
	case 4:
		s.RefillPeriod = v
	case 5:
		s.TotalConsumed = v
	}
	return true
}

// checkLimit returns the first problem, in field order, with a decoded limit.
func checkLimit(n *Named, seen uint8) *DecodeError {
	vals := [numFields]int64{n.Tokens, n.Capacity, n.Burst, n.RefillAmount, n.RefillPeriod, n.TotalConsumed}
	for j, f := range fields {
		if seen&(1<<j) == 0 {
			return &DecodeError{Limit: n.Name, Attr: AttrName(n.Name, f), Missing: true}
		}
		if lo, hi := fieldBounds(f); vals[j] < lo || vals[j] > hi {
			return &DecodeError{Limit: n.Name, Attr: AttrName(n.Name, f), Value: vals[j]}
		}
	}
	return nil
}
