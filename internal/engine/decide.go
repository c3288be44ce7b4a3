package engine

import (
	"math"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// The decisions: which write to make from what the client knows. Pure
// functions of the plan, an image or a view, and now.

// Path names the write a step makes (or the answer it gives without one).
// The root package reports the paths up to PathDouble as its own (its
// Path is this type); the later ones name the steps of adjusts, undos and
// discovery, which it reports as one of those or not at all.
type Path uint8

// Paths.
const (
	PathNone        Path = iota
	PathSpeculative      // one conditional ADD, no read: the hot path
	PathFull             // one blind write that resets a full bucket
	PathCreate           // the bucket did not exist
	PathNormal           // refill and consume under the rf lock
	PathRetry            // consume only, after losing the rf race
	PathReject           // refused from the returned item, no further I/O
	PathFailOpen         // the store failed and the policy admitted anyway (the root package's)
	PathLocal            // refused from the client's last image, no I/O at all
	PathPool             // admitted from a reservation, no I/O at all (the root package's)
	PathDouble           // the doubling write
	PathDiscover         // looking for a bucket's shards before recreating shard 0
	PathAdjust           // an adjust or refund
	PathUndo             // a cascade's compensation
)

var pathNames = [...]string{"none", "speculative", "full", "create", "normal", "retry", "reject", "fail-open", "local", "pool", "double", "discover", "adjust", "undo"}

// String returns the path's name.
func (p Path) String() string {
	if int(p) < len(pathNames) {
		return pathNames[p]
	}
	return "unknown"
}

// Options tune the decisions; the zero value is the default.
type Options struct {
	// NoLocalRefusals turns off refusals answered from the client's last
	// image of a shard.
	NoLocalRefusals bool
}

// hotRate and nearRate are the write rates (write units per ms) at which
// a client's estimate says a shard is at, or near, the partition ceiling:
// 90 % and 85 % of its 1000 units a second. An estimate over rateWindowMs
// of a partition at 80 % (the aggregator's early threshold) comes out above
// 80 % half the time, so the stronger signal needs 90 %.
const (
	hotRate  = 0.9
	nearRate = 0.85
	// overRate is 10 % over the ceiling: more than estimates of a
	// partition at its ceiling show (see ShardView.overCeiling).
	overRate = 1.1
)

// overCeiling reports whether the view's write rate is over the partition
// ceiling itself, not merely near it: a rate the partition serves only
// from its burst, and throttles once that is spent.
func (v *ShardView) overCeiling(now int64) bool { return v.hot(now) && v.Rate >= overRate }

// hot reports whether the view's write rate is at the partition ceiling.
func (v *ShardView) hot(now int64) bool { return v.busyness(now) == busyCeiling }

// busyness says how near the partition ceiling the view's estimate of the
// shard's write rate is; an estimate older than estimateAge, or one from
// less than a whole window, says nothing.
func (v *ShardView) busyness(now int64) busyness {
	if v.RateAt == 0 || v.Provisional || now-v.RateAt > estimateAge {
		return busyNo
	}
	switch {
	case v.Rate >= hotRate:
		return busyCeiling
	case v.Rate >= nearRate:
		return busyNear
	}
	return busyNo
}

// othersSince is how many writes by other clients the view's rate
// predicts since its image.
func (v *ShardView) othersSince(now int64) float64 {
	if v.Img == nil || now <= v.At {
		return 0
	}
	return v.Others * float64(now-v.At)
}

// LocalRefusalAge is how old an image may be for a refusal answered from
// it (ms). The image can only overstate the tokens (other clients consume
// meanwhile), except for refunds other processes made since (Rollback, a
// negative Adjust), which an image this young misses at most briefly.
const LocalRefusalAge = 1000

// refusesLocally reports whether the view's image, refilled to now, less
// what the other writers have likely consumed since (at their recent
// rate) and what this process's writes in flight charge, cannot serve the
// plan: the acquire is refused without a store call.
func (p *Plan) refusesLocally(v *ShardView, n, now int64, o Options) bool {
	return p.lacks(v, n, now, o, true)
}

// lacks is refusesLocally; guess says whether what the other writers
// likely take counts: their consumption since the image and, at a limit
// shared with them, what this process leaves them (withheld). Without it,
// as once a refusal's promise has come, only this process's own writes in
// flight count (see Refusal.Own).
func (p *Plan) lacks(v *ShardView, n, now int64, o Options, guess bool) bool {
	im := v.Img
	if o.NoLocalRefusals || im == nil || !im.matches(p, n) || now < v.At {
		return false
	}
	if p.quotaSpent(im, now) {
		return true // however old the image: until the window's end (see quotaSpent)
	}
	if now-v.At > LocalRefusalAge {
		return false
	}
	// A refusal said the request would fit by now: from then on it is
	// refused without asking the store only for what this process's own
	// writes in flight take, never on a guess of what others consume. (Its
	// writers that met the refusal would otherwise all write at once, and
	// all but the first find the tokens taken.)
	kept := v.Promise != 0 && now >= v.Promise
	own := kept || !guess
	if own && len(v.Pending) == 0 {
		return false
	}
	if v.Binding && v.Promise != 0 && !kept {
		return true // a throttle said the bucket is at its limit: wait
	}
	if p.quotasShort(im, n, now) {
		return true // only a refund or the window's end brings a quota back
	}
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden || s.free {
			continue
		}
		st, _ := im.projected(s, n, now)
		var left int64
		if own {
			left = st.Tokens - v.Pending[s.name]
		} else {
			left = st.Tokens - v.expected(s, n, now) - v.withheld(s, n, im, v.At, now)
		}
		if left < s.amount {
			return true
		}
	}
	return false
}

