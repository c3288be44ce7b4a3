package engine

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// Concurrency caps. A cap is at most N leases in flight per bucket: each
// acquire that charges it takes k slots (its amount in tokens), given back
// by the lease's Commit or Rollback, or on their own once the lease's time
// to live (TTL) has passed, without anyone noticing the holder died.
//
// Time is cut into epochs of E = ceil(TTL / 4) ms. The item keeps a ring
// of ringSize counters c_{L}_n{i}, each tagged with the epoch it counts
// (c_{L}_e{i}), and lv, their sum: the live slots. Slot i counts the
// epochs e with e mod ringSize = i. A slot whose tag is ringSize or more
// epochs behind the writer's (it left the ring) is retired by the next
// write that charges the cap in its slot's turn. An acquire at t, in epoch
// e = floor(t / E), charges the slot of e (or of a later tag, a writer
// whose clock runs ahead set) and stays counted until the start of epoch
// e + ringSize: at least 4E >= TTL after t, at most 5E <= TTL + E + 4 ms.
//
//   - the slot's tag is e: ADD n_s k, lv k IF e_s = e AND lv <= share - k.
//     Concurrent acquirers ADD without excluding each other.
//   - some slots left the ring (the image says): the same write retires
//     them: SET n_j 0 (n_s k), e_j to the latest epoch <= e of its turn,
//     ADD lv k - (their counts), IF each retired e_j and n_j is as seen AND
//     lv <= share - k + (their counts). A stale image fails the write,
//     which returns the item for the next one, as for the rates.
//   - the item lacks the cap (one new to the bucket): SET the ring, IF
//     attribute_not_exists(lv).
//
// A release (Commit, Rollback, a cascade's undo) gives k back to the slot
// its acquire charged (cap.at, the epoch): ADD n_p -k, lv -k IF e_p = at,
// and makes no write for the cap once at has left the ring by the
// releaser's clock: the slot was retired, or will be, with the count.
//
// Shards: each of n shards holds share = floor(N / n) slots, and every
// acquire is conditioned on shard_count = :n. A shard a doubling makes
// starts with its share already taken, in the slot of epoch e + 1 of its
// creation (phantoms, counted until epoch e + 6: at least TTL + E), and an
// acquire on a bucket of several shards is made only with an item of
// shard 0 from the last E ms (capNeedsShardZero). A writer that uses a
// count from before a doubling d saw shard 0 before d, so it acquires
// before d + E, at the old share on an old shard, and its lease is dead
// (older than TTL) before d + E + TTL, while every new shard is still full
// of phantoms: the live leases are those of the old shards, n x N/n at
// most. After the phantoms, every live lease was admitted at the new
// count. docs/limiter.md gives the proof.

// ringSize is how many epochs a cap's ring counts.
const ringSize = 5

// conc is one concurrency cap of a bucket write: its attribute names, N
// (slots, undivided), its TTL and the amount to charge (millitokens: k
// slots are k tokens, k x 1000).
type conc struct {
	name     string
	n        int64
	ttl      int64 // ms
	cnt, tag [ringSize]string
	lv, cp   string
	amount   int64
	// at is the epoch a release gives its slots back to; 0 for an
	// acquire.
	at int64
}

// capAttr returns the attribute name c_{limit}_{field} of a
// concurrency cap: n0..n4 (a slot's count), e0..e4 (its epoch), lv (the
// live count), cp (N, undivided).
func capAttr(limit, field string) string { return "c_" + limit + "_" + field }

func newConc(l Limit) conc {
	c := conc{name: l.Name, n: l.Capacity / bucket.MilliPerToken, ttl: l.TTL,
		lv: capAttr(l.Name, "lv"), cp: capAttr(l.Name, "cp")}
	for i := range ringSize {
		c.cnt[i] = capAttr(l.Name, "n"+strconv.Itoa(i))
		c.tag[i] = capAttr(l.Name, "e"+strconv.Itoa(i))
	}
	return c
}

// epochLen is E, the length of an epoch (ms): TTL / 4, rounded up.
func (c *conc) epochLen() int64 { return max(1, (c.ttl+3)/4) }

// epoch returns the epoch of t (Unix ms).
func (c *conc) epoch(t int64) int64 {
	e := c.epochLen()
	if t < 0 {
		return (t - e + 1) / e
	}
	return t / e
}

