package limiter

import (
	"math"
	"sync"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Bucket item attributes besides the per-limit b_{limit}_{field} ones.
const (
	attrEntity     = keys.AttrEntity
	attrResource   = keys.AttrResource
	attrShard      = keys.AttrShard
	attrShardCount = keys.AttrShardCount
	attrLimitsHash = keys.AttrLimitsHash
	attrRefill     = bucket.AttrRefill
	fieldFullLo    = keys.FieldFullLo
	fieldFullHi    = keys.FieldFullHi
)

// spec is one limit of one bucket write: its attribute names, its original
// (undivided) limit in millitokens and the amount to charge.
type spec struct {
	limit                          Limit        // as the caller gave it (for errors and status)
	orig                           bucket.Limit // millitokens, undivided
	amount                         int64        // millitokens, >= 0
	hidden                         bool         // the wcu limit
	tk, cp, bx, ra, rp, tc, fl, fh string
}

func newSpec(l Limit, amountTokens int64) spec {
	n := l.Name
	return spec{
		limit: l, orig: l.bucketLimit(), amount: amountTokens * bucket.MilliPerToken, hidden: n == wcuName,
		tk: bucket.AttrName(n, bucket.FieldTokens), cp: bucket.AttrName(n, bucket.FieldCapacity),
		bx: bucket.AttrName(n, bucket.FieldBurst), ra: bucket.AttrName(n, bucket.FieldRefillAmount),
		rp: bucket.AttrName(n, bucket.FieldRefillPeriod), tc: bucket.AttrName(n, bucket.FieldTotalConsumed),
		fl: "b_" + n + "_" + fieldFullLo, fh: "b_" + n + "_" + fieldFullHi,
	}
}

// perShard returns the limit one of n shards enforces. wcu is a
// per-partition ceiling and is never divided.
func (s *spec) perShard(n int64) bucket.Limit {
	if s.hidden {
		return s.orig
	}
	return s.orig.PerShard(n)
}

// plan is everything needed to charge one bucket: the limits in name order
// with the hidden wcu limit last, the amounts, and the hash of the limits.
type plan struct {
	ref   keys.Bucket
	specs []spec
	hash  int64
	pt    *planTemplate // shared per distinct limits; nil when uncached
}

// planTemplate is the part of a plan that depends only on the limits: it is
// computed once per distinct set of limits and shared.
type planTemplate struct {
	source []Limit // the limits as given, to verify a cache hit
	specs  []spec  // amounts zero
	hash   int64

	mu     sync.Mutex
	shapes map[shapeKey]*template
}

var planCache struct {
	sync.RWMutex
	m map[uint64]*planTemplate
}

// maxPlanTemplates bounds the plan cache; past it, plans are built afresh.
const maxPlanTemplates = 4096

func newPlan(ref keys.Bucket, limits []Limit, consume map[string]int64) *plan {
	pt := lookupPlanTemplate(limits)
	p := &plan{ref: ref, hash: pt.hash, pt: pt, specs: make([]spec, len(pt.specs))}
	copy(p.specs, pt.specs)
	for i := range p.specs {
		if p.specs[i].hidden {
			p.specs[i].amount = bucket.MilliPerToken // every write costs one write unit
		} else {
			p.specs[i].amount = consume[p.specs[i].limit.Name] * bucket.MilliPerToken
		}
	}
	return p
}

func lookupPlanTemplate(limits []Limit) *planTemplate {
	h := fnv64(limits)
	planCache.RLock()
	pt := planCache.m[h]
	planCache.RUnlock()
	if pt != nil && sameLimits(pt.source, limits) {
		return pt
	}
	pt = buildPlanTemplate(limits)
	planCache.Lock()
	if planCache.m == nil {
		planCache.m = make(map[uint64]*planTemplate)
	}
	if _, taken := planCache.m[h]; !taken && len(planCache.m) < maxPlanTemplates {
		planCache.m[h] = pt
	}
	planCache.Unlock()
	return pt
}

func buildPlanTemplate(limits []Limit) *planTemplate {
	pt := &planTemplate{source: append([]Limit(nil), limits...), specs: make([]spec, 0, len(limits)+1)}
	for _, l := range limits {
		pt.specs = append(pt.specs, newSpec(l, 0))
	}
	sortSpecs(pt.specs)
	pt.specs = append(pt.specs, newSpec(wcuLimit, 0))
	sorted := make([]Limit, len(pt.specs))
	for i := range pt.specs {
		sorted[i] = pt.specs[i].limit
	}
	pt.hash = int64(fnv64(sorted) &^ (1 << 63)) // positive: readable in the console
	return pt
}

func sameLimits(a, b []Limit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].bucketLimit() != b[i].bucketLimit() {
			return false
		}
	}
	return true
}

// fnv64 hashes limit names and parameters (in millitokens and ms) with
// FNV-1a, without allocating.
func fnv64(ls []Limit) uint64 {
	h := uint64(14695981039346656037)
	mix := func(b byte) { h ^= uint64(b); h *= 1099511628211 }
	for _, l := range ls {
		for i := 0; i < len(l.Name); i++ {
			mix(l.Name[i])
		}
		mix(0)
		b := l.bucketLimit()
		for _, v := range [...]int64{b.Capacity, b.Burst, b.RefillAmount, b.RefillPeriod} {
			for j := 0; j < 8; j++ {
				mix(byte(uint64(v) >> (8 * j)))
			}
		}
	}
	return h
}

func sortSpecs(s []spec) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].limit.Name < s[j-1].limit.Name; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// image is a bucket item as decoded from the store.
type image struct {
	raw        store.Item
	rf         int64
	hash       int64
	shardCount int64
	comp       bucket.Composite

	// The shard's write rate as this client estimates it (writes per ms),
	// from the wcu counters of its last two images of the shard and when
	// it received them (at, its clock).
	at  int64
	wpm float64
}

// writes returns the shard's count of write units, in millitokens.
func (im *image) writes() (int64, bool) {
	st, ok := im.comp.Get(wcuName)
	return st.TotalConsumed, ok
}

func decodeImage(it store.Item) (*image, error) {
	if it == nil {
		return nil, nil
	}
	comp, err := bucket.Decode(it.Numbers())
	if err != nil {
		return nil, err
	}
	im := &image{raw: it, rf: comp.Refill, comp: comp, shardCount: 1}
	im.hash, _ = it.Int(attrLimitsHash)
	if n, ok := it.Int(attrShardCount); ok && n >= 1 {
		im.shardCount = n
	}
	return im, nil
}

// state returns the stored state of s's limit, with the stored (original)
// limit divided for the image's shard count, and its guard fields.
func (im *image) state(s *spec) (st bucket.State, fl, fh int64, ok bool) {
	st, ok = im.comp.Get(s.limit.Name)
	if !ok {
		return st, 0, 0, false
	}
	if !s.hidden {
		st.Limit = st.Limit.PerShard(im.shardCount)
	}
	fl, okl := im.raw.Int(s.fl)
	fh, okh := im.raw.Int(s.fh)
	if !okl || !okh { // written by a layout without guards: treat as unknown
		fl, fh = math.MinInt64, math.MaxInt64
	}
	return st, fl, fh, true
}

// matches reports whether the image was written for exactly this plan's
// limits and shard count: the speculative and full paths are valid only then.
func (im *image) matches(p *plan, n int64) bool {
	return im.hash == p.hash && im.shardCount == n && len(im.comp.Limits) == len(p.specs)
}

// satAdd is a + b, saturating at the int64 limits.
func satAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}