// pace is the share of its share of a limit's refill that a process at the
// limit counts on (see withheld).
const pace = 0.75

// withheld returns what a process at limit s's limit leaves to the other
// writers of the tokens it sees at now (millitokens), beyond what they
// likely consumed since (expected): part of the tokens im held at at, and
// part of the refill since. 0 for a limit not contended.
//
// At the limit every token in view is raced for by every process, and the
// others, who consume nearly all of the refill (contended), take these
// too: a process counts on its share of them, what the others leave of the
// refill (1 - drain / refill), and on pace of its share of the refill
// since. Without it, every process counts the token the bucket is
// refilling as its own and writes for it: the first write takes it and
// the others fail. With it, each process writes about once per its share
// of the refill, a little less often than the bucket refills for all of
// them, so that the bucket keeps a few tokens and the processes' writes,
// which meet at random, seldom find it empty. Tokens in view beyond what
// all the processes take in one round (the request over the share) are
// taken at once; only a sixteenth of the burst at most is ever left
// aside, so that a bucket whose processes wait for their turn does not
// fill up and lose its refill.
func (v *ShardView) withheld(s *spec, n int64, im *Image, at, now int64) int64 {
	l := s.perShard(n)
	if im == nil || l.RefillAmount <= 0 || l.RefillPeriod <= 0 || !v.contended(s, n) {
		return 0 // (a shard that never refills has no share to count on)
	}
	rate, left := v.left(s, n)
	share := left / rate
	w := 0.0
	if now > at {
		w = (1 - pace) * left * float64(now-at)
	}
	st, _ := im.projected(s, n, at)
	if t := min(st.Tokens, l.Burst/16); t > 0 {
		w += float64(t) * (1 - share)
	}
	return int64(w)
}

// accrual returns the refill a process counts on of limit s (millitokens
// per ms): what the other writers leave of it, and at the limit pace of
// that (see withheld).
func (v *ShardView) accrual(s *spec, n int64) float64 {
	_, a := v.left(s, n)
	if v.contended(s, n) {
		a *= pace
	}
	return a
}

// left returns limit s's refill rate on a shard of n and what the other
// writers leave of it to this process (millitokens per ms), by the view's
// estimate: what they do not consume (drain at most all but 1/minAccrual
// of the refill). When they consumed more than the whole refill (the
// bucket was handing out what it had stored, as it does after a start or a
// lull), that says nothing about their part once only the refill is left:
// the process then counts on its part of all the writes made (1 - others /
// all), if that is more.
func (v *ShardView) left(s *spec, n int64) (rate, left float64) {
	l := s.perShard(n)
	rate = float64(l.RefillAmount) / float64(l.RefillPeriod)
	left = rate - v.drain(s, n)
	if mine, ok := v.mine(s, rate); ok {
		left = max(left, rate*mine)
	}
	return rate, left
}

// mine returns this process's part of the shard's writes (1 - others /
// all) when the other writers consumed at least the whole refill (rate,
// millitokens per ms) of limit s; ok false otherwise.
func (v *ShardView) mine(s *spec, rate float64) (float64, bool) {
	d, ok := v.Drain[s.name]
	if !ok || d < rate || v.RateAt == 0 || v.At-v.RateAt > drainAge || v.Rate <= 0 || v.Others >= v.Rate {
		return 0, false
	}
	return 1 - v.Others/v.Rate, true
}

// atLimitShare is the share of a limit's refill that the other writers'
// consumption must reach for the bucket to count as at its limit (atLimit).
const atLimitShare = 0.9

// atLimit reports whether the other writers consume at least atLimitShare
// of the refill of some limit the plan charges, by the view's estimate.
func (p *Plan) atLimit(v ShardView, n int64) bool {
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount > 0 && v.contended(s, n) {
			return true
		}
	}
	return false
}

