package engine

import (
	"maps"
	"math/bits"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// Calendar quotas. A quota is N millitokens per calendar window (a day, a
// week or a month in a time zone), kept in the bucket's item beside the
// rates, in the attributes q_{L}_{tk,cp,ws,tc}: what is left in the
// window, N (undivided), the window's start (Unix ms) and the total
// consumed; shard 0 also keeps q_{L}_sc, the shard count it started its
// window at (see Shards). Every write that charges a quota carries its
// part, all or nothing with the rates:
//
//   - the item is in the window of now (or a later one, which a writer
//     whose clock runs ahead started): ADD tk -c, tc +c, IF ws = :seen AND
//     tk >= c. Concurrent writers ADD without excluding each other.
//   - the item is in an earlier window: SET tk = share - c, ws = :w, ADD
//     tc +c, IF ws < :w (see Shards for share and w). Exactly one writer
//     starts the window; the others fail, see the new window in the item
//     they get back, and ADD.
//
// The writer knows which from its image: a wrong guess fails the write,
// and the item it returns decides the next write, as for the rates. An
// item without the quota (a quota new to the bucket) gets it with SET IF
// attribute_not_exists(ws).
//
// Shards: shard 0 starts a window at the count n0 its write is conditional
// on, with floor(N / n0), and stores n0 (sc) beside the window. Another
// shard k starts only the window its writer's last image of shard 0 shows
// (the window of now or a later one; a writer without one writes shard 0
// first, see Charge.nextShard and Charge.informed), at that image's n0:
// floor(N / n0) when k < n0, nothing otherwise; a shard created then
// starts that window the same way (see quotaItem), one at or above n0
// empty in the window before. Each shard starts a window at most once (IF
// ws < :w), so the shards together start every window with at most n0 ×
// floor(N / n0) <= N, whatever the clocks and the doublings: only shard
// 0's item says what a window's shares are. (Sizing by the writer's own
// count instead let a writer whose count was stale, or whose clock was
// behind when it made a shard, start a window on more shards, or at a
// larger share, than shard 0 did.)
//
// Transfers: a shard k >= n0 (made by a doubling within the window)
// starts it only with tokens moved from a shard that holds it, the
// donor, in one transaction (TransactWrite; see Charge.write): the
// acquire's write on k starts the window at x less its charge (SET tk =
// x - c, ws = :w0, ADD tc +c, IF ws < :w0, or attribute_not_exists(ws)
// on an item without the quota), and the donor gives x (ADD tk -x IF ws
// = :w0 AND tk >= 1.5x), x half what the writer's image of the donor
// shows. The donor is the nearest of the shards k split from (k less its
// highest power of two, and so on) that the writer's image shows in the
// window with twice the charge, else shard 0 (see Plan.chooseDonor).
// Tokens move; none are made, so the bound above holds, with no clock:
// the transfer lands only if the donor is in the window and holds x, and
// k starts the window once. A transaction returns no item: a landed one
// is followed by a read of k and the donor; a cancelled one by the item
// of the part whose condition failed (k's: another writer started the
// window there, go on as after any failed write; the donor's: learn it,
// and write again with what it can give, or try another shard). A bucket
// does not double within a window while a shard at or above n0 has not
// started it, by the writer's images (see Plan.quotaUnstarted): another
// doubling would add shards that hold nothing either.
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
	name               string
	shadow             bool // see Limit.Shadow
	n                  int64
	cal                bucket.Calendar
	tk, cp, ws, tc, sc string
	amount             int64
	// at pins a settlement to the window its acquire charged (its start,
	// Unix ms); 0 for an acquire, which charges the window of now or the
	// one stored.
	at int64
	// shard is the shard the write goes to (see Plan.forShard); on one
	// other than 0, w0 and n0 are the window the writer's last image of
	// shard 0 shows (its start, Unix ms; 0: none) and the count shard 0
	// started it at.
	shard  int
	w0, n0 int64
	// fund is what a transfer from shard donor brings a shard at or above
	// n0 that has not started the window w0 (0: none; see Transfers).
	fund  int64
	donor int
}

// fieldShards is the attribute field of the shard count shard 0 started a
// quota's window at.
const fieldShards = "sc"

func newQuota(l Limit) quota {
	n := l.Name
	return quota{name: n, n: l.Capacity, cal: l.Calendar, shadow: l.Shadow,
		tk: bucket.QuotaAttrName(n, bucket.FieldTokens), cp: bucket.QuotaAttrName(n, bucket.FieldCapacity),
		ws: bucket.QuotaAttrName(n, bucket.FieldWindow), tc: bucket.QuotaAttrName(n, bucket.FieldTotalConsumed),
		sc: bucket.QuotaAttrName(n, fieldShards)}
}

