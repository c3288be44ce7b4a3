package engine

import (
	"slices"
	"strings"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
)

// Limit is one named limit in millitokens and milliseconds, undivided by
// shards. The hidden write-unit limit is named keys.HiddenLimit.
type Limit struct {
	Name string
	bucket.Limit
	// Calendar makes the limit a calendar quota (its Window set):
	// Capacity per window, no refill (see quota.go).
	Calendar bucket.Calendar
	// TTL makes the limit a concurrency cap (when not 0): Capacity / 1000
	// leases in flight, each counted for at least TTL ms unless given back
	// (see concurrency.go).
	TTL int64
	// Shadow makes the limit watch without enforcing (the root package
	// charges it only when it has the tokens): a refusal's wait, and the
	// promise the memory keeps of it, is the other limits' (see retryOf).
	Shadow bool
}

// Hidden is the per-partition write-unit limit every plan carries last:
// 1000 writes a second, the write ceiling of one DynamoDB partition,
// charged one unit per write and never divided among shards.
var Hidden = Limit{Name: keys.HiddenLimit, Limit: bucket.Limit{
	Capacity: 1000 * bucket.MilliPerToken, Burst: 1000 * bucket.MilliPerToken,
	RefillAmount: 1000 * bucket.MilliPerToken, RefillPeriod: 1000,
}}

// unit is one write unit of the hidden limit, in millitokens.
const unit = bucket.MilliPerToken

// spec is one limit of one bucket write: its attribute names and its
// original (undivided) limit, shared by every plan of the same limits, and
// the amount to charge, in millitokens.
type spec struct {
	*specAttrs
	amount int64 // may be negative in an adjust
	// hold is the part of amount a reservation takes into a pool (it also
	// lowers the bucket's cap, see hold.go); release is the hold a pool's
	// return gives back (amount is then minus the pool's rest).
	hold, release int64
	// free marks a limit this write skips (see Skipping): it charges
	// nothing and is never a condition, nor a reason to refuse.
	free bool
}

// specAttrs is the part of a spec that depends only on the limit: its
// name, its original limit and the names of its attributes.
type specAttrs struct {
	name                           string
	orig                           bucket.Limit
	hidden, shadow                 bool
	tk, cp, bx, ra, rp, tc, fl, fh string
	hd                             string // the limit's hold (see hold.go)
}

// hiddenAttrs are the hidden limit's, the same in every plan.
var hiddenAttrs = newSpec(Hidden).specAttrs

func newSpec(l Limit) spec {
	n := l.Name
	return spec{specAttrs: &specAttrs{
		name: n, orig: l.Limit, hidden: n == keys.HiddenLimit, shadow: l.Shadow,
		tk: bucket.AttrName(n, bucket.FieldTokens), cp: bucket.AttrName(n, bucket.FieldCapacity),
		bx: bucket.AttrName(n, bucket.FieldBurst), ra: bucket.AttrName(n, bucket.FieldRefillAmount),
		rp: bucket.AttrName(n, bucket.FieldRefillPeriod), tc: bucket.AttrName(n, bucket.FieldTotalConsumed),
		fl: "b_" + n + "_" + keys.FieldFullLo, fh: "b_" + n + "_" + keys.FieldFullHi,
		hd: "b_" + n + "_" + fieldHold,
	}}
}

// perShard returns the limit one of n shards enforces. The hidden limit
// is a per-partition ceiling and is never divided.
func (s *spec) perShard(n int64) bucket.Limit {
	if s.hidden {
		return s.orig
	}
	return s.orig.PerShard(n)
}

// Plan is everything needed to charge one bucket: the limits in name
// order with the hidden limit last, the amounts, and the hash of the
// limits that every blind write checks. A Plan is immutable once built;
// WithAmounts derives another.
type Plan struct {
	// Ref is the bucket (its Shard field is ignored).
	Ref   keys.Bucket
	specs []spec
	// quotas are the calendar quotas, in name order (see quota.go).
	quotas []quota
	// caps are the concurrency caps, in name order (see concurrency.go).
	caps []conc
	hash int64
	// gen is the hold generation a pool's return was reserved under
	// (meaningful when a spec has a release).
	gen int64
}

// withSpecs returns a plan of ref charging specs (copied), without
// quotas.
func withSpecs(ref keys.Bucket, hash int64, specs []spec) *Plan {
	return &Plan{Ref: ref, hash: hash, specs: slices.Clone(specs)}
}

// clone returns a copy of p that derived plans may change.
func (p *Plan) clone() *Plan {
	q := withSpecs(p.Ref, p.hash, p.specs)
	q.quotas, q.gen = slices.Clone(p.quotas), p.gen
	q.caps = slices.Clone(p.caps)
	return q
}