// contended reports whether the other writers consume at least
// atLimitShare of limit s's refill on the view's shard of n.
func (v *ShardView) contended(s *spec, n int64) bool {
	l := s.perShard(n)
	return v.drain(s, n) >= atLimitShare*float64(l.RefillAmount)/float64(l.RefillPeriod)
}

// drainAge is how long an estimate of the other writers' consumption is
// trusted (ms): competition for a bucket changes slowly, and a refusal's
// promise bounds what a stale one can cost.
const drainAge = 2000

// minAccrual bounds how much of a limit's refill a client expects the
// other writers to take (1 - 1/minAccrual of it): a local refusal waits at
// most minAccrual times the bucket's own wait.
const minAccrual = 64

// expected returns what limit s has likely lost since the view's image
// (millitokens): this process's writes in flight, and the other writers'
// consumption at their recent rate, which a client measured while the
// bucket was scarce stands for their share of its refill.
func (v *ShardView) expected(s *spec, n, now int64) int64 {
	e := v.Pending[s.name]
	if d := v.drain(s, n); d > 0 && now > v.At {
		e += int64(d * float64(now-v.At))
	}
	return e
}

// drain returns the other writers' recent consumption of limit s on the
// view's shard of n (millitokens per ms), at most 1 - 1/minAccrual of the
// shard's refill rate; 0 without a fresh estimate.
func (v *ShardView) drain(s *spec, n int64) float64 {
	d, ok := v.Drain[s.name]
	if !ok || v.RateAt == 0 || v.At-v.RateAt > drainAge {
		return 0
	}
	l := s.perShard(n)
	r := float64(l.RefillAmount) / float64(l.RefillPeriod)
	return min(d, r*(1-1.0/minAccrual))
}

type shortKind uint8

const (
	shortNone shortKind = iota
	shortApp            // an application limit lacks tokens even after refill
	shortWCU            // the hidden limit does, on a shard measured busy
)

// shortfall says whether the image lacks tokens for the plan even after
// refill: an application limit first (a real refusal), else wcu (a hot
// partition).
//
// wcu counts as short only when busy: this client's own estimate of the
// shard's write rate says the shard is near its ceiling. A client whose
// clock lags sees no refill since rf, and rf stands still while
// consumption-only writes run, so its wcu view can be empty while the
// shard is not hot.
func (p *Plan) shortfall(im *Image, n, now int64, busy bool) shortKind {
	if p.quotasShort(im, n, now) || p.capsShort(im, n, now) {
		return shortApp
	}
	kind := shortNone
	for i := range p.specs {
		s := &p.specs[i]
		// (wcu is a heuristic, not an admission bound: a client whose
		// clock lags behind rf judges it as at rf, the latest time anyone
		// has written, with no refill since: projected counts none before
		// rf.)
		st, _ := im.projected(s, n, now)
		if st.Tokens >= s.amount || s.free {
			continue
		}
		if !s.hidden {
			return shortApp
		}
		if busy {
			kind = shortWCU
		}
	}
	return kind
}

// Headroom. A bucket used far below its limit is nearly always full, and a
// full bucket cannot be charged by the lock-free consumption write (it
// would be charged without moving rf, and a later refill would credit the
// time it sat full a second time). Each writer would then need the full
// write, which only one writer per refill window wins. So on a shard that
// other writers share, a write that finds the bucket within twice
// headroomTarget of full also burns headroom: tokens taken but not counted
// as consumption, which keep the bucket just below its burst. The writers
// that follow take the consumption-only write, and none of them queue for
// a lock. The burnt tokens are refill the bucket would have lost at its
// ceiling anyway; what it costs is that a burst arriving then finds up to
// twice headroomTarget of refill (at most 2 % of the burst) missing.
//
// Each write burns about the refill of one interval between the shard's
// writes, so that together they move the full-at instant as fast as the
// clock, and more or less as the bucket is nearer or further than the
// target: headroomGain intervals when full by now, none at twice the
// target. A writer judges from an image some writes old, and takes the
// others' writes since to have kept the distance it showed. Burning only
// when the image showed the bucket nearer than the target, as every
// writer's image is older than the target on a busy bucket, let the
// full-at instant run ahead, then fall back to the clock for all at once:
// every write in flight then failed, and their writers raced for the lock.

// maxHeadroomMs bounds how far ahead of now headroom keeps a bucket's
// full-at instant (ms).
const maxHeadroomMs = 50

// headroomGain is the burn of one write, in intervals between the shard's
// writes, on a bucket full by now: the full-at instant then moves ahead of
// the clock.
const headroomGain = 2