// share is what one of n shards holds of the quota per window.
func (q *quota) share(n int64) int64 {
	return bucket.Limit{Capacity: q.n, Burst: q.n}.PerShard(n).Capacity
}

// opening returns the window a write at now on a shard of n, whose item is
// in an earlier window, starts (its start, Unix ms) and the share it
// starts it at (see Shards above). ok is false on a shard other than 0
// when the writer's image of shard 0 shows no window from now on: the
// writer must see shard 0 first.
func (q *quota) opening(n, now int64) (w, share int64, ok bool) {
	w, _ = q.cal.Bounds(now)
	switch {
	case q.shard == 0:
		return w, q.share(n), true
	case q.w0 < w:
		return w, 0, false
	case int64(q.shard) >= q.n0:
		return q.w0, q.fund, true // a shard made after shard 0 started the window: what a transfer brings
	}
	return q.w0, q.share(q.n0), true
}

// forShard returns p for a write on shard, with what the writer's last
// image of shard 0 (im0, nil: none) says of the quotas' windows (see
// quota.opening), and the donor of a transfer to the shard, chosen from
// the writer's images of the other shards (imOf; nil: no transfer, see
// Transfers); p itself when it has no quota.
func (p *Plan) forShard(shard int, im0 *Image, imOf func(int) *Image) *Plan {
	if len(p.quotas) == 0 {
		return p
	}
	q := p.clone()
	for i := range q.quotas {
		q.quotas[i].onShard(shard, im0)
	}
	if imOf != nil {
		q.chooseDonor(shard, im0, imOf)
	}
	return q
}

// chooseDonor sets the donor of a transfer to shard and what it brings
// each quota that shard holds nothing of (see Transfers): the nearest of
// the shards it split from (shard k split from k less the highest power of
// two in k, and so on down to shard 0) whose image shows each such
// quota's window with at least twice the charge, or shard 0. The transfer
// is half what the donor's image shows.
func (p *Plan) chooseDonor(shard int, im0 *Image, imOf func(int) *Image) {
	needs := false
	for i := range p.quotas {
		needs = needs || p.quotas[i].empty()
	}
	if !needs {
		return
	}
	d, im := shard, im0
	for d != 0 {
		d = d &^ (1 << (bits.Len(uint(d)) - 1))
		if im = im0; d != 0 {
			im = imOf(d)
		}
		if d == 0 || p.canFund(im) {
			break
		}
	}
	for i := range p.quotas {
		q := &p.quotas[i]
		if ws, tk, ok := im.quota(q); q.empty() && ok && ws == q.w0 && tk > 0 {
			q.fund, q.donor = tk/2, d
		}
	}
}

// empty reports whether q is an acquire's charge on a shard that holds
// nothing of the window shard 0 started (at or above the count it started
// it at): only a transfer starts it there.
func (q *quota) empty() bool {
	return q.amount > 0 && q.at == 0 && q.shard != 0 && q.w0 != 0 && q.n0 >= 1 && int64(q.shard) >= q.n0
}

// canFund reports whether im, a donor's image, shows every quota that
// needs a transfer in its window with at least twice its charge.
func (p *Plan) canFund(im *Image) bool {
	for i := range p.quotas {
		q := &p.quotas[i]
		if !q.empty() {
			continue
		}
		if ws, tk, ok := im.quota(q); !ok || ws != q.w0 || tk/2 < q.amount {
			return false
		}
	}
	return true
}

// transfers reports whether a write at now from im, the image of the
// plan's shard, starts a quota's window there by a transfer (see
// Transfers): the shard holds nothing of the window shard 0 started, the
// donor can give it the charge, and the image shows an earlier window
// (or none).
func (q *quota) transfers(im *Image, now int64) bool {
	if !q.empty() || q.fund < q.amount || im == nil {
		return false
	}
	w, _ := q.cal.Bounds(now)
	ws, _, ok := im.quota(q)
	return q.w0 >= w && (!ok || ws < w)
}