// NewPlan returns the plan to charge consume (tokens per limit name; names
// not given are charged nothing) under limits. Every write also charges
// the hidden limit one unit. limits must be valid and distinctly named.
func NewPlan(ref keys.Bucket, limits []Limit, consume map[string]int64) *Plan {
	specs := make([]spec, 0, len(limits)+1)
	var quotas []quota
	var caps []conc
	for _, l := range limits {
		if l.TTL != 0 {
			c := newConc(l)
			c.amount = consume[l.Name] * bucket.MilliPerToken
			caps = append(caps, c)
			continue
		}
		if l.Calendar.Window != 0 {
			q := newQuota(l)
			q.amount = consume[l.Name] * bucket.MilliPerToken
			quotas = append(quotas, q)
			continue
		}
		specs = append(specs, newSpec(l))
	}
	slices.SortFunc(quotas, func(a, b quota) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(caps, func(a, b conc) int { return strings.Compare(a.name, b.name) })
	sortSpecs(specs)
	specs = append(specs, spec{specAttrs: hiddenAttrs})
	sorted := make([]Limit, len(specs))
	for i := range specs {
		s := &specs[i]
		sorted[i] = Limit{Name: s.name, Limit: s.orig}
		if s.hidden {
			s.amount = unit
		} else {
			s.amount = consume[s.name] * bucket.MilliPerToken
		}
	}
	hash := int64(capHash(quotaHash(fnv64(sorted), quotas), caps) &^ (1 << 63)) // positive: readable in the console
	return &Plan{Ref: ref, hash: hash, specs: specs, quotas: quotas, caps: caps}
}

// WithAmounts returns a copy of p charging the given millitokens per limit
// name (absent names, and the hidden limit, charge nothing): the plan of
// an adjust or a refund.
func (p *Plan) WithAmounts(milli map[string]int64) *Plan {
	q := p.clone()
	q.gen = 0
	for i := range q.specs {
		q.specs[i].amount = milli[q.specs[i].name]
	}
	for i := range q.quotas {
		q.quotas[i].amount = milli[q.quotas[i].name]
	}
	for i := range q.caps {
		q.caps[i].amount = milli[q.caps[i].name]
	}
	return q
}

// shadow reports whether the plan's limit called name is a shadow limit
// (Limit.Shadow).
func (p *Plan) shadow(name string) bool {
	for i := range p.specs {
		if p.specs[i].name == name {
			return p.specs[i].shadow
		}
	}
	for i := range p.quotas {
		if p.quotas[i].name == name {
			return p.quotas[i].shadow
		}
	}
	return false
}

// Skipping returns a copy of p that skips the limits called names: each
// charges nothing and no write or decision requires its tokens, not even
// that it is out of debt. The root package skips a shadow limit that
// would refuse (it is charged only when it has the tokens, as it would be
// if it enforced). Its refill is kept up to date like any limit's; a
// skipped calendar quota charges nothing and keeps its window.
func (p *Plan) Skipping(names []string) *Plan {
	q := p.clone()
	for i := range q.specs {
		if slices.Contains(names, q.specs[i].name) {
			q.specs[i].amount, q.specs[i].free = 0, true
		}
	}
	for i := range q.quotas {
		if slices.Contains(names, q.quotas[i].name) {
			q.quotas[i].amount = 0
		}
	}
	for i := range q.caps {
		if slices.Contains(names, q.caps[i].name) {
			q.caps[i].amount = 0
		}
	}
	return q
}

// WithExtra returns a copy of p that also charges extra millitokens per
// limit name (a reservation taken with the charge).
func (p *Plan) WithExtra(extra map[string]int64) *Plan {
	q := p.clone()
	q.gen = 0
	for i := range q.specs {
		q.specs[i].amount += extra[q.specs[i].name]
	}
	return q
}

// WithHold returns a copy of p that also reserves hold millitokens per
// limit name into a pool (see hold.go): charged like extra, and held. It
// releases what the pool handed out of its earlier holds (release, nil
// for none), which were taken in hold generation gen.
func (p *Plan) WithHold(hold, release map[string]int64, gen int64) *Plan {
	q := p.WithExtra(hold)
	q.gen = gen
	for i := range q.specs {
		q.specs[i].hold = hold[q.specs[i].name]
		q.specs[i].release = release[q.specs[i].name]
	}
	return q
}

// WithReturn returns the plan of a pool's return: refund rest and release
// held millitokens per limit name of the hold generation gen.
func (p *Plan) WithReturn(rest, held map[string]int64, gen int64) *Plan {
	q := withSpecs(p.Ref, p.hash, p.specs) // a pool never holds a quota
	q.quotas = slices.Clone(p.quotas)
	for i := range q.quotas {
		q.quotas[i].amount = 0
	}
	q.caps = slices.Clone(p.caps)
	for i := range q.caps {
		q.caps[i].amount = 0
	}
	q.gen = gen
	for i := range q.specs {
		s := &q.specs[i]
		s.amount, s.hold, s.release = -rest[s.name], 0, held[s.name]
	}
	return q
}

// holding reports whether the plan reserves (a hold) or returns (a
// release) anything.
func (p *Plan) holding() (reserves, releases bool) {
	for i := range p.specs {
		reserves = reserves || p.specs[i].hold > 0
		releases = releases || p.specs[i].release > 0
	}
	return reserves, releases
}

// ChargesQuota reports whether the plan charges or refunds a calendar
// quota. Reservation pools never hold a quota: such a charge goes to the
// store.
func (p *Plan) ChargesQuota() bool {
	for i := range p.quotas {
		if p.quotas[i].amount != 0 {
			return true
		}
	}
	return false
}

// keysLimits returns the plan's application limits as the writes that
// change a shard count name them (keys.Limits): an item written for this
// plan holds exactly these.
func (p *Plan) keysLimits() keys.Limits {
	l := keys.Limits{Hash: p.hash, Names: make([]string, 0, len(p.specs))}
	for i := range p.specs {
		if !p.specs[i].hidden {
			l.Names = append(l.Names, p.specs[i].name) // in name order (sortSpecs)
		}
	}
	return l // the rates: a doubling resets their guards; quotas have none
}

// Has reports whether the plan has an application limit called name.
func (p *Plan) Has(name string) bool {
	for i := range p.specs {
		if p.specs[i].name == name && !p.specs[i].hidden {
			return true
		}
	}
	return p.hasQuota(name) || p.hasCap(name)
}

// Amounts returns the millitokens the plan charges per application limit
// (zero amounts omitted).
func (p *Plan) Amounts() map[string]int64 {
	m := make(map[string]int64, len(p.specs))
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount != 0 {
			m[s.name] = s.amount
		}
	}
	for i := range p.quotas {
		if q := &p.quotas[i]; q.amount != 0 {
			m[q.name] = q.amount
		}
	}
	for i := range p.caps {
		if c := &p.caps[i]; c.amount != 0 {
			m[c.name] = c.amount
		}
	}
	return m
}