// headroomTarget is how far ahead of now (ms) headroom keeps limit s's
// full-at instant: maxHeadroomMs, or what refills 1 % of its burst if
// less.
func headroomTarget(l bucket.Limit) int64 {
	if l.RefillAmount <= 0 {
		return 0
	}
	t := int64(float64(l.Burst) / 100 * float64(l.RefillPeriod) / float64(l.RefillAmount))
	return min(t, maxHeadroomMs)
}

// latencyTarget returns the headroom target of limit l when the shard's
// answers take lat ms: at least twice the round trip, at most
// maxLatencyCushion and what refills 1/latencyShare of the burst (and
// never less than target, the target without latency). A writer learns
// where the full-at instant stands a round trip late, and its write lands
// half a round trip after it decided: a target shorter than that leaves
// the writers no margin, and the full-at instant falls back to the clock
// now and then, failing every write in flight at once.
func latencyTarget(l bucket.Limit, target, lat int64) int64 {
	if lat <= 0 || 2*lat <= target || l.RefillAmount <= 0 {
		return target
	}
	most := min(int64(float64(l.Burst)/latencyShare*float64(l.RefillPeriod)/float64(l.RefillAmount)), maxLatencyCushion)
	return max(target, min(2*lat, most))
}

// latencyShare bounds the headroom target under latency: what refills
// 1/latencyShare of the burst.
const latencyShare = 20

// headroom returns the tokens each limit burns beside its charge on a
// shared shard near its ceiling (nil: none). See above.
func (p *Plan) headroom(v *ShardView, n, now int64) []int64 {
	if v.unmeasured() {
		return p.unmeasuredBurn(v.Img, n)
	}
	im := v.Img
	if im == nil || v.Others <= 0 || v.Rate <= 0 {
		return nil // a client alone on a shard knows when it is full
	}
	interval := 1 / v.Rate // ms between the shard's writes
	// What the others' writes since the image kept of its distance.
	kept := int64(v.othersSince(now) * interval)
	var burn []int64
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden || s.amount <= 0 {
			continue
		}
		st, fl, _, ok := im.state(s)
		if !ok {
			continue
		}
		l := s.perShard(n)
		target := latencyTarget(l, headroomTarget(l), v.Lat)
		ahead := max(fl+kept-now, 0)
		// One interval at the target, more nearer, less further, by an
		// amount that shrinks with the image's age: a writer that corrects
		// fast from old news overshoots, and the full-at instant swings
		// back to the clock.
		gain := min(1+float64(target-ahead)/float64(max(target, now-v.At)), headroomGain)
		if target < 1 || gain <= 0 {
			continue
		}
		rate := float64(l.RefillAmount) / float64(l.RefillPeriod) // millitokens per ms
		b := int64(math.Min(gain*interval*rate, float64(target)*rate)) - s.amount
		if b > 0 {
			// Up to a whole ms of refill with the charge: the write moves
			// fl by the floor of its refill time, and the fraction lost
			// there would add up to the full-at instant falling behind.
			_, ms := l.RefillTime(s.amount + b)
			b = cushionTokens(l, ms) - s.amount
		}
		// Leave the stored balance room for the writers that follow,
		// unless the refill route pays the burn: at a stored balance
		// spent, a write that burnt nothing would move fl by the floor of
		// its charge's refill time, by nothing on a bucket far above its
		// load, and the clock would overtake fl.
		if room := (st.Tokens - s.amount) / 2; b > room && !im.pays(s, n, now, s.amount+b, v.ahead(s, n, now)) {
			b = room
		}
		burn = withBurn(burn, len(p.specs), i, b)
	}
	return burn
}

// withBurn returns burn (made for n specs when nil) with spec i's burn set
// to b, or burn as it is when b is not positive.
func withBurn(burn []int64, n, i int, b int64) []int64 {
	if b <= 0 {
		return burn
	}
	if burn == nil {
		burn = make([]int64, n)
	}
	burn[i] = b
	return burn
}

// unmeasured reports whether the view's client has no estimate of the
// shard's write rate yet, and will have one soon (its answers come fast
// enough to take one from): its first writes to a shard.
func (v *ShardView) unmeasured() bool { return v.Rate <= 0 && v.RateAt == 0 && !v.Slow }

