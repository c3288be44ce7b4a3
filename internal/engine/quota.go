package engine

import (
	"maps"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// Calendar quotas. A quota is N millitokens per calendar window (a day, a
// week or a month in a time zone), kept in the bucket's item beside the
// rates, in four attributes q_{L}_{tk,cp,ws,tc}: what is left in the
// window, N (undivided), the window's start (Unix ms) and the total
// consumed. Every write that charges a quota carries its part, all or
// nothing with the rates:
//
//   - the item is in the window of now (or a later one, which a writer
//     whose clock runs ahead started): ADD tk -c, tc +c, IF ws = :seen AND
//     tk >= c. Concurrent writers ADD without excluding each other.
//   - the item is in an earlier window: SET tk = share - c, ws = :w, ADD
//     tc +c, IF ws < :w. Exactly one writer starts the window; the others
//     fail, see the new window in the item they get back, and ADD.
//
// The writer knows which from its image: a wrong guess fails the write,
// and the item it returns decides the next write, as for the rates. An
// item without the quota (a quota new to the bucket) gets it with SET IF
// attribute_not_exists(ws).
//
// Shards: each of n shards holds share = floor(N / n) per window. A shard
// created in a window (a doubling's) starts that window empty, so that a
// doubling never adds to a window; it starts the next one at its share.
// A window is started on a shard other than 0 only by a writer that has
// seen shard 0 in that window (see Charge.nextShard): its count is then at
// least the count n0 in force when the window began, so each of the n0
// shards that existed then starts the window with at most N / n0, and
// every later shard starts it empty: the shards together start every
// window with at most N.
//
// Settlements (an Adjust, a Rollback, a cascade's undo) apply to the
// window their acquire charged (quota.at): ADD without a floor IF ws =
// :at. Once that window is over they leave the quota alone: a refund has
// nothing to give back to (the window that lacked the tokens is gone), and
// a charge, a debt the window ran into, is forgiven at the boundary: every
// window starts at N. So what acquires take in a window is at most N plus
// what settlements refunded in it, and a window's net charge (acquires and
// settlements) exceeds N only by charges settled after its last admitted
// acquire.

// quota is one calendar quota of a bucket write: its attribute names, N
// (millitokens, undivided), its calendar and the amount to charge.
type quota struct {
	name           string
	n              int64
	cal            bucket.Calendar
	tk, cp, ws, tc string
	amount         int64
	// at pins a settlement to the window its acquire charged (its start,
	// Unix ms); 0 for an acquire, which charges the window of now or the
	// one stored.
	at int64
}

func newQuota(l Limit) quota {
	n := l.Name
	return quota{name: n, n: l.Capacity, cal: l.Calendar,
		tk: bucket.QuotaAttrName(n, bucket.FieldTokens), cp: bucket.QuotaAttrName(n, bucket.FieldCapacity),
		ws: bucket.QuotaAttrName(n, bucket.FieldWindow), tc: bucket.QuotaAttrName(n, bucket.FieldTotalConsumed)}
}

// share is what one of n shards holds of the quota per window.
func (q *quota) share(n int64) int64 {
	return bucket.Limit{Capacity: q.n, Burst: q.n}.PerShard(n).Capacity
}

// quota returns the quota's window start and balance as the item stores
// them; ok is false for an item without the quota (or a nil image).
func (im *Image) quota(q *quota) (ws, tk int64, ok bool) {
	if im == nil {
		return 0, 0, false
	}
	ws, okw := im.raw.Int(q.ws)
	tk, okt := im.raw.Int(q.tk)
	return ws, tk, okw && okt
}

// quotaLeft returns what quota q holds for an acquire at now on a shard of
// n, judging by the image, and when that window ends (Unix ms): the stored
// balance while the stored window is current (or later), else a fresh
// share, in the window of now.
func (im *Image) quotaLeft(q *quota, n, now int64) (left, end int64) {
	w, e := q.cal.Bounds(now)
	if ws, tk, ok := im.quota(q); ok && ws >= w {
		_, e = q.cal.Bounds(ws)
		return tk, e
	}
	return q.share(n), e
}

// quotasShort reports whether some quota the plan charges lacks its
// charge at now on the image (a refusal: only a refund or the window's end
// brings tokens back).
func (p *Plan) quotasShort(im *Image, n, now int64) bool {
	for i := range p.quotas {
		q := &p.quotas[i]
		if q.amount <= 0 {
			continue
		}
		if left, _ := im.quotaLeft(q, n, now); left < q.amount {
			return true
		}
	}
	return false
}

// emitQuotas emits the quotas' part of a write on a shard of n, from the
// image the writer holds (nil: none; the write then guesses the window of
// now). push says the write sets no expiry otherwise: a window it starts
// then pushes the expiry to the window's end (see ttl).
func (p *Plan) emitQuotas(k *builder, im *Image, n, now int64, push bool) {
	ttl := int64(0) // the latest expiry a window started here needs
	for i := range p.quotas {
		q := &p.quotas[i]
		if q.amount == 0 {
			continue
		}
		ws, _, ok := im.quota(q)
		if q.at != 0 {
			// A settlement, in the window its acquire charged, or not at
			// all once that window is over (see above).
			if ok && ws != q.at {
				continue
			}
			k.add(q.tk, -q.amount)
			k.add(q.tc, q.amount)
			k.cond(condEq, q.ws, q.at)
			continue
		}
		w, end := q.cal.Bounds(now)
		switch {
		case im != nil && !ok:
			// New to the item: the write the image calls for is under the
			// rf lock (a blind write on an item of other limits fails on
			// the limits hash).
			k.set(q.tk, q.share(n)-q.amount)
			k.set(q.ws, w)
			k.set(q.cp, q.n)
			k.set(q.tc, q.amount)
			k.notExists(q.ws)
			continue
		case !ok || ws >= w:
			if ok {
				w = ws
			}
			k.add(q.tk, -q.amount)
			k.add(q.tc, q.amount)
			k.cond(condEq, q.ws, w)
			if q.amount > 0 {
				k.cond(condGe, q.tk, q.amount)
			}
		default:
			k.set(q.tk, q.share(n)-q.amount)
			k.set(q.ws, w)
			k.add(q.tc, q.amount)
			k.cond(condLt, q.ws, w)
			ttl = max(ttl, expiryAt(end, 0))
		}
		if im != nil && im.hash != p.hash {
			k.set(q.cp, q.n) // a quota whose N changed: from the next window
		}
	}
	if ttl == 0 || !push {
		return
	}
	if seen, has := im.raw.Int(store.AttrTTL); has {
		k.pushTTL(ttl, seen)
	}
}

// quotaExpiry is the earliest expiry (Unix seconds) a write at rf may set:
// an hour after the end of every quota's window of rf. An item deleted
// within a window would start it again at N.
func (p *Plan) quotaExpiry(rf int64) int64 {
	exp := int64(0)
	for i := range p.quotas {
		_, end := p.quotas[i].cal.Bounds(rf)
		exp = max(exp, expiryAt(end, 0))
	}
	return exp
}

// quotaItem adds the quotas to the item a create puts on shard of n:
// shard 0 starts the window of now at its share less the charge (debit:
// the charge only where positive, an adjust's on an expired bucket, whose
// window is over: none), every other shard starts it empty.
func (p *Plan) quotaItem(it store.Item, shard int, n, now int64) {
	for i := range p.quotas {
		q := &p.quotas[i]
		w, _ := q.cal.Bounds(now)
		tk, charged := q.share(n), q.amount
		switch {
		case q.at != 0:
			charged = 0
		case shard != 0:
			tk, charged = 0, 0
		}
		it[q.tk], it[q.ws] = store.Int(tk-charged), store.Int(w)
		it[q.cp], it[q.tc] = store.Int(q.n), store.Int(charged)
	}
}

// removedQuotas returns the attributes of the quotas the image has and the
// plan does not, in name order (an expression is the same on every run).
func (p *Plan) removedQuotas(im *Image) []string {
	var out []string
	for _, a := range slices.Sorted(maps.Keys(im.raw)) {
		name, ok := strings.CutPrefix(a, "q_")
		if name, ok = strings.CutSuffix(name, "_"+bucket.FieldWindow); !ok {
			continue
		}
		if !p.hasQuota(name) {
			q := newQuota(Limit{Name: name})
			out = append(out, q.tk, q.cp, q.ws, q.tc)
		}
	}
	return out
}

func (p *Plan) hasQuota(name string) bool {
	for i := range p.quotas {
		if p.quotas[i].name == name {
			return true
		}
	}
	return false
}

// At returns a copy of p whose quotas settle in the windows the image (the
// item its acquire's write left) shows: the plan of an adjust or an undo.
// A quota the image lacks settles in the window of the settlement's now.
func (p *Plan) At(im *Image) *Plan {
	if len(p.quotas) == 0 {
		return p
	}
	q := p.clone()
	for i := range q.quotas {
		if ws, _, ok := im.quota(&q.quotas[i]); ok {
			q.quotas[i].at = ws
		}
	}
	return q
}

// quotaMoved reports whether a quota this settlement charges has moved on
// to another window on the image.
func (p *Plan) quotaMoved(im *Image) bool {
	for i := range p.quotas {
		q := &p.quotas[i]
		if ws, _, ok := im.quota(q); q.amount != 0 && q.at != 0 && ok && ws != q.at {
			return true
		}
	}
	return false
}

// quotaViews returns the views of the plan's quotas (see Views).
func (p *Plan) quotaViews(im *Image, n, now int64, charge, judge bool) []View {
	var out []View
	for i := range p.quotas {
		q := &p.quotas[i]
		v := View{Name: q.name, Shards: n, Requested: q.amount}
		if im == nil {
			out = append(out, v)
			continue
		}
		left, end := im.quotaLeft(q, n, now)
		if charge {
			left -= q.amount
		}
		v.Remaining = satMul(left, n)
		v.ResetMs = max(0, end-now)
		if judge && left < q.amount {
			v.Exceeded = true
			v.RetryMs = v.ResetMs
			if q.share(n) < q.amount {
				v.RetryMs = -1
			}
		}
		out = append(out, v)
	}
	return out
}

// withoutQuotas returns a copy of p that charges no quota.
func (p *Plan) withoutQuotas() *Plan {
	q := p.clone()
	for i := range q.quotas {
		q.quotas[i].amount = 0
	}
	return q
}

// quotaNeedsShardZero reports whether an acquire of p on a bucket of n
// shards must write shard 0: it charges a quota and the memory has no item
// of shard 0 from the current window of every quota it charges. Another
// shard's window may be started only by a writer whose count is at least
// the count in force when the window began (see above), which shard 0's
// item from within the window shows.
func (p *Plan) quotaNeedsShardZero(m *Memory, n, now int64) bool {
	if n <= 1 || !p.ChargesQuota() {
		return false
	}
	v := m.View(p.Ref, 0)
	for i := range p.quotas {
		q := &p.quotas[i]
		if w, _ := q.cal.Bounds(now); q.amount != 0 && (v.Img == nil || v.At < w) {
			return true
		}
	}
	return false
}
