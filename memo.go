package limiter

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/items"
)

// A process often acquires the same tokens from the same bucket again and
// again (one API key calling one model). Such an acquire repeats the last
// one's checks and builds the same plan: a repeat memo remembers what the
// last acquire of a bucket checked and planned, so that an acquire with
// the same request skips the identifier checks and shares the plan; and,
// while the configuration cache holds the stored limits the plan was made
// from (neither expired nor invalidated), it skips looking them up.
//
// A plan is immutable once built, so acquires share it freely. The memo is
// made on the second acquire in a row of the same bucket (an acquire of
// another bucket between them starts the count again): a process that
// spreads its acquires over many buckets pays a comparison per acquire,
// never an allocation.

// maxMemoLimits is the most limits (the caller's, and those that apply) a
// repeat memo holds.
const maxMemoLimits = 4

// repeatMemo is what an acquire of one bucket checked and planned. It is
// never changed once published.
type repeatMemo struct {
	resource string // as checkRequest accepted it (defaulted)
	// req is the request's limits, which checkRequest accepted; limits
	// those that applied (config), which the plan was built from. Both are
	// copies the memo made (a renewal shares its original's: see fresher).
	req, limits []Limit
	// consume is the request's Consume by the names of limits (every name
	// it has is one of them: checkConsume); has says which of them it
	// names, count how many.
	consume [maxMemoLimits]int64
	has     [maxMemoLimits]bool
	count   int
	plan    bucketPlan // its Plan shared, its limits the memo's own
	buf     [2 * maxMemoLimits]Limit
	// The stored configuration the limits came from: the entity as
	// stored, and until when (exclusive; zero: not cached) and in which
	// generation the configuration cache holds it (see settings). While it
	// does, an acquire the memo asks for runs with these settings without
	// looking the configuration up. A memo is never of a cascade.
	entity items.Entity
	cached time.Time
	gen    uint64
}

// memoState is the limiter's repeat memo, and the plan of its last
// acquire that did not use it (an acquire with the same plan next makes
// the memo).
type memoState struct {
	last atomic.Pointer[repeatMemo]
	seen atomic.Pointer[engine.Plan] // swapped, so that no acquire waits on another
}

// asks reports whether req (its resource defaulted) is the memo's
// request: the same entity, resource, limits and amounts, and a known
// policy. Such a request passed checkRequest when the memo was made, and
// does again. It is false for a nil memo.
func (m *repeatMemo) asks(req Request, resource string) bool {
	return m != nil && req.Policy <= FailOpen && req.Entity == m.entity.ID && resource == m.resource &&
		slices.Equal(req.Limits, m.req) && m.sameConsume(req.Consume)
}

// sameConsume reports whether consume holds exactly the memo's amounts.
func (m *repeatMemo) sameConsume(consume map[string]int64) bool {
	if len(consume) != m.count {
		return false
	}
	for i := range m.limits {
		v, ok := consume[m.limits[i].Name]
		if ok != m.has[i] || v != m.consume[i] {
			return false
		}
	}
	return true
}

// settings returns the settings of the memo's request when the
// configuration cache still holds what they came from at now and has not
// been invalidated since (gen is the cache's generation). The cache's own
// entries expire by the same comparison (on a real clock, by its monotonic
// reading: a step of the wall clock moves neither).
func (m *repeatMemo) settings(gen uint64, now time.Time) (settings, bool) {
	if m.cached.IsZero() || !now.Before(m.cached) || gen != m.gen {
		return settings{}, false
	}
	return settings{entity: m.entity, resource: m.resource, limits: m.limits, cached: m.cached, gen: m.gen}, true
}

// planFor returns the memo's plan when it is the plan of req with the
// limits that apply (s.limits): asked says req is the memo's request
// (asks), which saves comparing its amounts again.
func (m *repeatMemo) planFor(req Request, s settings, asked bool) (bucketPlan, bool) {
	if m == nil || (!asked && !(req.Entity == m.entity.ID && s.resource == m.resource && m.sameConsume(req.Consume))) ||
		!sameLimits(s.limits, m.limits) {
		return bucketPlan{}, false
	}
	return m.plan, true
}

// sameLimits is slices.Equal, at once for the same slice (settings the
// memo served).
func sameLimits(a, b []Limit) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true
	}
	return slices.Equal(a, b)
}

// fresher publishes a copy of memo m that serves settings s, found or
// read again since m was made (m having expired, or been invalidated), when
// they are newer: of a later cache generation (generations only grow), or
// cached longer. Only the settings change: the plan was found the same.
func (l *Limiter) fresher(m *repeatMemo, s settings) {
	if s.cached.IsZero() || (s.gen <= m.gen && !s.cached.After(m.cached)) {
		return
	}
	c := *m
	c.entity, c.cached, c.gen = s.entity, s.cached, s.gen
	l.memo.last.CompareAndSwap(m, &c)
}

// remember records that req, with the limits s, was planned as p: the
// second time in a row that an acquire plans the same charge, it makes
// the limiter's memo of it.
func (l *Limiter) remember(req Request, s settings, p bucketPlan) {
	if len(req.Limits) > maxMemoLimits || len(s.limits) > maxMemoLimits || s.entity.Cascade {
		return // (a cascade's settings have the parent's limits: not memoised)
	}
	ms := &l.memo
	if !p.Same(ms.seen.Swap(p.Plan)) {
		return
	}
	m := &repeatMemo{entity: s.entity, resource: s.resource, count: len(req.Consume), cached: s.cached, gen: s.gen}
	m.req = append(m.buf[:0:maxMemoLimits], req.Limits...)
	m.limits = append(m.buf[maxMemoLimits:maxMemoLimits], s.limits...)
	for i := range m.limits {
		m.consume[i], m.has[i] = req.Consume[m.limits[i].Name]
	}
	m.plan = bucketPlan{Plan: p.Plan, limits: m.limits}
	ms.last.Store(m)
}

// planned is the plan of the charge of one bucket and the lease box of
// its answer: the memo's plan and a box without one, or a new plan built
// in the box.
func (l *Limiter) planned(req Request, s settings, memo *repeatMemo, asked bool) (bucketPlan, *soloLease) {
	if p, ok := memo.planFor(req, s, asked); ok {
		l.fresher(memo, s)
		return p, new(soloLease)
	}
	box := new(plannedLease)
	p := l.newPlanIn(&box.plan, req.Entity, s.resource, s.limits, req.Consume)
	l.remember(req, s, p)
	return p, &box.soloLease
}