// unmeasuredBurn returns the headroom of a write made before its client
// has measured the shard (nil: none): each limit whose charge refills in
// less than a millisecond burns up to a whole one, so that the write moves
// the limit's fl (which counts whole milliseconds, the floor of each
// charge's refill time) by 1 ms instead of none; im is the client's item
// of the shard, or nil.
//
// Why: on a bucket far above its load, which is full again a fraction of
// a millisecond after each charge, the consumption-only writes pass only
// while fl is ahead of the clock, and writers with an estimate of the
// others keep it there by burning headroom. Processes that start on a
// bucket together have none for their first writes; each moved fl by
// nothing, the clock overtook it, and every write in flight failed (128
// processes starting at 900 acquires a second with 10 ms round trips: 50
// to 60 failed writes a wave). Burnt, a millisecond a write keeps fl
// moving nearly with the clock until the estimates take over.
//
// What it costs: a process's first writes to such a bucket (until its
// first estimate, usually its second item) each take up to 1 ms of
// refill more than the charge, also from a bucket at its limit; that is
// at most 0.1 % of a burst of a second's refill per write. None after an
// answer too slow to estimate from (ShardView.Slow): a client whose
// answers are all slow never gets a rate, and burns on its first write to
// a shard only. On an item, each burn leaves the stored balance
// half its room, as headroom does.
func (p *Plan) unmeasuredBurn(im *Image, n int64) []int64 {
	return p.burnEach(im, n, func(s *spec, l bucket.Limit) int64 {
		if lo, _ := l.RefillTime(s.amount); lo >= 1 {
			return 0 // the charge moves fl by itself
		}
		return cushionTokens(l, 1) - s.amount
	})
}

// burnEach returns f's burn of each limit the plan charges, at most half
// the image's stored tokens beyond the charge (im nil: no image); nil
// when none burns.
func (p *Plan) burnEach(im *Image, n int64, f func(s *spec, l bucket.Limit) int64) []int64 {
	var burn []int64
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden || s.amount <= 0 {
			continue
		}
		b := f(s, s.perShard(n))
		if im != nil {
			st, _, _, ok := im.state(s)
			if !ok {
				continue
			}
			b = min(b, (st.Tokens-s.amount)/2)
		}
		burn = withBurn(burn, len(p.specs), i, b)
	}
	return burn
}

// refreshLevel is the share of a limit's burst below which the stored
// balance (the tokens at rf, before the refill since) is low enough that a
// writer materializes the refill ahead of need: a consumption-only write
// needs the stored tokens, and only a write under the rf lock adds the
// refill to them.
const refreshLevel = 4 // 1/4 of the burst

// refreshSpreadMs spreads the early refills of a busy shard: a writer
// makes one with probability 1 / (1 + others' writes per refreshSpreadMs),
// about one writer in that window, so that they seldom race for the lock.
const refreshSpreadMs = 20

// refresh says whether the blind write should be the normal write (refill
// under the rf lock) rather than the consumption-only one: when neither
// the image's stored tokens nor the refill route (after what the other
// writers have likely charged since) can pay the charge (and burn) but the
// refill can, and no other writer has likely refilled since; or, now and
// then on a shard others share, when a stored balance runs low and the
// refill route is closing (its fh drifted a quarter of a burst's refill
// ahead of fl, or rf is half its age limit old). draw is a uniform number
// in [0, 1).
func (p *Plan) refresh(v *ShardView, n, now int64, burn []int64, draw float64) bool {
	im := v.Img
	must, low := false, false
	aged := now-im.rf > refillRouteAge/2
	for i := range p.specs {
		s := &p.specs[i]
		st, fl, fh, ok := im.state(s)
		if !ok {
			return false
		}
		if s.hidden || s.free {
			continue // the wcu gauge is counted, never a condition; nor is a skipped limit
		}
		need := s.amount + burnOf(burn, i)
		// (Stored tokens that cover need pay: the refill route, and what
		// the others pushed it by, need not be looked at.)
		if st.Tokens < need && !im.pays(s, n, now, need, v.ahead(s, n, now)) {
			must = true
		}
		l := s.perShard(n)
		if st.Tokens < need+l.Burst/refreshLevel {
			_, drift := l.RefillTime(l.Burst / refreshLevel)
			if aged || fh-fl > drift {
				low = true
			}
		}
	}
	if !must && !low {
		return false
	}
	if p.shortfall(im, n, now, false) != shortNone {
		return false // the refill cannot pay either: let the store say so
	}
	if must {
		return v.othersSince(now) < 1
	}
	if v.Others <= 0 {
		return false // a client alone refills when it must, not before
	}
	return draw < 1/(1+v.Others*refreshSpreadMs)
}

// pays reports whether the consumption-only write's condition on limit s
// (see emitSpeculative) holds on the image for need millitokens: the
// stored balance covers it, or (an application limit) the refill route
// does with the image's fh pushed ahead ms (what other writers have
// likely charged since).
func (im *Image) pays(s *spec, n, now, need, ahead int64) bool {
	st, _, fh, ok := im.state(s)
	if !ok {
		return false
	}
	if st.Tokens >= need {
		return true
	}
	// An item with hold generations pays from its stored tokens only
	// (the route counts from the burst, its cap is lower: see
	// emitSpeculative).
	l := s.perShard(n)
	return !s.hidden && !im.holds && im.rf >= satAdd(now, -refillRouteAge) &&
		satAdd(fh, ahead) <= refillBound(l, l.Burst, need, now)
}