// transfer returns the donor's part of a write at now from im (see
// Transfers): it takes from the donor what the write starts the window
// at, half of what the writer's image of the donor shows, on the
// condition that the donor is in that window and holds at least one and a
// half times that: it keeps a third of what it holds at least, however
// old the writer's image of it, and an image a little behind the
// donor's recent charges still serves. ok is false when the write starts
// no window by a transfer; donor is the donor's shard.
func (p *Plan) transfer(im *Image, now int64) (in store.UpdateInput, donor int, ok bool) {
	ex, err := build(func(k *builder) {
		for i := range p.quotas {
			q := &p.quotas[i]
			if !q.transfers(im, now) {
				continue
			}
			ok, donor = true, q.donor
			k.add(q.tk, -q.fund)
			k.cond(condEq, q.ws, q.w0)
			k.cond(condGe, q.tk, q.fund+q.fund/2)
		}
	})
	if !ok || err != nil {
		return in, 0, false
	}
	return store.UpdateInput{Key: p.Ref.WithShard(donor).Key(), Expr: ex, ReturnOldOnConditionFailure: true}, donor, true
}

// funded returns the image of the shard a transfer started a window on,
// from raw, its item read after the transaction (img, decoded): as read,
// unless a transferred quota's window there is no longer the one the
// transfer started (it ended between the transaction and the read, and
// another writer started the next). The image says the transfer's window
// then: a lease settles in the window its acquire charged (see At).
func (p *Plan) funded(raw store.Item, img *Image) *Image {
	var pinned store.Item
	for i := range p.quotas {
		q := &p.quotas[i]
		if ws, _, ok := img.quota(q); q.empty() && q.fund >= q.amount && ok && ws != q.w0 {
			if pinned == nil {
				pinned = maps.Clone(raw)
			}
			pinned[q.ws] = store.Int(q.w0)
		}
	}
	if pinned == nil {
		return img
	}
	if out, err := Decode(pinned); err == nil && out != nil {
		return out
	}
	return img
}

func (q *quota) onShard(shard int, im0 *Image) {
	q.shard, q.w0, q.n0 = shard, 0, 0
	if shard != 0 {
		q.w0, q.n0 = im0.quotaStart(q)
	}
}