// slot is the ring's slot of epoch e.
func slot(e int64) int { return int(((e % ringSize) + ringSize) % ringSize) }

// turn returns the latest epoch <= e counted by slot i.
func turn(i int, e int64) int64 { return e - int64((slot(e)-i+ringSize)%ringSize) }

// share is what one of n shards holds of the cap, in slots.
func (c *conc) share(n int64) int64 {
	if n < 1 {
		n = 1
	}
	return c.n / n
}

// slots is what the write charges, in slots (negative: a release).
func (c *conc) slots() int64 { return c.amount / bucket.MilliPerToken }

// ring is a cap as an item stores it.
type ring struct {
	cnt, tag [ringSize]int64
	lv       int64
}

// ring returns the cap's ring as the image shows it; ok is false for an
// item without the cap (or a nil image).
func (im *Image) ring(c *conc) (r ring, ok bool) {
	if im == nil {
		return r, false
	}
	lv, ok := im.raw.Int(c.lv)
	if !ok {
		return r, false
	}
	r.lv = lv
	for i := range ringSize {
		r.cnt[i], _ = im.raw.Int(c.cnt[i])
		r.tag[i], _ = im.raw.Int(c.tag[i])
	}
	return r, true
}

// stale reports whether slot i left the ring at epoch e.
func (r *ring) stale(i int, e int64) bool { return r.tag[i] <= e-ringSize }

// live returns the slots counted at epoch e: lv less the slots that left
// the ring.
func (r *ring) live(e int64) int64 {
	n := r.lv
	for i := range ringSize {
		if r.stale(i, e) {
			n -= r.cnt[i]
		}
	}
	return n
}

// capsShort reports whether some cap the plan charges lacks its slots at
// now on the image (the store's answer, from an item it returned).
func (p *Plan) capsShort(im *Image, n, now int64) bool {
	for i := range p.caps {
		c := &p.caps[i]
		if c.amount <= 0 {
			continue
		}
		r, ok := im.ring(c)
		free := c.share(n)
		if ok {
			free -= r.live(c.epoch(now))
		}
		if free < c.slots() {
			return true
		}
	}
	return false
}

// emitCaps emits the caps' part of a write on a shard of n, from the
// image the writer holds (nil: none; the write then guesses that the slot
// of now is current and nothing left the ring). push says the write sets
// no expiry otherwise: it then pushes the item's expiry past the slot it
// charges (capExpiry), from the image, on the condition that the expiry is
// as the image shows it (a writer with an older image fails and writes
// again from the item returned, which the push then covers).
func (p *Plan) emitCaps(k *builder, im *Image, n, now int64, push bool) {
	if seen, has := im.ttlSeen(); push && has && p.ChargesCap() {
		k.pushTTL(p.capExpiry(now), seen)
		k.pin = true
	}
	for i := range p.caps {
		c := &p.caps[i]
		k1 := c.slots()
		if k1 == 0 {
			continue
		}
		e := c.epoch(now)
		r, ok := im.ring(c)
		if c.at != 0 {
			// A release, to the slot its acquire charged, while that slot
			// is in the ring (see above).
			s := slot(c.at)
			if e >= c.at+ringSize || (ok && r.tag[s] != c.at) || (im != nil && !ok) {
				continue
			}
			k.add(c.cnt[s], k1)
			k.add(c.lv, k1)
			k.cond(condEq, c.tag[s], c.at)
			continue
		}
		s := slot(e)
		switch {
		case im != nil && !ok:
			// New to the item: every slot's count and epoch, the charge in
			// the slot of now (an expression sets a name once).
			for j := range ringSize {
				cnt := int64(0)
				if j == s {
					cnt = k1
				}
				k.set(c.cnt[j], cnt)
				k.set(c.tag[j], turn(j, e))
			}
			k.set(c.lv, k1)
			k.set(c.cp, c.n)
			k.notExists(c.lv)
			continue
		case !ok:
			// No image: the slot of now is current, nothing to retire.
			k.add(c.cnt[s], k1)
			k.add(c.lv, k1)
			k.cond(condEq, c.tag[s], e)
			k.cond(condLe, c.lv, c.share(n)-k1)
			continue
		}
		retired := int64(0)
		for j := range ringSize {
			if !r.stale(j, e) {
				continue
			}
			retired += r.cnt[j]
			k.set(c.tag[j], turn(j, e))
			k.cond(condEq, c.tag[j], r.tag[j])
			k.cond(condEq, c.cnt[j], r.cnt[j])
			if j == s {
				k.set(c.cnt[j], k1)
			} else {
				k.set(c.cnt[j], 0)
			}
		}
		if !r.stale(s, e) {
			// Current (or set ahead by a writer whose clock runs ahead:
			// the slot is then counted longer).
			k.add(c.cnt[s], k1)
			k.cond(condEq, c.tag[s], r.tag[s])
		}
		k.add(c.lv, k1-retired)
		k.cond(condLe, c.lv, c.share(n)-k1+retired)
		if im.hash != p.hash {
			k.set(c.cp, c.n) // N changed: the share is the plan's from now on
		}
	}
}