// ahead returns how far the other writers' charges since the view's image
// have likely pushed limit s's fh (ms): the refill time of what they (and
// this process's writes in flight) have likely taken, and 1 ms of drift
// per write of theirs.
func (v *ShardView) ahead(s *spec, n, now int64) int64 {
	_, hi := s.perShard(n).RefillTime(v.expected(s, n, now))
	return satAdd(hi, int64(math.Ceil(v.othersSince(now))))
}

// blind returns the first write to a shard, made from this client's last
// view of it. On an image that says every limit is full by now: the full
// reset, unless another writer's write likely lands within a charge's
// refill time before this one (then the bucket is not full, and the full
// write fails) and the ride-ahead write is less likely to fail (first),
// judged from the client's estimate of the others' rate, or, before it has
// one, on an item of its own refill (it wrote last). Otherwise, and with
// no image of the bucket at all, cold says what the plan's first writes
// found right (Memory.coldWrite; PathNone: the speculative charge).
// Processes that start on a bucket together, each with an item another
// refilled, would all make the full write, which one of them wins. Else
// the normal write when the stored tokens run low (refresh), or the
// speculative charge, with headroom burnt on a shared shard near its
// ceiling. create says that with no image the write may also create the
// bucket (orCreate; see Plan.createsInOne).
func (p *Plan) blind(v *ShardView, n, now int64, draw float64, cold Path, create bool) (store.Expr, Path, error) {
	im := v.Img
	if im == nil || !im.matches(p, n) {
		emit, path := p.coldEmit(v, n, now, cold)
		if im == nil && create {
			if ex, ok, err := p.orCreate(n, now, emit); ok || err != nil {
				return ex, path, err
			}
		}
		ex, err := build(emit)
		return ex, path, err
	}
	if im.fullBy(p, n, now) {
		first := cold // no estimate of the others: what the plan's first writes found
		switch {
		case v.knowsOthers(now):
			first = p.first(v, n, now)
		case v.OwnRefill && cold == PathNone:
			first = PathFull
		}
		switch first {
		case PathFull:
			if im.holds { // pools hold part of the burst: see hold.go
				ex, err := p.fullHeld(im, n, now, 0)
				return ex, PathFull, err
			}
			ex, err := p.full(im, n, now, 0)
			return ex, PathFull, err
		case PathRetry:
			k := int64(rideMax)
			if v.Others > 0 {
				k = p.rideGap(v)
			}
			ex, err := p.speculative(im, n, now, p.rideBurn(n, k), !im.holds)
			return ex, PathSpeculative, err
		}
	}
	burn := p.headroom(v, n, now)
	if p.refresh(v, n, now, burn, draw) {
		ex, err := p.normal(im, n, now, true, burn)
		return ex, PathNormal, err
	}
	ex, err := p.speculative(im, n, now, burn, !im.holds)
	return ex, PathSpeculative, err
}

// coldEmit returns the first write to a shard the client has no item of
// (or one of other limits or another shard count), and its path: the
// write cold calls for (see Memory.coldWrite).
func (p *Plan) coldEmit(v *ShardView, n, now int64, cold Path) (func(*builder), Path) {
	im := v.Img
	switch {
	case im == nil && cold == PathFull:
		return func(k *builder) { p.emitFull(k, im, n, now, 0) }, PathFull
	case im == nil && cold == PathRetry:
		if burn := p.rideBurn(n, rideMax); burn != nil {
			return func(k *builder) { p.emitSpeculative(k, im, n, now, burn, true) }, PathSpeculative
		}
	}
	var burn []int64
	if v.unmeasured() {
		burn = p.unmeasuredBurn(nil, n) // its item, if any, is of other limits
	}
	return func(k *builder) { p.emitSpeculative(k, im, n, now, burn, false) }, PathSpeculative
}

// The first write on a bucket full by now. DynamoDB has no min or max in
// an update, so no one write is exact both on a full bucket (the refill
// accrued at the cap must be dropped: SET) and on one below its cap
// (consumption must be ADDed): the write is chosen before the store says
// which it is. The full write fails when another writer's write landed
// within the refill time of its charge (tau) before it; the ride-ahead
// write (the speculative charge burning b beside it, guarded by fl > now -
// K, K the floor of b's refill time) fails only when the bucket has sat
// full for longer than K. With the other writers' writes at random at
// rate r (per ms), the first fails with probability 1 - exp(-r tau), the
// second with exp(-r (K + tau)); the cheaper is made. K is rideGaps of the
// measured gap between the others' writes, at most what refills rideShare
// of the burst: the cost is that a burst right after such a write finds up
// to that share of the bucket's refill missing (the admission bound is
// untouched: the burn is refill the bucket had lost at its cap, or tokens
// taken and not counted).