// Divisible reports whether every limit still serves this plan's charge
// when split n ways: doubling past that would strand the request.
func (p *Plan) Divisible(n int64) bool {
	for i := range p.specs {
		s := &p.specs[i]
		if !s.hidden && s.perShard(n).Burst < max(s.amount, bucket.MilliPerToken) {
			return false
		}
	}
	for i := range p.quotas {
		if q := &p.quotas[i]; q.share(n) < max(q.amount, bucket.MilliPerToken) {
			return false
		}
	}
	for i := range p.caps {
		if c := &p.caps[i]; c.share(n) < max(c.slots(), 1) {
			return false
		}
	}
	return true
}

// fnv64 hashes limit names and parameters (in millitokens and ms) with
// FNV-1a, without allocating. The stored hash of a bucket is this value
// over the sorted limits and the hidden one: it must not change, or every
// bucket would be rewritten once.
func fnv64(ls []Limit) uint64 {
	h := uint64(14695981039346656037)
	mix := func(b byte) { h ^= uint64(b); h *= 1099511628211 }
	for _, l := range ls {
		for i := 0; i < len(l.Name); i++ {
			mix(l.Name[i])
		}
		mix(0)
		for _, v := range [...]int64{l.Capacity, l.Burst, l.RefillAmount, l.RefillPeriod} {
			for j := 0; j < 8; j++ {
				mix(byte(uint64(v) >> (8 * j)))
			}
		}
	}
	return h
}

// quotaHash mixes the quotas (name, N, window, time zone, week start,
// month day) into a hash of the rates; without quotas it is h unchanged.
func quotaHash(h uint64, qs []quota) uint64 {
	mix := func(b byte) { h ^= uint64(b); h *= 1099511628211 }
	str := func(s string) {
		for i := 0; i < len(s); i++ {
			mix(s[i])
		}
		mix(0)
	}
	for _, q := range qs {
		str(q.name)
		zone := "UTC"
		if q.cal.Loc != nil {
			zone = q.cal.Loc.String()
		}
		str(zone)
		for _, v := range [...]int64{q.n, int64(q.cal.Window), int64(q.cal.WeekStart), int64(q.cal.MonthDay)} {
			for j := 0; j < 8; j++ {
				mix(byte(uint64(v) >> (8 * j)))
			}
		}
	}
	return h
}

func sortSpecs(s []spec) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].name < s[j-1].name; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Same reports whether p and q are the same charge: of the same bucket,
// under the same limits, of the same amounts, holds and releases, in the
// same hold generation. It is false when either is nil.
func (p *Plan) Same(q *Plan) bool {
	if p == nil || q == nil || p.Ref != q.Ref || p.hash != q.hash || p.gen != q.gen || len(p.specs) != len(q.specs) {
		return false
	}
	for i := range p.specs {
		a, b := &p.specs[i], &q.specs[i]
		if a.name != b.name || a.orig != b.orig || a.amount != b.amount || a.hold != b.hold || a.release != b.release {
			return false
		}
	}
	return slices.EqualFunc(p.quotas, q.quotas, func(a, b quota) bool { return a.name == b.name && a.amount == b.amount && a.at == b.at }) &&
		slices.EqualFunc(p.caps, q.caps, func(a, b conc) bool { return a.name == b.name && a.amount == b.amount && a.at == b.at })
}