// capItem adds the caps to the item a create puts on shard of n: shard 0
// starts with the charge in the slot of now; every other shard starts with
// its share taken by phantoms in the slot of the next epoch (see above),
// so that a doubling adds no slot while leases of the old shards live.
func (p *Plan) capItem(it store.Item, shard int, n, now int64) {
	for i := range p.caps {
		c := &p.caps[i]
		e := c.epoch(now)
		for j := range ringSize {
			it[c.cnt[j]], it[c.tag[j]] = store.Int(0), store.Int(turn(j, e))
		}
		lv := int64(0)
		switch {
		case shard != 0:
			lv = c.share(n)
			it[c.tag[slot(e+1)]] = store.Int(e + 1)
			it[c.cnt[slot(e+1)]] = store.Int(lv)
		case c.at == 0 && c.amount > 0:
			lv = c.slots()
			it[c.cnt[slot(e)]] = store.Int(lv)
		}
		it[c.lv], it[c.cp] = store.Int(lv), store.Int(c.n)
	}
}

// capExpiry is the earliest expiry (Unix seconds) a write at rf may set:
// an hour after the last slot of rf's ring leaves it (a phantom of the
// epoch after rf's included). An item deleted before would forget live
// leases.
func (p *Plan) capExpiry(rf int64) int64 {
	exp := int64(0)
	for i := range p.caps {
		c := &p.caps[i]
		exp = max(exp, expiryAt((c.epoch(rf)+ringSize+1)*c.epochLen(), 0))
	}
	return exp
}

// ttlSeen returns the image's expiry (false: none, or no image).
func (im *Image) ttlSeen() (int64, bool) {
	if im == nil {
		return 0, false
	}
	return im.raw.Int(store.AttrTTL)
}

// removedCaps returns the attributes of the caps the image has and the
// plan does not, in name order.
func (p *Plan) removedCaps(im *Image) []string {
	var out []string
	for _, a := range slices.Sorted(maps.Keys(im.raw)) {
		name, ok := strings.CutPrefix(a, "c_")
		if name, ok = strings.CutSuffix(name, "_lv"); !ok {
			continue
		}
		if !p.hasCap(name) {
			c := newConc(Limit{Name: name})
			out = append(out, c.lv, c.cp)
			out = append(out, c.cnt[:]...)
			out = append(out, c.tag[:]...)
		}
	}
	return out
}

func (p *Plan) hasCap(name string) bool {
	for i := range p.caps {
		if p.caps[i].name == name {
			return true
		}
	}
	return false
}

// Settling returns the plan that settles what p's acquire charged: its
// quotas in the windows the image (the item the acquire's write left)
// shows (At), its caps in the slots the write charged at (the now of the
// write, by the writer's clock).
func (p *Plan) Settling(im *Image, at int64) *Plan {
	q := p.At(im)
	if len(q.caps) == 0 {
		return q
	}
	if q == p {
		q = p.clone()
	}
	for i := range q.caps {
		c := &q.caps[i]
		if r, ok := im.ring(c); ok {
			c.at = r.tag[slot(c.epoch(at))]
		}
	}
	return q
}