// knowsOthers reports whether the view's estimate of the other writers
// says something of them now: an estimate that they write, or a fresh one
// (at most estimateAge old) that they do not. An older estimate that no
// one else wrote says nothing of the writes since.
func (v *ShardView) knowsOthers(now int64) bool {
	if v.RateAt == 0 && v.Rate <= 0 {
		return false
	}
	return v.Others > 0 || now-v.RateAt <= estimateAge
}

// rideGaps is how many of the measured gaps between the other writers'
// writes a ride-ahead write's slack covers (it fails with probability
// about exp(-rideGaps)).
const rideGaps = 3

// rideShare is the largest share of a shard's burst one ride-ahead write
// burns (percent).
const rideShare = 3

// rideMax is a gap longer than any ride-ahead slack (ms): rideBurn then
// burns rideShare of every burst.
const rideMax = math.MaxInt32

// first returns the first write for a bucket the view's image says is full
// by now, whose client knows the others' rate (or that it wrote last):
// PathFull for the full reset, PathRetry for the ride-ahead write. See
// above.
func (p *Plan) first(v *ShardView, n, now int64) Path {
	if v.Others <= 0 || v.Img.holds {
		return PathFull
	}
	if p.atLimit(*v, n) {
		// The others consume nearly the whole refill: an item that says
		// full by now is likely stale, and a burn would take tokens the
		// bucket does not have to spare. The full write only when no
		// other write likely came since the item.
		if v.othersSince(now) < 0.5 {
			return PathFull
		}
		return PathNone
	}
	tau := p.chargeTime(n)
	burn := p.rideBurn(n, p.rideGap(v))
	k := p.slack(n, burn)
	if k < 1 {
		return PathFull
	}
	// Each of the others' writes keeps the bucket below its burst for a
	// charge's refill time, or for the slack when they ride ahead, as they
	// do on an item older than an estimate (the same odds led them there):
	// the full write made from such an item then fails far more often.
	push := tau
	if now-v.At > estimateAge {
		push += k
	}
	missFull := max(1-math.Exp(-v.Others*float64(push)), v.FullMiss)
	missRide := math.Exp(-v.Others * float64(k+tau))
	if missFull <= missRide {
		return PathFull
	}
	return PathRetry
}

// rideGap is the ride-ahead slack the view calls for: rideGaps gaps
// between the other writers' writes (ms).
func (p *Plan) rideGap(v *ShardView) int64 {
	return int64(math.Min(rideGaps/v.Others, rideMax))
}

// chargeTime is the longest refill time of the plan's charge among its
// limits on a shard of n (ms, rounded up).
func (p *Plan) chargeTime(n int64) int64 {
	var tau int64
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount > 0 {
			_, hi := s.perShard(n).RefillTime(s.amount)
			tau = max(tau, hi)
		}
	}
	return tau
}

// rideBurn returns the burn per limit of a ride-ahead write whose slack
// covers k ms, at most rideShare of each burst and half of what the burst
// holds beyond the charge (nil when no limit would burn). It is made on a
// bucket full by now, which holds the whole burst.
func (p *Plan) rideBurn(n, k int64) []int64 {
	return p.burnEach(nil, n, func(s *spec, l bucket.Limit) int64 {
		return min(cushionTokens(l, k), l.Burst*rideShare/100, (l.Burst-s.amount)/2)
	})
}

// slack returns the shortest ride-ahead slack (ms) among the limits the
// plan charges when they burn burn: the write lands only on a bucket full
// for less than that. 0 when some charged limit burns nothing.
func (p *Plan) slack(n int64, burn []int64) int64 {
	k := int64(math.MaxInt64)
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount > 0 {
			k = min(k, rideSlack(s.perShard(n), burnOf(burn, i), true))
		}
	}
	if k == math.MaxInt64 {
		return 0
	}
	return k
}