// quotaStart returns the window shard 0's image shows (its start, Unix
// ms; 0 for none) and the count shard 0 started it at.
func (im *Image) quotaStart(q *quota) (ws, n int64) {
	ws, _, ok := im.quota(q)
	if !ok {
		return 0, 0
	}
	n, _ = im.raw.Int(q.sc)
	return ws, n
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
// balance while the stored window is current (or later), else the share
// the acquire's write would start a window at (see opening).
func (im *Image) quotaLeft(q *quota, n, now int64) (left, end int64) {
	w, _ := q.cal.Bounds(now)
	if ws, tk, ok := im.quota(q); ok && ws >= w {
		_, e := q.cal.Bounds(ws)
		return tk, e
	}
	w, share, _ := q.opening(n, now)
	_, e := q.cal.Bounds(w)
	return share, e
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

// quotaSpent reports whether the image shows a quota the plan charges
// short of its charge in the window of now (or a later one) that the item
// is in. Only the window's end or a refund to that window brings the quota
// back, and the process learns of its own refunds from their writes: it
// refuses such acquires without a write until the window ends, however
// old its image. A refund another process makes meanwhile (a negative
// Adjust, a Rollback) serves the processes that have not seen the window
// spent; this one sees it at its first write after the window's end, when
// it no longer matters.
func (p *Plan) quotaSpent(im *Image, now int64) bool {
	for i := range p.quotas {
		q := &p.quotas[i]
		if q.amount <= 0 {
			continue
		}
		w, _ := q.cal.Bounds(now)
		if ws, tk, ok := im.quota(q); ok && ws >= w && tk < q.amount {
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
		w, _ := q.cal.Bounds(now)
		ow, share, open := q.opening(n, now)
		open = open && share >= q.amount // else refused (quotasShort): a write that cannot land
		switch {
		case im != nil && !ok && open:
			// New to the item: the write the image calls for is under the
			// rf lock (a blind write on an item of other limits fails on
			// the limits hash).
			k.set(q.tk, share-q.amount)
			k.set(q.ws, ow)
			k.set(q.cp, q.n)
			k.set(q.tc, q.amount)
			q.setShards(k, n)
			k.notExists(q.ws)
			continue
		case !ok || ws >= w || !open:
			if ok && ws >= w {
				w = ws
			}
			k.add(q.tk, -q.amount)
			k.add(q.tc, q.amount)
			k.cond(condEq, q.ws, w)
			if q.amount > 0 {
				k.cond(condGe, q.tk, q.amount)
			}
		default:
			k.set(q.tk, share-q.amount)
			k.set(q.ws, ow)
			k.add(q.tc, q.amount)
			q.setShards(k, n)
			k.cond(condLt, q.ws, ow)
			_, end := q.cal.Bounds(ow)
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

// setShards stores, on shard 0, the count n a write that starts a window
// sizes its share at (the write is conditional on the shard count n).
func (q *quota) setShards(k *builder, n int64) {
	if q.shard == 0 {
		k.set(q.sc, n)
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

// heldExpiry is the earliest expiry (Unix seconds) a write that leaves
// the item im shows may set: an hour after the end of every quota's
// window the image shows the item in, or, on a shard other than 0, that
// shard 0 shows (the window the write may start there). Either may be
// later than the window of the write's rf: a process whose clock is behind
// writes an item a process whose clock is ahead moved on to the next
// window, and an expiry set from its rf alone would let the item be
// deleted, and its window started again at the share, an hour into it.
func (p *Plan) heldExpiry(im *Image) int64 {
	exp := int64(0)
	for i := range p.quotas {
		q := &p.quotas[i]
		ws := q.w0
		if seen, _, ok := im.quota(q); ok {
			ws = max(ws, seen)
		}
		_, end := q.cal.Bounds(ws) // 0 (none): a window long over
		exp = max(exp, expiryAt(end, 0))
	}
	return exp
}

// quotaItem adds the quotas to the item a create puts on shard of n:
// shard 0 starts the window of now at its share less the charge (debit:
// the charge only where positive, an adjust's on an expired bucket, whose
// window is over: none). Every other shard charges nothing. When the
// writer's image of shard 0 shows the window of now, the shard starts it
// at the share shard 0 started it at if it is below that count, empty
// otherwise: a missing shard never started that window (a shard that
// starts a window lives until an hour after its end, see quotaExpiry, as
// the created item does), so it starts it at most once, as every shard
// does. Otherwise it is created empty in the earlier of the two windows,
// and a later write starts the next one (see opening).
func (p *Plan) quotaItem(it store.Item, shard int, n, now int64) {
	for i := range p.quotas {
		q := &p.quotas[i]
		w, _ := q.cal.Bounds(now)
		tk, charged := q.share(n), q.amount
		switch {
		case shard != 0 && q.w0 != 0:
			tk, charged = 0, 0
			switch {
			case q.w0 == w && int64(shard) < q.n0:
				tk = q.share(q.n0)
			case q.w0 == w:
				// Nothing of it: made in the window before, a transfer
				// starts it (see Transfers).
				w, _ = q.cal.Bounds(w - 1)
			}
			w = min(w, q.w0)
		case shard != 0:
			tk, charged = 0, 0
		case q.at != 0:
			charged = 0
		}
		it[q.tk], it[q.ws] = store.Int(tk-charged), store.Int(w)
		it[q.cp], it[q.tc] = store.Int(q.n), store.Int(charged)
		if shard == 0 {
			it[q.sc] = store.Int(n)
		}
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
			out = append(out, q.tk, q.cp, q.ws, q.tc, q.sc)
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

// quotaUnstarted reports whether, by the memory's images, a shard at or
// above the count shard 0 started the window of now of a quota the plan
// charges has not started it (or is unknown): a doubling then waits for
// the transfers that start it there (see Transfers). Doubling again would
// only add shards that hold nothing of the window either.
func (p *Plan) quotaUnstarted(m *Memory, n, now int64) bool {
	if n <= 1 || !p.ChargesQuota() {
		return false
	}
	im0 := m.View(p.Ref, 0).Img
	for i := range p.quotas {
		q := &p.quotas[i]
		w, _ := q.cal.Bounds(now)
		ws, n0 := im0.quotaStart(q)
		if q.amount <= 0 || q.shadow || ws < w || n0 < 1 {
			continue
		}
		for k := n0; k < n; k++ {
			if kws, _, ok := m.View(p.Ref, int(k)).Img.quota(q); !ok || kws < ws {
				return true
			}
		}
	}
	return false
}

// quotaNeedsShardZero reports whether an acquire of p on a bucket of n
// shards must write shard 0: it charges a quota and the memory's image of
// shard 0 shows a window before now's of some quota it charges (or none).
// Another shard starts only the window shard 0 shows, at the count shard
// 0 started it at (see above).
func (p *Plan) quotaNeedsShardZero(m *Memory, n, now int64) bool {
	if n <= 1 || !p.ChargesQuota() {
		return false
	}
	im0 := m.View(p.Ref, 0).Img
	for i := range p.quotas {
		q := &p.quotas[i]
		w, _ := q.cal.Bounds(now)
		if ws, _ := im0.quotaStart(q); q.amount != 0 && ws < w {
			return true
		}
	}
	return false
}