// capMoved reports whether a cap this release gives back to has left its
// slot on the image.
func (p *Plan) capMoved(im *Image) bool {
	for i := range p.caps {
		c := &p.caps[i]
		if r, ok := im.ring(c); c.amount != 0 && c.at != 0 && (!ok || r.tag[slot(c.at)] != c.at) {
			return true
		}
	}
	return false
}

// withoutCaps returns a copy of p that charges no cap.
func (p *Plan) withoutCaps() *Plan {
	q := p.clone()
	for i := range q.caps {
		q.caps[i].amount = 0
	}
	return q
}

// releasesAt reports whether the plan writes anything at now: an amount
// not 0, a cap's release only while its slot is in the ring.
func (p *Plan) releasesAt(now int64) bool {
	for i := range p.specs {
		if p.specs[i].amount != 0 {
			return true
		}
	}
	if p.ChargesQuota() {
		return true
	}
	for i := range p.caps {
		c := &p.caps[i]
		if c.amount != 0 && (c.at == 0 || c.epoch(now) < c.at+ringSize) {
			return true
		}
	}
	return false
}

// ChargesCap reports whether the plan charges or releases a concurrency
// cap. Reservation pools never hold one.
func (p *Plan) ChargesCap() bool {
	for i := range p.caps {
		if p.caps[i].amount != 0 {
			return true
		}
	}
	return false
}

// capNeedsShardZero reports whether an acquire of p on a bucket of n
// shards must write shard 0: it charges a cap and the memory has no item
// of shard 0 from the last epoch of every cap it charges (see above).
func (p *Plan) capNeedsShardZero(m *Memory, n, now int64) bool {
	if n <= 1 || !p.ChargesCap() {
		return false
	}
	v := m.View(p.Ref, 0)
	for i := range p.caps {
		c := &p.caps[i]
		if c.amount > 0 && (v.Img == nil || v.At <= now-c.epochLen()) {
			return true
		}
	}
	return false
}

// capViews returns the views of the plan's caps: Remaining is the free
// slots (x n), ResetMs the time until the oldest counted slot leaves the
// ring, RetryMs (judged) the time until enough have left it.
func (p *Plan) capViews(im *Image, n, now int64, charge, judge bool) []View {
	var out []View
	for i := range p.caps {
		c := &p.caps[i]
		v := View{Name: c.name, Shards: n, Requested: c.amount}
		r, ok := im.ring(c)
		if im == nil {
			out = append(out, v)
			continue
		}
		e := c.epoch(now)
		live := int64(0)
		if ok {
			live = r.live(e)
		}
		if charge && c.amount > 0 {
			live += c.slots()
		}
		free := c.share(n) - live
		v.Remaining = satMul(free*bucket.MilliPerToken, n)
		v.ResetMs, v.RetryMs = c.waits(&r, ok, e, now, c.share(n)-c.slots())
		if judge && free < c.slots() {
			v.Exceeded = true
			if c.share(n) < c.slots() {
				v.RetryMs = -1
			}
		} else {
			v.RetryMs = 0
		}
		out = append(out, v)
	}
	return out
}

// waits returns the time until the oldest counted slot leaves the ring
// and the time until the live count is at most most, by expiry alone (a
// release may come sooner).
func (c *conc) waits(r *ring, ok bool, e, now, most int64) (reset, retry int64) {
	if !ok {
		return 0, 0
	}
	live := r.live(e)
	reset, retry = -1, -1
	if live <= most {
		retry = 0
	}
	for f := e + 1; f <= e+2*ringSize && (reset < 0 || retry < 0); f++ {
		left := r.live(f)
		at := max(0, f*c.epochLen()-now)
		if reset < 0 && left < live {
			reset = at
		}
		if retry < 0 && left <= most {
			retry = at
		}
	}
	return max(reset, 0), retry
}

// capHash mixes the caps (name, N, TTL) into a hash of the other limits;
// without caps it is h unchanged.
func capHash(h uint64, cs []conc) uint64 {
	mix := func(b byte) { h ^= uint64(b); h *= 1099511628211 }
	for _, c := range cs {
		mix('c')
		for i := 0; i < len(c.name); i++ {
			mix(c.name[i])
		}
		mix(0)
		for _, v := range [...]int64{c.n, c.ttl} {
			for j := 0; j < 8; j++ {
				mix(byte(uint64(v) >> (8 * j)))
			}
		}
	}
	return h
}
