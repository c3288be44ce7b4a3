package engine

import (
	"math"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Image is a bucket item as decoded from the store: the item a write
// returned (ALL_NEW), or the one a failed write returned (ALL_OLD).
type Image struct {
	raw        store.View
	rf         int64
	hash       int64
	shardCount int64
	comp       bucket.Composite
	buf        [4]bucket.Named // comp's limits, up to four (saves an allocation)
	// pt is the plan template decodeFor decoded the image for (nil: none,
	// or more limits than the arrays hold). Its spec at position i then
	// has its limit in comp.Limits[specAt[i]] and its guard fields (as
	// state returns them) in guards[i]: state need not look for them.
	pt     *planTemplate
	specAt [4]int8
	// holds is set when the item has a hold generation (attrGen): some
	// process reserved from it (see hold.go); gen and genAt are the
	// generation and when it began (ms). Without, no limit has a hold.
	// (Beside specAt, in the same word: a lease holds an Image, and every
	// acquire allocates one.)
	holds      bool
	guards     [4]guard
	gen, genAt int64
}

// guard is a limit's fl and fh.
type guard struct{ fl, fh int64 }

// known reports whether s is a spec of the plan template the image was
// decoded for (specAt and guards hold its limit's place and guards).
func (im *Image) known(s *spec) bool { return im.pt != nil && s.tmpl == im.pt }

// Decode decodes a bucket item; a nil item decodes to a nil Image.
func Decode(it store.View) (*Image, error) {
	if it == nil || it.Len() == 0 {
		return nil, nil
	}
	comp, err := bucket.Decode(it.Numbers())
	if err != nil {
		return nil, err
	}
	im := &Image{raw: it, rf: comp.Refill, comp: comp, shardCount: 1}
	im.hash, _ = it.Int(keys.AttrLimitsHash)
	if n, ok := it.Int(keys.AttrShardCount); ok && n >= 1 {
		im.shardCount = n
	}
	if g, ok := it.Int(attrGen); ok {
		im.holds, im.gen = true, g
		im.genAt, _ = it.Int(attrGenAt)
	}
	return im, nil
}

// capOf returns the cap of s's limit l on this shard: its burst less what
// pools hold of it (millitokens, see hold.go).
func (im *Image) capOf(s *spec, l bucket.Limit) int64 { return max(0, l.Burst-im.hold(s)) }

// hold returns what pools hold of s's limit on this shard (millitokens,
// 0 without holds).
func (im *Image) hold(s *spec) int64 {
	if !im.holds || s.hidden {
		return 0
	}
	v, _ := im.raw.Int(s.hd)
	return max(v, 0)
}

// ShardCount returns the shard count the item records (1 when absent).
func (im *Image) ShardCount() int64 { return im.shardCount }

// writes returns the shard's count of write units (the hidden limit's
// total consumed), in millitokens. An image decoded for a plan template
// has the hidden limit where the template's last spec says (every plan
// carries it last): no search by name. The memory reads it on every
// write.
func (im *Image) writes() (int64, bool) {
	if im.pt != nil {
		return im.comp.Limits[im.specAt[len(im.pt.specs)-1]].TotalConsumed, true
	}
	st, ok := im.comp.Get(keys.HiddenLimit)
	return st.TotalConsumed, ok
}

// consumed returns a limit's total consumed, in millitokens.
func (im *Image) consumed(s *spec) (int64, bool) {
	st, ok := im.comp.Get(s.name)
	return st.TotalConsumed, ok
}

// state returns the stored state of s's limit, with the stored (original)
// limit divided for the image's shard count, and its guard fields.
func (im *Image) state(s *spec) (st bucket.State, fl, fh int64, ok bool) {
	i := im.index(s)
	if i < 0 {
		return st, 0, 0, false
	}
	st = im.comp.Limits[i].State
	if !s.hidden {
		st.Limit = st.Limit.PerShard(im.shardCount)
		// The cap is the burst less what pools hold (see hold.go).
		st.Limit.Burst = im.capOf(s, st.Limit)
	}
	if im.known(s) {
		return st, im.guards[s.pos].fl, im.guards[s.pos].fh, true
	}
	fl, fh = guardsOf(im.raw, s)
	return st, fl, fh, true
}

// index returns the position of s's limit in comp.Limits (-1 when
// absent).
func (im *Image) index(s *spec) int {
	if im.known(s) {
		return int(im.specAt[s.pos])
	}
	for i := range im.comp.Limits {
		if im.comp.Limits[i].Name == s.name {
			return i
		}
	}
	return -1
}

// guardsOf reads the guard fields of s's limit from an item.
func guardsOf(it store.View, s *spec) (fl, fh int64) {
	return numbersOf(it).guards(s)
}

// guards is guardsOf.
func (f numbers) guards(s *spec) (fl, fh int64) {
	fl, okl := f.num(s.fl)
	fh, okh := f.num(s.fh)
	return guarded(fl, fh, okl && okh)
}

// guardsAt is guards of the spec whose fields begin at field k.
func (f numbers) guardsAt(k int, s *spec) (fl, fh int64) {
	fl, okl := f.field(k+fieldFullLo, s.fl)
	fh, okh := f.field(k+fieldFullHi, s.fh)
	return guarded(fl, fh, okl && okh)
}

// guarded returns the guards read (ok: both were there), or, for an item
// written by a layout without guards, guards that say nothing.
func guarded(fl, fh int64, ok bool) (int64, int64) {
	if !ok {
		return math.MinInt64, math.MaxInt64
	}
	return fl, fh
}

// matches reports whether the image was written for exactly this plan's
// limits and shard count: the blind paths are valid only then.
func (im *Image) matches(p *Plan, n int64) bool {
	return im.hash == p.hash && im.shardCount == n && len(im.comp.Limits) == len(p.specs)
}

// projected returns what limit s holds at now under this plan (a limit new
// to the item starts full), per shard of n, and the time refill counts
// from: a writer with a faster clock may have moved rf past our now, and
// nothing refills before rf.
func (im *Image) projected(s *spec, n, now int64) (st bucket.State, rf int64) {
	l := s.perShard(n)
	old, _, _, ok := im.state(s)
	if !ok {
		return bucket.State{Limit: l, Tokens: l.Burst}, now
	}
	l.Burst = im.capOf(s, l)
	eff := min(old.Effective(im.rf, now), l.Burst)
	return bucket.State{Limit: l, Tokens: eff}, max(im.rf, now)
}

// fullBy reports whether, judging by this (possibly stale) image, every
// application limit is full at now at n shards: the blind full write is
// then likely to succeed. A limit whose cap (the burst less what pools
// hold, see hold.go) is below the charge is not full for it: the full
// write would set its balance to the cap less the charge, below zero.
// Pools can hold that much when many processes reserve, or more than a
// shard's share of the burst once a doubling has halved it.
func (im *Image) fullBy(p *Plan, n, now int64) bool {
	for i := range p.specs {
		s := &p.specs[i]
		_, _, fh, ok := im.state(s)
		if !ok || (fh > now && !s.hidden) {
			return false
		}
		if !s.hidden && im.capOf(s, s.perShard(n)) < s.amount {
			return false
		}
	}
	return im.rf < now // the full write moves rf forward (see emitFull)
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

// baseAttrs is how many attributes a bucket item has besides its limits'
// eight each: PK, SK, entity_id, resource, shard, shard_count, lh, rf, ttl
// and the four index keys.
const baseAttrs = 13

// decodeFor decodes an item written for plan p the quick way: by looking
// up the plan's attributes, when the item has exactly those (no limit
// that the plan does not know); anything else is decoded in full. The
// image is built in dst when dst is not nil (it must be a zero Image),
// else allocated; the full decoder always allocates.
func decodeFor(p *Plan, it store.View, dst *Image) (*Image, error) {
	return decodeQuick(p, it, dst, decodeAny)
}

// decodeWritten is decodeFor for the item a successful charge write of
// plan p returned (ALL_NEW). When that item's limits hash is the plan's,
// its limit fields (capacity, burst, refill amount and period: the
// parameters the hash covers) are the plan's, and are taken from the plan
// instead of being looked up and checked: every charge write either
// conditions on the hash it leaves (lh = the plan's hash: the consumption
// and full writes, the normal write of the same limits, a reservation)
// and leaves those fields as they were, or sets them with it (a create, a
// normal write that brings the item to the plan's limits), and every
// write that sets the hash sets the fields it covers. The fields the
// write changes (balance, total consumed, guards, rf) are read and
// checked as decodeFor does. An item whose hash differs, or an item of a
// failed write, is decoded as decodeFor decodes it.
func decodeWritten(p *Plan, it store.View, dst *Image) (*Image, error) {
	return decodeQuick(p, it, dst, decodeWrite)
}

// decodeKind says what a quick decode knows of the item: nothing
// (decodeFor), that a successful charge write of the plan returned it
// (decodeWritten), or that a successful write conditional on the plan's
// limits hash that leaves the hash as it is returned it (decodeHashed: a
// speculative write). The item then holds the plan's hash, which is not
// looked up (one lookup by name fewer on the hot path), and its limit
// fields are taken from the plan as decodeWritten takes them.
type decodeKind uint8

const (
	decodeAny decodeKind = iota
	decodeWrite
	decodeHashed
)

// decodeQuick is decodeFor, decodeWritten or decodeHashed, as kind says.
func decodeQuick(p *Plan, it store.View, dst *Image, kind decodeKind) (*Image, error) {
	if it == nil || it.Len() == 0 {
		return nil, nil
	}
	if it.Len() != baseAttrs+8*len(p.specs) {
		return Decode(it)
	}
	fast := p.pt != nil && len(p.specs) <= len(Image{}.specAt)
	f := numbersFor(it, p.pt)
	rf, ok := f.field(fieldRefill, attrRefill)
	if !ok {
		return Decode(it)
	}
	im := dst
	if im == nil {
		im = new(Image)
	}
	im.raw, im.rf, im.shardCount = it, rf, 1
	if kind == decodeHashed {
		im.hash = p.hash
	} else {
		im.hash, _ = f.field(fieldHash, attrLimitsHash)
	}
	ownLimits := kind != decodeAny && im.hash == p.hash // see decodeWritten
	if n, ok := f.field(fieldShardCount, attrShardCount); ok && n >= 1 {
		im.shardCount = n
	}
	im.comp.Refill = rf
	if len(p.specs) <= len(im.buf) {
		im.comp.Limits = im.buf[:0]
	} else {
		im.comp.Limits = make([]bucket.Named, 0, len(p.specs))
	}
	var from [4]int8 // from[k]: the spec whose limit is comp.Limits[k] (when fast)
	for i := range p.specs {
		s := &p.specs[i]
		var st bucket.State
		var ok1, ok2 bool
		k := fieldOf(i, 0)
		st.Tokens, ok1 = f.field(k+fieldTokens, s.tk)
		st.TotalConsumed, ok2 = f.field(k+fieldTotal, s.tc)
		if ownLimits {
			st.Limit = s.orig
		} else {
			var ok3, ok4, ok5, ok6 bool
			st.Capacity, ok3 = f.field(k+fieldCapacity, s.cp)
			st.Burst, ok4 = f.field(k+fieldBurst, s.bx)
			st.RefillAmount, ok5 = f.field(k+fieldRefillAmount, s.ra)
			st.RefillPeriod, ok6 = f.field(k+fieldRefillPeriod, s.rp)
			ok2 = ok2 && ok3 && ok4 && ok5 && ok6 && inBounds(st.Limit)
		}
		if !ok1 || !ok2 {
			return Decode(it) // the full decoder says what is wrong
		}
		// Insert in name order, as the full decoder keeps them.
		j := len(im.comp.Limits)
		im.comp.Limits = append(im.comp.Limits, bucket.Named{})
		for ; j > 0 && im.comp.Limits[j-1].Name > s.name; j-- {
			im.comp.Limits[j] = im.comp.Limits[j-1]
			if fast {
				from[j] = from[j-1]
			}
		}
		im.comp.Limits[j] = bucket.Named{Name: s.name, State: st}
		if fast {
			from[j] = int8(i)
			fl, fh := f.guardsAt(k, s)
			im.guards[i] = guard{fl, fh}
		}
	}
	if fast {
		im.pt = p.pt
		for k := range im.comp.Limits {
			im.specAt[from[k]] = int8(k)
		}
	}
	return im, nil
}

// inBounds reports whether a stored limit's fields are in the bounds the
// full decoder enforces.
func inBounds(l bucket.Limit) bool {
	return l.Capacity >= 1 && l.Capacity <= bucket.MaxTokens && l.Burst >= 1 && l.Burst <= bucket.MaxTokens &&
		l.RefillAmount >= 1 && l.RefillAmount <= bucket.MaxTokens && l.RefillPeriod >= 1 && l.RefillPeriod <= bucket.MaxRefillPeriod
}

// numbers reads the numbers of an item: from its map directly when it is
// a store.Item (what stores answer with), whose lookups the compiler
// inlines, else through the view. A decode reads a dozen or more fields,
// and an interface call each costs about as much as the lookup.
type numbers struct {
	it   store.View
	item store.Item
	// sv is it when it is a slot view whose slots for the plan template's
	// fields are known: at[k] is the slot of field k (see fieldOf), -1
	// when its layout has none. nil: read by name.
	sv store.SlotView
	at []int32
}

func numbersOf(it store.View) numbers {
	item, _ := it.(store.Item)
	return numbers{it: it, item: item}
}

// numbersFor is numbersOf for reading the fields of plan template pt (nil:
// by name) from it.
func numbersFor(it store.View, pt *planTemplate) numbers {
	f := numbersOf(it)
	if sv, ok := it.(store.SlotView); ok && pt != nil {
		if lay := sv.Layout(); lay != nil {
			f.sv, f.at = sv, pt.slotsIn(lay)
		}
	}
	return f
}

// num returns the number stored under name, and whether there was one.
func (f numbers) num(name string) (int64, bool) {
	if f.item != nil {
		return f.item.Int(name)
	}
	return f.it.Int(name)
}

// field returns field k of the plan template (see fieldOf), named name:
// by slot when f knows the slots, else by name (num written out: one call
// fewer per field on the map path, the hot path of a stored item).
func (f numbers) field(k int, name string) (int64, bool) {
	if f.at != nil {
		if j := f.at[k]; j >= 0 {
			return f.sv.IntAt(int(j))
		}
		return 0, false
	}
	if f.item != nil {
		return f.item.Int(name)
	}
	return f.it.Int(name)
}
