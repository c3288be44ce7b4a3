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
	raw        store.Item
	rf         int64
	hash       int64
	shardCount int64
	comp       bucket.Composite
	// holds is set when the item has a hold generation (attrGen): some
	// process reserved from it (see hold.go); gen and genAt are the
	// generation and when it began (ms). Without, no limit has a hold.
	holds      bool
	gen, genAt int64
}

// Decode decodes a bucket item; a nil (or empty) item decodes to a nil
// Image.
func Decode(it store.Item) (*Image, error) {
	if len(it) == 0 {
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
// total consumed), in millitokens.
func (im *Image) writes() (int64, bool) {
	st, ok := im.comp.Get(keys.HiddenLimit)
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
	fl, fh = guardsOf(im.raw, s)
	return st, fl, fh, true
}

// index returns the position of s's limit in comp.Limits (-1 when
// absent).
func (im *Image) index(s *spec) int {
	for i := range im.comp.Limits {
		if im.comp.Limits[i].Name == s.name {
			return i
		}
	}
	return -1
}

// guardsOf reads the guard fields of s's limit from an item.
func guardsOf(it store.Item, s *spec) (fl, fh int64) {
	fl, okl := it.Int(s.fl)
	fh, okh := it.Int(s.fh)
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
