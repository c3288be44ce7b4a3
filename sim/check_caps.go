package sim

import (
	"errors"
	"maps"
	"slices"

	"github.com/shardlimit/limiter"
)

// InvCap: the leases of a bucket live at once never exceed its
// concurrency cap, a lease being live from its admission until its holder
// ends it (Commit, Rollback) or its TTL has passed, less the clocks'
// spread; and on a bucket of one shard, a refusal by the cap alone comes
// only while the slots of the leases that may still be counted (live, or
// dead for at most TTL + TTL/4 and the spread) leave too few for it: a
// dead holder's slot comes back within TTL + E plus one write.
const InvCap = "concurrency-cap"

// capLog records the leases of the workload's concurrency cap (the one
// limit with Window "concurrent"), as the clients see them, in true time:
// one per bucket an acquire charges the cap on, its own, its cascade
// parent's and its Also resources' (and their parents'), each with its
// own cap.
type capLog struct {
	limit   int // its index in the model's limits
	m       *model
	leases  []capLease
	refused []capRefusal
}

type capLease struct {
	bucket   int32
	slots    int64
	start    int64 // the acquire's call began
	admitted int64 // it returned the lease
	// end is when Commit or Rollback was called, ended when it returned
	// having given the slots back (-1: never: the holder died, or the
	// release failed and the slots are counted until they expire).
	end, ended int64
	// unknown marks an acquire that failed with an unknown outcome (its
	// write may have applied, its slots then counted until they expire):
	// no one holds it, but the refusals may find its slots taken.
	unknown bool
}

type capRefusal struct {
	bucket     int32
	slots      int64
	start, end int64
}

// newCapLog returns the log of the workload's cap, nil without one.
func newCapLog(w *Workload, m *model) *capLog {
	for i, l := range w.Limits {
		if l.Window == "concurrent" {
			return &capLog{limit: i, m: m}
		}
	}
	return nil
}

// buckets returns the buckets op charges the cap on: its roles (see
// Model.roles) but those an admit mode left out or whose cap was a
// shadow limit the acquire skipped, each once.
func (g *capLog) buckets(op *operation) []int32 {
	var out []int32
	for r, bi := range g.m.roles(op.Bucket) {
		if bi >= 0 && !op.LeftOut[r] && !op.Skipped[r][g.limit] && !slices.Contains(out, bi) {
			out = append(out, bi)
		}
	}
	return out
}

// admitted records an admitted acquire's leases, one per bucket it
// charges the cap on; it returns their indices (none for a lease of a
// scope not enforced: admit or shadow mode).
func (g *capLog) admitted(op *operation) []int {
	if op.Mode != "" {
		return nil
	}
	var out []int
	for _, bi := range g.buckets(op) {
		out = append(out, len(g.leases))
		g.leases = append(g.leases, capLease{bucket: bi, slots: op.Amount[g.limit], start: op.Start, admitted: op.End, end: -1, ended: -1})
	}
	return out
}

// unknown records an acquire whose outcome is unknown (unavailable, or
// cut by the end of the run).
func (g *capLog) unknown(op *operation) {
	if op.Mode != "" {
		return
	}
	for _, bi := range g.buckets(op) {
		g.leases = append(g.leases, capLease{bucket: bi, slots: op.Amount[g.limit], start: op.Start, admitted: op.End, end: -1, ended: -1, unknown: true})
	}
}

// refusedBy records a refusal: on the bucket that refused, when it has one
// shard, the store judged, the refusal names the cap as exceeded and no
// other enforcing limit of it, the cap's. A refusal that names no limit
// (lost races: a false rejection the limiter allows) or only limits that
// do not enforce (shadow) besides is not the cap's: InvCap does not judge
// it.
func (g *capLog) refusedBy(op *operation, err error) {
	rl, ok := errors.AsType[*limiter.RateLimitedError](err)
	if !ok || op.Mode != "" {
		return
	}
	// A refused acquire may have taken its slots for a moment: an acquire
	// of several buckets (a cascade, Also resources) one of which refused
	// takes them on the others and gives them back before it answers (a
	// compensation that fails makes the answer unavailable, see unknown).
	refusing := int32(-1)
	for _, bi := range g.buckets(op) {
		g.leases = append(g.leases, capLease{bucket: bi, slots: op.Amount[g.limit], start: op.Start, admitted: op.End, end: -1, ended: op.End, unknown: true})
		if b := &g.m.Buckets[bi]; b.Entity == rl.Entity && b.Resource == rl.Resource {
			refusing = bi
		}
	}
	if rl.Local || rl.Parent || refusing < 0 {
		return
	}
	byCap := false
	for _, ls := range rl.Limits {
		switch {
		case ls.Limit.Shadow || !ls.Exceeded:
		case ls.Limit.Window != "concurrent" || ls.Shards != 1:
			return // another limit refused too, or a sharded bucket
		default:
			byCap = true
		}
	}
	if !byCap {
		return
	}
	g.refused = append(g.refused, capRefusal{bucket: refusing, slots: op.Amount[g.limit], start: op.Start, end: op.End})
}

// check flags InvCap's violations.
func (g *capLog) check(c *checker, m *model) {
	capOf := func(bi int32) (limiter.Limit, bool) {
		for _, l := range m.Buckets[bi].Limits {
			if l.Window == "concurrent" {
				return l, true
			}
		}
		return limiter.Limit{}, false
	}
	spread := 2 * m.SkewSpread
	by := make(map[int32][]int)
	for i, l := range g.leases {
		by[l.bucket] = append(by[l.bucket], i)
	}
	for _, bi := range slices.Sorted(maps.Keys(by)) {
		x, ok := capOf(bi)
		if !ok {
			continue
		}
		ttl := int64(x.TTL)
		for _, i := range by[bi] {
			t := g.leases[i].admitted
			live := int64(0)
			for _, j := range by[bi] {
				l := &g.leases[j]
				if !l.unknown && l.admitted <= t && (l.end < 0 || l.end > t) && t < l.start+ttl-spread {
					live += l.slots
				}
			}
			if live > x.Capacity {
				c.flag(InvCap, "%s/%s: %d slots of leases live at %s, above the cap %d", m.Buckets[bi].Entity, m.Buckets[bi].Resource, live, c.fmtT(t), x.Capacity)
			}
		}
	}
	for _, r := range g.refused {
		x, ok := capOf(r.bucket)
		if !ok {
			continue
		}
		ttl := int64(x.TTL)
		e := (ttl + 3) / 4
		counted := int64(0)
		for _, j := range by[r.bucket] {
			l := &g.leases[j]
			if l.start <= r.end && (l.ended < 0 || l.ended > r.start) && r.start < l.admitted+ttl+e+spread+c.latency {
				counted += l.slots
			}
		}
		if counted+r.slots <= x.Capacity {
			c.flag(InvCap, "%s/%s: refused by the cap at %s while at most %d of its %d slots could be counted",
				m.Buckets[r.bucket].Entity, m.Buckets[r.bucket].Resource, c.fmtT(r.end), counted, x.Capacity)
		}
	}
}

// capEnding records that pl's holder ends it now (Commit or Rollback).
func (c *client) capEnding(pl *pendingLease) {
	for _, i := range pl.capLeases {
		c.s.caps.leases[i].end = c.s.now
	}
}

// capEnded records the end of pl's Commit or Rollback: its slots are given
// back unless it failed.
func (c *client) capEnded(pl *pendingLease, err error) {
	if err != nil || c.s.stopping {
		return
	}
	for _, i := range pl.capLeases {
		c.s.caps.leases[i].ended = c.s.now
	}
}