// informed returns the write to make knowing the item as it stands (the
// image a failed write returned), cheapest contention first. Every limit
// full: the full reset (its conditions hold for exactly one writer per
// refill), with a cushion when this acquire already lost a race (lat is
// the last round trip, ms); but on a shard other writers share, when the
// bucket has been full for less than the cushion, the ride-ahead write
// with the cushion's refill burnt, which every racer lands. Otherwise
// consumption only when the stored tokens suffice; else refill and
// consume under the rf lock. The caller has checked that the tokens
// suffice (shortfall). v carries the rate estimates; its image is not
// used.
func (p *Plan) informed(im *Image, v ShardView, n, now, lat int64, contended bool) (store.Expr, Path, error) {
	if im.matches(p, n) && im.fullBy(p, n, now) {
		h := int64(0)
		if contended {
			h = p.cushion(im, n, lat)
		}
		if h > 0 && !im.holds && v.Others > 0 {
			burn := p.rideBurn(n, h)
			if k := p.slack(n, burn); k > 0 && p.fullSince(im, now) > now-k {
				ex, err := p.speculative(im, n, now, burn, true)
				return ex, PathRetry, err
			}
		}
		if im.holds { // pools hold part of the burst: see hold.go
			ex, err := p.fullHeld(im, n, now, h)
			return ex, PathFull, err
		}
		ex, err := p.full(im, n, now, h)
		return ex, PathFull, err
	}
	v.Img, v.At = im, now
	burn := p.headroom(&v, n, now)
	if p.retryable(im, n, now, burn) {
		ex, err := p.speculative(im, n, now, burn, !im.holds)
		return ex, PathRetry, err
	}
	ex, err := p.normal(im, n, now, true, burn)
	return ex, PathNormal, err
}

// fullSince returns the earliest fl among the limits the plan charges on
// the image: the bucket has been full at most since then (fl <= fullAt).
func (p *Plan) fullSince(im *Image, now int64) int64 {
	since := now
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount > 0 {
			if _, fl, _, ok := im.state(s); ok {
				since = min(since, fl)
			}
		}
	}
	return since
}

// retryable reports whether the consumption-only write (the speculative
// expression) can succeed on this image: same limits and shard count, the
// stored tokens or the refill route pay every limit (pays), and every
// charged bucket is below its burst (the fl guard). It is preferred even
// when a refill is due: it does not contend for the rf lock, so under
// contention the writers consume from the refill without excluding each
// other.
func (p *Plan) retryable(im *Image, n, now int64, burn []int64) bool {
	if !im.matches(p, n) {
		return false
	}
	for i := range p.specs {
		s := &p.specs[i]
		_, fl, _, ok := im.state(s)
		if !ok || (!s.free && !im.pays(s, n, now, s.amount+burnOf(burn, i), 0)) {
			return false
		}
		// A release moves the cap like a charge (see emitSpeculative).
		if (s.amount != 0 || s.release != 0) && !s.hidden && fl <= now {
			return false
		}
	}
	return true
}

// fewWritesPerSecond is the most acquires a second a shard's limits may
// admit for a client to never double it: half a partition's write
// ceiling, which leaves room for an adjust of each admitted acquire.
const fewWritesPerSecond = 500

// fewWrites reports whether some limit the plan charges admits at most
// fewWritesPerSecond of its requests a second on a shard of n. Such a
// shard's partition can only run hot with refused attempts, and refused
// traffic must never double a bucket: more shards would spread refusals
// that local refusals answer without a write.
func (p *Plan) fewWrites(n int64) bool {
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden || s.amount <= 0 {
			continue
		}
		l := s.perShard(n)
		if l.RefillPeriod > 0 && float64(l.RefillAmount)*1000/float64(l.RefillPeriod)/float64(s.amount) <= fewWritesPerSecond {
			return true
		}
	}
	return false
}

// maxSaturatedWait bounds the wait of a refusal judged from a saturated
// view (ms): a throttle is a passing signal.
const maxSaturatedWait = 1000

// draining reports whether the view's item, refilled to now, holds less
// than half the burst of some limit the plan charges: the bucket is being
// drained, which a throttle on it then confirms.
func (p *Plan) draining(v ShardView, n, now int64) bool {
	if v.Img == nil {
		return false
	}
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount > 0 {
			st, _ := v.Img.projected(s, n, now)
			if 2*st.Tokens < st.Burst {
				return true
			}
		}
	}
	return false
}

// saturated returns the view with the other writers taking as much of
// every charged limit's refill as a client ever expects them to (all but
// 1/minAccrual of it), as of now; but never so much that the wait it
// gives (the request's refill at what the others leave) exceeds the
// refill of half the burst (a bucket that every process waits on must not
// fill up and lose its refill meanwhile) or maxSaturatedWait.
func (v ShardView) saturated(p *Plan, n, now int64) ShardView {
	d := make(map[string]float64, len(p.specs))
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount > 0 {
			l := s.perShard(n)
			rate := float64(l.RefillAmount) / float64(l.RefillPeriod)
			left := 1.0 / minAccrual
			if l.Burst > 0 {
				left = max(left, 2*float64(s.amount)/float64(l.Burst))
			}
			if rate > 0 {
				left = max(left, float64(s.amount)/(rate*maxSaturatedWait))
			}
			d[s.name] = rate * (1 - min(1, left))
		}
	}
	v.Drain, v.RateAt = d, v.At
	return v
}
