package engine

import (
	"errors"
	"slices"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Call is one store call a step asks for: exactly one field is set.
type Call struct {
	Update   *store.UpdateInput
	Put      *store.PutInput
	Query    *store.QueryInput
	BatchGet *store.BatchGetInput
	// Transact is a charge write that starts a quota's window on its
	// shard by a transfer from another shard, the donor: the write, then
	// the donor's part (see quota.go).
	Transact *store.TransactWriteInput
	// Decided marks a read made after the acquire's charge landed, only
	// to learn the item it left (a transaction returns none): the answer
	// no longer depends on it, so the caller's context does not stop it,
	// and a caller who has gone does not wait for it (the machine goes
	// on without it).
	Decided bool
}

// Result is what a Call returned: the output of its kind, and its error.
type Result struct {
	Write store.WriteOutput // Update, Put, Transact
	Query store.QueryOutput
	Batch store.BatchGetOutput
	Err   error
	// Sent is when the call was made (Unix ms, the client's clock; 0 when
	// not known): an answer that took long may describe the item as it
	// was well before it came, which rate estimates must not take as now.
	Sent int64
}

// latency returns how long the call of r took by now (0 when unknown).
func (r *Result) latency(now int64) int64 {
	if r.Sent == 0 || now < r.Sent {
		return 0
	}
	return now - r.Sent
}

// Step is what a machine asks for next: a Call to make (then Feed its
// Result back), or an answer.
type Step struct {
	// Call, when set, is the store call to make next; Path names it.
	Call *Call
	Path Path
	// Done: the bucket was charged (see the machine's Charged).
	Done bool
	// Refused: a limit lacks the tokens; nothing is charged.
	Refused *Refusal
	// Err: the store failed (or returned something unexpected); nothing
	// is charged unless the error says its outcome is unknown.
	Err error
}

// Rand is the randomness a machine draws from: shard choices and the
// spreading of early refills. *math/rand/v2.Rand satisfies it; it must be
// safe for the caller's concurrency (the root package locks it).
type Rand interface {
	IntN(n int) int
	Float64() float64
}

// Refusal is a refusal with what it was judged from.
type Refusal struct {
	Plan *Plan
	Img  *Image // nil: judged without an image (lost every race)
	N    int64
	Now  int64
	// Local is true when no store call was made for it; View is then
	// what it was judged from (the expected consumption since the image
	// lengthens the wait).
	Local bool
	View  *ShardView
	// Outrun is true for a refusal after lost races, judged from View:
	// the item the failed write returned had the tokens, but the other
	// writers (and this process's writes in flight) take them before
	// another write could land, or the bucket is at its limit and this
	// acquire keeps losing the race for its refill (see outrun).
	Outrun bool
	// Raced is true, beside Outrun, for an acquire that lost every race
	// it ran (maxSlowAttempts): every limit it charges counts as taken by
	// the others.
	Raced bool
	// Remembered is true for a refusal judged from the process's last
	// image of a shard, not from the store's answer, beside another
	// side's refusal (a cascade covering every side, see judge). Its caps,
	// as a local refusal's, are not judged: their slots come back by
	// releases no image of this process shows.
	Remembered bool
	// Own is true for a refusal judged on this process's writes in flight
	// alone, not on a guess of what the other writers take: a local
	// refusal once the last refusal's promise has come, or a refusal after
	// a write that failed although no one else had written the shard
	// since this process's last item (see outrun). A caller who waited a
	// refusal's wait and finds no one else wrote is not sent back on a
	// guess.
	Own bool
}

// localRefusal is the refusal of a plan refusesLocally refused from view
// v at now.
func (p *Plan) localRefusal(v ShardView, n, now int64) *Refusal {
	return &Refusal{Plan: p, Img: v.Img, N: n, Now: now, Local: true, View: &v, Own: v.Promise != 0 && now >= v.Promise}
}

// maxSlowAttempts bounds the writes after the first one fails on a shard.
// Each failure returns the fresh item and means another writer succeeded,
// so the loop runs long only under heavy contention; it stops earlier
// when the item shows the tokens gone.
const maxSlowAttempts = 32

// maxShardChoices bounds how many shard choices one acquire makes.
const maxShardChoices = 8

// exhaustedShards is how many shards an acquire tries before it is
// refused: a sharded bucket spreads its tokens, and a shard that lacks
// them says little about the others.
const exhaustedShards = 3

type chargePhase uint8

const (
	phWrite    chargePhase = iota // a charge write (blind or informed)
	phCreate                      // the Put of a missing shard
	phDiscover                    // the query for a missing shard 0's siblings
	phSiblings                    // the read of the siblings found
	phVerify                      // the read of shard 0 before making another missing shard
	phDouble                      // the doubling write
	phRecount                     // the read of shard 0 after a throttle left no shard to spread to
	phTransfer                    // a charge write with a transfer (a transaction)
	phFunded                      // the read of the shard a transfer's write landed on
)

// Charge is the machine of one acquire of one bucket: it picks a shard,
// makes the write the client's knowledge calls for, and reacts to what
// comes back. Create it with NewCharge, then call Start and Feed.
type Charge struct {
	m    *Memory
	plan *Plan // the acquire's
	p    *Plan // plan on the current shard (see Plan.forShard)
	o    Options
	rnd  Rand

	n       int64 // the shard count in use
	tried   []int
	choices int
	lastRL  *Refusal

	// the current shard
	shard     int
	view      ShardView
	viewN     int64      // the shard count when view was taken: its rate is of a shard of viewN
	entry     *shardInfo // the memory's entry of the shard
	attempts  int
	contended bool
	billed    int64 // failed writes on this shard, charged to the next write's wcu
	cold      bool  // the write in flight is a first write made with no image (see prior.go)
	// creates is when the first write was made, if it may create the
	// bucket (orCreate); 0 when it may not.
	creates int64

	phase chargePhase
	path  Path
	sent  *Call  // the charge write in flight
	from  *Image // the image it was built from (nil: none)
	donor int    // the donor shard of its transfer (see quota.go)
	lat   int64  // how long the last call took (ms)
	mine  *Plan  // the plan of the charge write in flight
	// inFlight is true while the memory counts mine as in flight on the
	// shard (Memory.reserve): from the write's step until its result.
	inFlight bool
	put      *store.Item // the item a create Put writes
	after    func() Step // what follows a doubling
	// redoubled is set once the doubling was made again with the limits
	// shard 0 showed (see afterDouble).
	redoubled bool
	// throttle is the throttle that sent the acquire to read shard 0's
	// count (see spread); nil until then, and it is read once.
	throttle error
	// guessed is 1 + the last shard the acquire passed on a guess (the
	// client's image refused it, no throttle's promise did), 0 for none:
	// when a throttle leaves no shard to try, the store is asked there,
	// once (see spread).
	guessed int
	// throttles counts the acquire's throttled writes (see spread).
	throttles int

	// Set when Done. At is the now (the client's clock, Unix ms) the
	// successful write was made at: the epoch of the caps it charged.
	Shard int
	N     int64
	Img   *Image
	At    int64
	wrote int64 // the now of the charge write in flight (or the create)
}

// NewCharge returns the machine of one acquire of p's bucket.
func NewCharge(m *Memory, p *Plan, rnd Rand, o Options) *Charge {
	return &Charge{m: m, plan: p, p: p, rnd: rnd, o: o}
}

// Start returns the first step.
func (c *Charge) Start(now int64) Step { return c.final(c.start(now), now) }

// Feed takes the result of the last step's call and returns the next step.
func (c *Charge) Feed(r Result, now int64) Step { return c.final(c.feed(&r, now), now) }

func (c *Charge) start(now int64) Step {
	n, from := c.m.begin(c.p.Ref, now)
	c.n = n
	if from != 0 && from == c.n {
		// A doubling this client decided on was refused by a throttle:
		// the partition is still hot, and the doubling is what helps.
		return c.double(now, func() Step { return c.nextShard(now) })
	}
	return c.nextShard(now)
}

func (c *Charge) feed(r *Result, now int64) Step {
	c.lat = r.latency(now)
	switch c.phase {
	case phCreate:
		return c.afterCreate(r, now)
	case phDiscover:
		return c.afterDiscover(r, now)
	case phSiblings:
		return c.afterSiblings(r, now)
	case phVerify:
		return c.afterVerify(r, now)
	case phDouble:
		return c.afterDouble(r, now)
	case phRecount:
		return c.afterRecount(r, now)
	case phTransfer:
		return c.afterTransfer(r, now)
	case phFunded:
		return c.afterFunded(r, now)
	}
	return c.afterWrite(r, now)
}

// nextShard picks a shard not tried yet and makes its first write, from
// the client's last view of it.
func (c *Charge) nextShard(now int64) Step {
	for {
		if c.choices >= maxShardChoices {
			return c.refuse(now)
		}
		shard := pick(c.rnd, c.n, below(c.tried, c.n))
		recount := false
		if c.p.quotaNeedsShardZero(c.m, c.n, now) || c.p.capNeedsShardZero(c.m, c.n, now) {
			// A quota's window starts on another shard only at a count
			// learned from shard 0 in that window (see quota.go); a cap
			// is charged there only at a count learned from shard 0 in its
			// last epoch (see concurrency.go).
			if slices.Contains(c.tried, 0) {
				return c.refuse(now)
			}
			shard = 0
		} else if !c.m.trustsCount(c.p.Ref, c.n, now) {
			// Nor is any other shard written while no image of shard 0
			// vouches that it exists (see Memory.trustsCount): shard 0's
			// answer teaches the count in force (maxShardChoices bounds
			// the round). The write goes to the store even when the image
			// would refuse it: its answer is what lets the acquire go on
			// to the other shards.
			shard, recount = 0, true
		}
		if shard < 0 {
			return c.refuse(now)
		}
		c.tried = append(c.tried, shard)
		c.enter(shard, now)
		if !recount && !c.lastChance(now) && c.p.refusesLocally(&c.view, c.n, now, c.o) {
			if v := c.view; v.Binding {
				// Refused by a throttle's promise, which stands: the item may
				// show tokens, but the others take them (see throttled).
				c.lastRL = c.p.localRefusal(v.saturated(c.p, c.n, now), c.n, now)
				c.lastRL.Outrun, c.lastRL.Raced = true, true
			} else {
				c.lastRL = c.p.localRefusal(v, c.n, now)
				c.promise(c.lastRL)
				c.guessed = shard + 1
			}
			if len(c.tried) >= exhaustedShards || !c.untried(now) {
				return Step{Refused: c.lastRL, Path: PathLocal}
			}
			continue
		}
		if c.hotBefore(now) {
			// The gauge is counted, never a condition, so no write fails
			// for it: the client reads the heat off its own image.
			return c.double(now, func() Step { return c.blindWrite(now) })
		}
		return c.blindWrite(now)
	}
}

// enter makes shard the current shard, with the client's last view of it.
func (c *Charge) enter(shard int, now int64) {
	c.choices++
	c.settleBilled(now)
	c.shard, c.attempts, c.contended = shard, 0, false
	c.onShard()
	c.billed, c.view, c.entry = c.m.enter(c.p.Ref, shard, now)
	c.viewN = c.n
}

// untried reports whether a shard the acquire may try is left.
func (c *Charge) untried(now int64) bool {
	return int64(len(below(c.tried, c.n))) < c.n
}

// below returns the shards of tried below n.
func below(tried []int, n int64) []int {
	var out []int
	for _, s := range tried {
		if int64(s) < n {
			out = append(out, s)
		}
	}
	return out
}

// lastChance reports whether the current shard is the acquire's last and
// every shard tried before it was left without a refusal (a throttle, heat,
// a count that grew): the store is then asked, not a guess. Right after a
// doubling, the writers that have not learnt it crowd shard 0's partition,
// which throttles while it holds its tokens, and the new shards fill as
// they are drained: a local refusal there would refuse the acquire beside
// shard 0's tokens. (A throttle's promise still stands: see throttled.)
func (c *Charge) lastChance(now int64) bool {
	last := len(c.tried) >= exhaustedShards || !c.untried(now)
	return last && len(c.tried) > 1 && c.lastRL == nil && !c.view.Binding
}

// needsShardZero reports whether the acquire must write shard 0 before any
// other: a quota's window starts there (Plan.quotaNeedsShardZero), a cap's
// epoch is learned there (Plan.capNeedsShardZero), or the client's image
// of shard 0 no longer vouches for the count in use (Memory.trustsCount).
func (c *Charge) needsShardZero(now int64) bool {
	return c.p.quotaNeedsShardZero(c.m, c.n, now) || c.p.capNeedsShardZero(c.m, c.n, now) || !c.m.trustsCount(c.p.Ref, c.n, now)
}

// onShard sets the plan for the current shard, from the memory's images
// of shard 0 and of the donors a transfer may take from (see
// Plan.forShard).
func (c *Charge) onShard() {
	c.p = c.plan
	if c.shard != 0 {
		imOf := func(d int) *Image { return c.m.View(c.plan.Ref, d).Img }
		c.p = c.plan.forShard(c.shard, imOf(0), imOf)
	}
}

// hotBefore reports whether the client's view of the current shard says
// its partition is hot before any write: the image's wcu gauge, refilled
// to now, is spent, on a shard the client measured at its ceiling, and
// the bucket may double now.
func (c *Charge) hotBefore(now int64) bool {
	im := c.view.Img
	return c.choices == 1 && im != nil && im.matches(c.p, c.n) &&
		c.p.shortfall(im, c.n, now, c.view.hot(now)) == shortWCU && c.m.mayDouble(c.p.Ref, c.shard, c.n, now)
}

// blindWrite makes the first write to the current shard, from the
// client's last view of it.
func (c *Charge) blindWrite(now int64) Step {
	q := c.p.withBilled(c.billed)
	first := PathNone
	v := &c.view
	if c.cold = v.Img == nil; c.cold || !v.knowsOthers(now) {
		first = c.m.coldWrite(c.p, c.n, !c.cold)
	}
	if c.cold && c.shard != 0 && first == PathFull {
		// Shards other than 0 start empty (a doubling adds no tokens):
		// one this process has no image of is likely still filling.
		first = PathNone
	}
	// A process's first write to a bucket it believes at one shard may be
	// the one that creates it (see Plan.orCreate).
	create := c.cold && c.shard == 0 && c.n == 1 && q.createsInOne()
	c.creates = 0
	if create {
		c.creates = now
	}
	v.FullMiss = c.m.fullMiss(c.p.hash)
	ex, path, err := q.blind(&c.view, c.n, now, c.rnd.Float64(), first, create)
	if err != nil {
		return Step{Err: err}
	}
	c.wrote = now
	return c.write(ex, path, q, c.view.Img, now)
}

// created reports whether img, the item a charge write returned, is one
// that write created (orCreate): the write could, its write count is that
// write's alone, and its rf is when the write was made.
func (c *Charge) created(img *Image) bool {
	w, ok := img.writes()
	return c.creates != 0 && c.attempts == 0 && ok && c.mine != nil && img.rf == c.creates && w == c.mine.specs[len(c.mine.specs)-1].amount
}

// Drop ends a machine whose last step's call will not be made (a cascade
// answered without it): the write it asked for is no longer in flight,
// and the failed writes not charged yet are left for the next write to
// the shard.
func (c *Charge) Drop(now int64) {
	if c == nil {
		return
	}
	c.landed()
	c.settleBilled(now)
}

// landed ends the charge write in flight (if any): the memory no longer
// counts what it takes as pending.
func (c *Charge) landed() {
	if c.inFlight {
		c.m.reserve(c.entry, c.mine, -1)
		c.inFlight = false
	}
}

// settleBilled leaves the current shard's failed writes that no write
// charged yet to the next write to that shard (this acquire's or a later
// one's).
func (c *Charge) settleBilled(now int64) {
	if c.billed > 0 && len(c.tried) > 0 {
		c.m.carry(c.p.Ref, c.shard, c.billed, false, now)
	}
	c.billed = 0
}

// final passes a step on; on the last one (no call), the failed writes
// not charged yet are left for the next write to the shard.
func (c *Charge) final(s Step, now int64) Step {
	if s.Call == nil {
		c.settleBilled(now)
	}
	return s
}

// write asks for a charge write on the current shard; q is the plan it
// was built from (p, or p with the billed failures added to wcu), im the
// image (nil: none). A write that starts a quota's window by a transfer
// is made in one transaction with the donor's part (see quota.go).
func (c *Charge) write(ex store.Expr, path Path, q *Plan, im *Image, now int64) Step {
	c.phase, c.path = phWrite, path
	c.mine, c.from = q, im
	c.m.reserve(c.entry, q, 1)
	c.inFlight = true
	in := store.UpdateInput{Key: c.entry.key, Expr: ex, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
	c.sent = &Call{Update: &in}
	if donor, d, ok := q.transfer(im, now); ok {
		c.phase, c.donor = phTransfer, d
		c.sent = &Call{Transact: &store.TransactWriteInput{Actions: []store.Write{{Update: &in}, {Update: &donor}}}}
	}
	return Step{Path: path, Call: c.sent}
}

// afterTransfer: the transaction of a write with a transfer. It landed:
// read the item (a transaction returns none). It was cancelled: on the
// write's condition, go on from the item it returned, as after any failed
// write (another writer started the window there first, or the item
// changed); on the donor's, learn the donor's item and make the write
// again from the same image with what that donor (or another) can give,
// or refuse the shard.
func (c *Charge) afterTransfer(r *Result, now int64) Step {
	if r.Err == nil {
		c.phase = phFunded
		in := store.BatchGetInput{Keys: []store.Key{c.entry.key, c.sent.Transact.Actions[1].Update.Key}, ConsistentRead: true}
		return Step{Path: PathDiscover, Call: &Call{BatchGet: &in, Decided: true}}
	}
	c.landed()
	var tc *store.TransactionCanceledError
	if !errors.As(r.Err, &tc) || len(tc.Reasons) != 2 {
		if errors.Is(r.Err, store.ErrThrottled) {
			return c.throttled(r.Err, now)
		}
		return Step{Err: r.Err}
	}
	write, donor := tc.Reasons[0], tc.Reasons[1]
	switch {
	case throttleReason(write.Code):
		return c.throttled(&store.ThrottledError{Code: write.Code, Key: c.entry.key}, now)
	case throttleReason(donor.Code):
		// The donor's partition is hot (shard 0, often): this shard is
		// not; another shard may serve the acquire.
		return c.spread(&store.ThrottledError{Code: donor.Code, Key: c.sent.Transact.Actions[1].Update.Key}, now)
	case write.Code == store.ReasonTransactionConflict || donor.Code == store.ReasonTransactionConflict:
		if c.attempts < maxSlowAttempts {
			c.attempts++
			c.m.reserve(c.entry, c.mine, 1)
			c.inFlight = true
			return Step{Path: c.path, Call: c.sent}
		}
		return Step{Err: r.Err}
	case write.Code == store.ReasonConditionalCheckFailed:
		c.m.noteWrite(c.p.Ref, c.shard, c.n, false, c.view.busyness(now), now)
		im, err := Decode(write.Item)
		if err != nil {
			return Step{Err: err}
		}
		if img, err := Decode(donor.Item); err == nil && img != nil {
			c.learnDonor(img, now) // its condition failed too
		}
		c.contended, c.cold = true, false
		return c.informed(im, now)
	case donor.Code == store.ReasonConditionalCheckFailed:
		img, err := Decode(donor.Item)
		if err != nil {
			return Step{Err: err}
		}
		c.m.noteWrite(c.p.Ref, c.shard, c.n, false, c.view.busyness(now), now)
		c.attempts++
		c.billed++
		if img == nil || c.attempts > maxSlowAttempts {
			return c.nextShard(now) // the donor is gone: not this shard, then
		}
		c.learnDonor(img, now)
		c.onShard()
		if im := c.from; c.p.quotasShort(im, c.n, now) {
			v := c.view
			return c.exhausted(&Refusal{Plan: c.p, Img: im, N: c.n, Now: now, View: &v}, now)
		}
		return c.informedWrite(c.from, now)
	}
	return Step{Err: r.Err}
}

// throttleReason reports whether a transaction's cancellation reason is a
// throttle.
func throttleReason(code string) bool {
	return code == store.ReasonThrottlingError || code == store.ReasonProvisionedThroughputExceeded
}

// learnDonor learns img, the item of the donor of the transfer in flight.
func (c *Charge) learnDonor(img *Image, now int64) {
	learnt := int64(0)
	if c.donor == 0 {
		learnt = img.shardCount // shard 0 is the authority
	}
	c.m.learn(c.p.Ref, c.donor, img, learnt, now, c.lat, nil)
}

// afterFunded: the items a transfer's write landed on and its donor, read
// since the transaction returned none. The acquire is charged all the
// same when the read failed (its image is then nil).
func (c *Charge) afterFunded(r *Result, now int64) Step {
	var img *Image
	if r.Err == nil && len(r.Batch.Items) == 2 {
		img, _ = Decode(r.Batch.Items[0])
		img = c.mine.funded(r.Batch.Items[0], img)
		if donor, err := Decode(r.Batch.Items[1]); err == nil && donor != nil {
			c.learnDonor(donor, now)
		}
	}
	return c.charged(img, now)
}

func (c *Charge) afterWrite(r *Result, now int64) Step {
	if r.Err == nil {
		img, err := Decode(r.Write.Attributes)
		if err == nil {
			if c.created(img) {
				c.path = PathCreate // its rf is this write's
			}
			return c.charged(img, now) // it ends the write in flight
		}
		c.landed()
		return Step{Err: err}
	}
	c.landed()
	if errors.Is(r.Err, store.ErrThrottled) {
		return c.throttled(r.Err, now)
	}
	if errors.Is(r.Err, store.ErrTransactionConflict) && c.attempts < maxSlowAttempts {
		// A transaction holds the item: nothing applied, the same write
		// may be made again.
		c.attempts++
		c.m.reserve(c.entry, c.mine, 1)
		c.inFlight = true
		return Step{Path: c.path, Call: c.sent}
	}
	c.m.noteWrite(c.p.Ref, c.shard, c.n, false, c.view.busyness(now), now)
	im, err := conditionImage(r.Err)
	if err != nil {
		return Step{Err: err}
	}
	cold := c.cold
	if cold && im != nil {
		full := c.p.nearlyFull(im, c.n, now)
		c.m.notePrior(c.p.hash, &full, -1)
	}
	if c.path == PathFull && c.attempts == 0 {
		c.m.noteFull(c.p.hash, true)
	}
	c.cold = false
	// A blind full write that failed lost a race (its view said full; a
	// cold one, made without a view, says nothing of others); a
	// speculative write may only have found the bucket full, which says
	// nothing unless others write the shard: by this process's estimate,
	// or because the item shows writes since its last one (or it had
	// none) and a refill moments ago. (Processes that start on a bucket
	// together have no estimate: without this, each one's first full write
	// raced the others' without a cushion.)
	if c.path == PathFull && !cold || c.path == PathNormal || c.path == PathRetry || c.view.othersSince(now) >= 0.5 ||
		(im != nil && im.rf > now-recentRefill && c.othersWrote(im)) {
		c.contended = true
	}
	return c.informed(im, now)
}

// recentRefill is how long ago (ms) another writer's refill of an item
// says that writers contend for it now (see afterWrite): twice the longest
// short cushion.
const recentRefill = 2 * maxCushion

// outrunRaces is how many races an acquire loses on a shard at its limit
// before it is refused (see outrun).
const outrunRaces = 2

// outrun returns the refusal of an acquire whose write failed although
// the item it returned has the tokens (nil: write again). The item is as
// of about half a round trip ago and the next write lands half a round
// trip from now: refuse when what the others (and this process's writes
// in flight) likely take meanwhile leaves too few, as a local refusal
// would; or when this acquire has lost outrunRaces races and the others
// consume nearly the whole refill of a limit it charges (atLimit): the
// bucket is at its limit, its tokens go to whoever asks first, and racing
// on only adds failed writes. Its wait is then the time until its share
// of the refill (what the others leave) pays the charge.
//
// When no one else wrote since this process's last item, the write
// failed on a guard, not for the tokens, and lost no race: a caller who
// waited a refusal's wait must find the store's answer, not a guess, so
// only this process's writes in flight count (Refusal.Own).
func (c *Charge) outrun(im *Image, now int64) *Refusal {
	v := c.view
	v.Img, v.At, v.Promise = im, now-c.lat, 0
	if c.o.NoLocalRefusals {
		return nil
	}
	rl := &Refusal{Plan: c.p, Img: im, N: c.n, Now: now, View: &v, Outrun: true}
	if !c.othersWrote(im) {
		rl.Own = true
		if c.p.lacks(&v, c.n, now, c.o, false) {
			return rl
		}
		return nil
	}
	if c.p.lacks(&v, c.n, now, c.o, true) || c.attempts >= outrunRaces && c.p.atLimit(v, c.n) {
		return rl
	}
	return nil
}

// othersWrote reports whether im, the item a failed write returned, shows
// writes since the client's last item of the shard (the view's).
func (c *Charge) othersWrote(im *Image) bool {
	if c.view.Img == nil {
		return true
	}
	w, ok := im.writes()
	w0, ok0 := c.view.Img.writes()
	return !ok || !ok0 || w > w0
}

// charged ends the acquire with the image the successful write returned
// (the charge write in flight, or a create, whose write was noted
// already).
func (c *Charge) charged(img *Image, now int64) Step {
	n := int64(0)
	if img != nil && (c.shard == 0 || img.shardCount > c.n) {
		n = img.shardCount
	}
	// What the write teaches, in one look at the memory.
	c.m.mu.Lock()
	noted := c.inFlight
	if noted {
		c.entry.reserve(c.mine, -1)
		c.inFlight = false
	}
	own := c.path == PathFull || c.path == PathNormal || c.path == PathCreate // the write set rf
	c.m.landedLocked(c.p.Ref, c.shard, noted, c.n, c.view.busyness(now), img, own, n, now, c.lat, c.mine)
	if c.cold && img != nil {
		full := c.p.nearlyFull(img, c.n, now)
		c.m.notePriorLocked(c.p.hash, &full, -1)
	}
	if c.path == PathFull && c.attempts == 0 {
		c.m.noteFullLocked(c.p.hash, false)
	}
	if si := c.entry; si != nil && si.rateAt != 0 && !si.provisional {
		c.m.notePriorLocked(c.p.hash, nil, si.others)
	}
	c.m.mu.Unlock()
	c.cold = false
	c.billed = 0 // the write charged them
	if n > 0 {
		c.n = n
	}
	c.Shard, c.N, c.Img, c.At = c.shard, c.n, img, c.wrote
	return Step{Done: true, Path: c.path}
}

// throttled handles a write the partition refused.
func (c *Charge) throttled(err error, now int64) Step {
	c.throttles++
	if c.p.fewWrites(c.n) && c.p.draining(c.view, c.n, now) && !c.o.NoLocalRefusals {
		// The limits admit too few writes to heat the partition, and the
		// bucket is being drained: the attempts it refuses heat it. The
		// bucket is at its limit; the
		// acquire is refused like one that lost its race, and waits as if
		// the others took nearly all of the refill (they do): its
		// process then answers the next acquires locally until then,
		// rather than add to the throttled writes.
		v := c.view.saturated(c.p, c.n, now)
		c.lastRL = &Refusal{Plan: c.p, Img: v.Img, N: c.n, Now: now, View: &v, Outrun: true, Raced: true}
		if w := retryOf(c.lastRL); w < 1<<62 {
			c.m.promisedBinding(c.p.Ref, c.shard, now+max(w, 1))
		}
		return Step{Refused: c.lastRL, Path: PathReject}
	}
	if c.m.noteWrite(c.p.Ref, c.shard, c.n, true, c.view.busyness(now), now) && c.m.mayDouble(c.p.Ref, c.shard, c.n, now) {
		// The partition keeps refusing writes: it is hot, not merely
		// unlucky once (and, right after a doubling, so hot that the
		// doubling cannot be enough).
		return c.double(now, func() Step { return c.spread(err, now) })
	}
	return c.spread(err, now)
}

// recountThrottles is how many throttled writes of one acquire, each on
// another shard, send it to read shard 0's count when no shard is left,
// however little the client measured (see spread).
const recountThrottles = 2

// spread tries another shard after a throttle, or gives up with it.
func (c *Charge) spread(err error, now int64) Step {
	// (Not when a quota needs shard 0 first, and shard 0 is what refused:
	// see nextShard.)
	if c.n > 1 && len(c.tried) < exhaustedShards && c.untried(now) && !c.needsShardZero(now) {
		return c.nextShard(now) // another shard is another partition
	}
	if g := c.guessed; g > 0 && c.choices < maxShardChoices && int64(g-1) < c.n && (g == 1 || !c.needsShardZero(now)) {
		// So is a shard the acquire passed on a guess. Right after a
		// doubling the new shard fills as it is drained and looks empty
		// in the images, while shard 0, crowded by the writers that have
		// not learnt the count, throttles: ask the store there (one
		// write) rather than answer unavailable beside its refill.
		c.guessed, c.lastRL = 0, nil
		c.enter(g-1, now)
		return c.blindWrite(now)
	}
	if c.throttle == nil && c.phase == phWrite && (c.view.busyness(now) != busyNo || c.throttles >= recountThrottles) {
		// No shard left at the count this client knows, on a shard it
		// measured near its partition's ceiling, or after throttles on
		// recountThrottles shards (when a key gets hot from a cold
		// start, its clients have not measured the rate yet: it takes
		// two items 400 ms apart); but a throttled write returns no
		// item, and the bucket may have doubled since the
		// client learned its count (its writers crowd the old shards
		// until they learn it): read shard 0's count (a consistent read,
		// 1 RCU; reads do not count against the partition's writes)
		// before answering unavailable. (One throttle on a shard not
		// measured busy is a storm or bad luck, not a split.)
		c.throttle = err
		c.phase, c.path = phRecount, PathDiscover
		in := store.BatchGetInput{Keys: []store.Key{c.p.Ref.WithShard(0).Key()}, ConsistentRead: true}
		return Step{Path: PathDiscover, Call: &Call{BatchGet: &in}}
	}
	return Step{Err: err}
}

// afterRecount: shard 0's count, read after a throttle left no shard to
// spread to. Larger than the client knew: learn it and spread at it (shard
// 0 stays tried). The same, and the throttle was shard 0's: no one doubled
// the bucket yet, and its one partition is at its ceiling. A client that
// measured the shard written faster than the ceiling doubles it now (the
// partition cannot take that rate, whatever else throttles), and the
// acquire writes shard 0 again from the item the read returned, once: the
// read took a round trip, in which the partition refilled. Otherwise the
// throttle is the answer.
func (c *Charge) afterRecount(r *Result, now int64) Step {
	if r.Err == nil && len(r.Batch.Items) > 0 {
		img, err := Decode(r.Batch.Items[0])
		if err == nil && img.shardCount > c.n {
			c.m.learn(c.p.Ref, 0, img, img.shardCount, now, c.lat, nil)
			c.n = img.shardCount
			return c.nextShard(now)
		}
		if err == nil && img.shardCount == c.n && c.shard == 0 && c.view.overCeiling(now) && !c.m.stormy(now) {
			c.m.learn(c.p.Ref, 0, img, img.shardCount, now, c.lat, nil)
			again := func() Step { return c.writeAgain(img, now) }
			if c.m.mayDouble(c.p.Ref, c.shard, c.n, now) {
				return c.double(now, again)
			}
			return again()
		}
	}
	return Step{Err: c.throttle}
}

// writeAgain makes the charge write on the current shard again after a
// throttle, from im, the item a read of it returned: a refusal when it
// lacks the tokens (the store's answer, not a guess), else the write it
// calls for. A throttle on it is the answer (c.throttle is set).
func (c *Charge) writeAgain(im *Image, now int64) Step {
	c.onShard()
	if c.p.shortfall(im, c.n, now, c.view.hot(now)) == shortApp {
		v := c.view
		return c.exhausted(&Refusal{Plan: c.p, Img: im, N: c.n, Now: now, View: &v}, now)
	}
	return c.informedWrite(im, now)
}

// informed goes on from the item a failed write returned.
func (c *Charge) informed(im *Image, now int64) Step {
	c.attempts++
	c.billed++ // DynamoDB bills a failed conditional write like a successful one
	if c.attempts > maxSlowAttempts {
		// Lost every race: refuse from the latest item. Its tokens went
		// to the others; the wait is for this acquire's share of the
		// refill.
		v := c.view
		v.Img, v.At, v.Promise = im, now-c.lat, 0
		c.lastRL = &Refusal{Plan: c.p, Img: im, N: c.n, Now: now, View: &v, Outrun: true, Raced: true}
		return Step{Refused: c.lastRL, Path: PathReject}
	}
	if im == nil {
		return c.create(now)
	}
	if im.shardCount > c.n {
		// The bucket doubled since we last looked: the other writers that
		// have not learned it yet crowd the old shards (all of them shard
		// 0, for a client that knew one shard). Spread out at the new
		// count rather than join them here.
		c.m.learn(c.p.Ref, c.shard, im, im.shardCount, now, c.lat, nil)
		c.n = im.shardCount
		if c.shard != 0 || !c.needsShardZero(now) && c.untried(now) {
			return c.nextShard(now)
		}
		// Shard 0 is where a quota's window starts (see quota.go), or the
		// only shard that holds some of a quota's window: write it again,
		// at its count.
	}
	learnt := int64(0)
	if c.shard == 0 {
		learnt = im.shardCount // shard 0 is the authority
		c.n = learnt
	}
	c.m.learn(c.p.Ref, c.shard, im, learnt, now, c.lat, nil)
	if c.shard != 0 && c.needsShardZero(now) {
		// A quota's window ended since the acquire chose this shard: the
		// next window starts here only at shard 0's count (see quota.go).
		return c.nextShard(now)
	}
	c.onShard() // shard 0 may have moved on meanwhile
	if c.view.Rate <= 0 {
		// The image may have brought the shard's first (provisional)
		// rates: the write that follows burns headroom with them, on a
		// bucket many writers start on at once.
		v := c.m.View(c.p.Ref, c.shard)
		c.view.Rate, c.view.Others = v.Rate, v.Others
	}
	switch c.p.shortfall(im, c.n, now, c.view.hot(now)) {
	case shortApp:
		v := c.view // its estimates of the other writers set the wait
		return c.exhausted(&Refusal{Plan: c.p, Img: im, N: c.n, Now: now, View: &v}, now)
	case shortWCU:
		return c.hot(im, now)
	}
	return c.informedWrite(im, now)
}

// informedWrite makes the write the item a failed write returned calls
// for, or refuses when the others take its tokens first (outrun).
func (c *Charge) informedWrite(im *Image, now int64) Step {
	if rl := c.outrun(im, now); rl != nil {
		return c.exhausted(rl, now)
	}
	q := c.p.withBilled(c.billed)
	ex, path, err := q.informed(im, c.view, c.n, now, c.lat, c.contended)
	if err != nil {
		return Step{Err: err}
	}
	c.wrote = now
	return c.write(ex, path, q, im, now)
}

// exhausted records a shard that lacks tokens and tries another, or
// refuses.
func (c *Charge) exhausted(rl *Refusal, now int64) Step {
	c.lastRL = rl
	c.promise(rl)
	if rl.Img != nil && rl.Img.shardCount > c.n {
		c.n = rl.Img.shardCount // learned of a doubling: the new shards may have tokens
		return c.nextShard(now)
	}
	if len(c.tried) >= exhaustedShards || !c.untried(now) {
		return Step{Refused: rl, Path: PathReject}
	}
	return c.nextShard(now)
}

// promise records when the refusal says the request fits on its shard.
func (c *Charge) promise(rl *Refusal) {
	at := promisedAt(rl, rl.Now)
	if at == 0 {
		return
	}
	shared := rl.View != nil && c.p.atLimit(*rl.View, c.n)
	c.m.promised(c.p.Ref, c.shard, at, rl.Now, shared)
}

// refuse ends the acquire when no shard is left to try.
func (c *Charge) refuse(now int64) Step {
	if c.lastRL != nil {
		return Step{Refused: c.lastRL, Path: PathReject}
	}
	return Step{Refused: &Refusal{Plan: c.p, N: c.n, Now: now}, Path: PathReject}
}

// hot handles a shard whose wcu gauge is empty on a partition the client
// measured near its ceiling (im: the item its failed write returned): it
// doubles the bucket, unless the new shards have not had time to take load
// off this one, and spreads to another shard.
func (c *Charge) hot(im *Image, now int64) Step {
	if !c.m.mayDouble(c.p.Ref, c.shard, c.n, now) {
		return c.spreadHot(im, now)
	}
	return c.double(now, func() Step { return c.spreadHot(im, now) })
}

// spreadHot tries another shard after a hot one, or, with none left, goes
// on here: the gauge is counted, never a condition, and heat alone is
// no answer.
func (c *Charge) spreadHot(im *Image, now int64) Step {
	if len(c.tried) < exhaustedShards && c.untried(now) {
		return c.nextShard(now)
	}
	return c.informedWrite(im, now)
}

// double asks for the doubling write from the current count; after says
// what follows when the count cannot grow (at the limit, or shard 0 gone),
// or need not: a quota's window started at fewer shards than the count,
// and a shard above holds nothing of it yet (see Plan.quotaUnstarted: a
// doubling in it already made shards that wait for their transfers, and
// another would add only more).
// A doubling that lands (or one learned) restarts the shard choice at the
// new count.
func (c *Charge) double(now int64, after func() Step) Step {
	if 2*c.n > keys.MaxShards || !c.p.Divisible(2*c.n) || c.p.fewWrites(c.n) || c.plan.quotaUnstarted(c.m, c.n, now) {
		c.m.setPendingDoubling(c.p.Ref, 0, now)
		return after()
	}
	c.phase, c.path, c.after = phDouble, PathDouble, after
	// Shard 0 most likely holds this plan's limits; if not, the write
	// fails on their hash and afterDouble makes it again with its own.
	in := keys.DoubleShards(c.p.Ref, c.n, c.p.keysLimits())
	return Step{Path: PathDouble, Call: &Call{Update: &in}}
}

func (c *Charge) afterDouble(r *Result, now int64) Step {
	if r.Err == nil {
		img, _ := Decode(r.Write.Attributes)
		c.m.learn(c.p.Ref, 0, img, 2*c.n, now, c.lat, nil)
		c.m.setPendingDoubling(c.p.Ref, 0, now)
		c.n, c.tried = 2*c.n, c.tried[:0]
		if c.stillHot(now) {
			// The shard's write rate, spread over the new count, still
			// leaves each shard at the ceiling: double again now rather
			// than after another second of throttles (each doubling its
			// own write, conditional on the count it changes).
			return c.double(now, func() Step { return c.nextShard(now) })
		}
		return c.nextShard(now)
	}
	if errors.Is(r.Err, store.ErrThrottled) {
		if c.view.hot(now) {
			// Keep trying on the next acquires: a partition this client
			// measured at its ceiling refuses every write, and the doubling
			// is what lets it breathe again. (Throttles alone may be a
			// storm: those doublings are not pressed.)
			c.m.setPendingDoubling(c.p.Ref, c.n, now)
		}
		// A throttled doubling is not the acquire's answer: the acquire
		// goes on as if it had not been tried.
		return c.after()
	}
	var cf *store.ConditionFailedError
	if !errors.As(r.Err, &cf) {
		return Step{Err: r.Err}
	}
	c.m.setPendingDoubling(c.p.Ref, 0, now)
	shard0 := cf.Item // nil when shard 0 is missing: the next acquire creates it
	if m, ok := shard0.Int(keys.AttrShardCount); ok && m > c.n {
		img, _ := Decode(shard0)                       // nil when odd: the count alone, not vouched for
		c.m.learn(c.p.Ref, 0, img, m, now, c.lat, nil) // someone else doubled first
		c.n, c.tried = m, c.tried[:0]
		return c.nextShard(now)
	}
	if m, _ := shard0.Int(keys.AttrShardCount); m == c.n && !c.redoubled {
		// Still at our count, so shard 0 holds other limits than this
		// plan's (a configuration change no write brought it to yet): the
		// doubling resets the guards of the limits it holds, so make it
		// again with those, once.
		c.redoubled = true
		in := keys.DoubleShards(c.p.Ref, c.n, keys.LimitsOf(shard0))
		return Step{Path: PathDouble, Call: &Call{Update: &in}}
	}
	return c.after() // shard 0 is odd: the next acquire mends it
}

// stillHot reports whether the write rate this client measured on the
// current shard (at viewN shards), spread evenly over the c.n shards a
// doubling just made, is still at the partition ceiling on each.
func (c *Charge) stillHot(now int64) bool {
	v := &c.view
	if v.busyness(now) == busyNo || c.viewN <= 0 {
		return false
	}
	return v.Rate*float64(c.viewN)/float64(c.n) >= hotRate
}

// create makes the current shard, which does not exist. Shard 0 is the
// first shard of a bucket, or the first of one whose shard 0 expired
// while other shards live on: before making it, look for them
// (discover).
//
// Another shard is made only at the count shard 0 holds, and only when
// that count includes it: read shard 0 first (verify). A client that
// remembers a count from before the whole bucket expired must not make
// shards beside a shard 0 made again at one shard: they would refill on
// top of it.
func (c *Charge) create(now int64) Step {
	if c.shard == 0 {
		c.phase, c.path = phDiscover, PathDiscover
		q := c.p.Ref.ShardsQuery()
		return Step{Path: PathDiscover, Call: &Call{Query: &q}}
	}
	c.phase, c.path = phVerify, PathDiscover
	in := store.BatchGetInput{Keys: []store.Key{c.p.Ref.WithShard(0).Key()}, ConsistentRead: true}
	return Step{Path: PathDiscover, Call: &Call{BatchGet: &in}}
}

// afterVerify: shard 0's count says whether the missing shard belongs to
// the bucket. It does: make it, empty. It does not (the bucket was made
// again with fewer shards), or shard 0 is missing too: choose a shard
// again at the count shard 0 teaches (1 when it is missing: the write to
// shard 0 then looks for its siblings).
func (c *Charge) afterVerify(r *Result, now int64) Step {
	if r.Err != nil {
		return c.readFailed(r.Err, now)
	}
	var img *Image
	if len(r.Batch.Items) > 0 {
		var err error
		if img, err = Decode(r.Batch.Items[0]); err != nil {
			return Step{Err: err}
		}
	}
	if img != nil && img.shardCount > int64(c.shard) {
		c.m.learn(c.p.Ref, 0, img, img.shardCount, now, c.lat, nil)
		c.n = img.shardCount
		c.onShard() // the quotas' windows as shard 0 shows them now
		return c.createAt(c.n, now)
	}
	if img != nil {
		c.m.learn(c.p.Ref, 0, img, img.shardCount, now, c.lat, nil)
		c.n = img.shardCount
	} else {
		c.m.ForgetBucket(c.p.Ref) // its count included
		c.n = 1
	}
	c.tried = c.tried[:0]
	return c.nextShard(now)
}

func (c *Charge) createAt(n, now int64) Step {
	q := c.p.withBilled(c.billed - 1) // the Put bills the failure before it
	put := q.create(c.shard, n, now)
	c.wrote = now
	c.phase, c.path, c.put = phCreate, PathCreate, &put.Item
	c.mine = q
	if c.shard != 0 {
		c.mine = nil // a new shard other than 0 charges nothing
	}
	return Step{Path: PathCreate, Call: &Call{Put: &put}}
}

// afterDiscover: the shards that exist besides shard 0. None: a new
// bucket, made at one shard. Some: shard 0 expired (DynamoDB deletes
// expired items one by one, in no order) while they live on with their
// tokens; making shard 0 full at one shard would add a whole burst to
// theirs. Read them for the count they were written at.
func (c *Charge) afterDiscover(r *Result, now int64) Step {
	if r.Err != nil {
		return c.readFailed(r.Err, now)
	}
	var ks []store.Key
	for _, it := range r.Query.Items {
		if s, ok := c.p.Ref.ShardOf(it); ok && s != 0 && len(ks) < 100 {
			ks = append(ks, c.p.Ref.WithShard(s).Key())
		}
	}
	if len(ks) == 0 {
		c.n = 1
		return c.createAt(1, now)
	}
	c.phase, c.path = phSiblings, PathDiscover
	return Step{Path: PathDiscover, Call: &Call{BatchGet: &store.BatchGetInput{Keys: ks, ConsistentRead: true}}}
}

func (c *Charge) afterSiblings(r *Result, now int64) Step {
	if r.Err != nil {
		return c.readFailed(r.Err, now)
	}
	n := int64(1)
	for _, it := range r.Batch.Items {
		if m, ok := it.Int(keys.AttrShardCount); ok && m > n {
			n = m
		}
	}
	c.n = n
	return c.createAt(n, now)
}

// readFailed handles a failed read of the discovery: a throttle as for a
// write, anything else ends the acquire.
func (c *Charge) readFailed(err error, now int64) Step {
	if errors.Is(err, store.ErrThrottled) {
		return c.throttled(err, now)
	}
	return Step{Err: err}
}

func (c *Charge) afterCreate(r *Result, now int64) Step {
	if r.Err == nil {
		img, err := Decode(*c.put)
		if err != nil {
			return Step{Err: err}
		}
		c.m.noteWrite(c.p.Ref, c.shard, c.n, false, c.view.busyness(now), now)
		if c.shard != 0 {
			// A new shard starts empty: this request is served elsewhere.
			// Its emptiness is no refusal (no promise, no answer): a
			// doubling must not refuse what the older shards hold.
			// The older shards may be tried again (within maxShardChoices).
			c.m.learn(c.p.Ref, c.shard, img, 0, now, c.lat, nil)
			c.tried = append(c.tried[:0], c.shard)
			return c.nextShard(now)
		}
		return c.charged(img, now)
	}
	if errors.Is(r.Err, store.ErrThrottled) {
		return c.throttled(r.Err, now)
	}
	im, err := conditionImage(r.Err)
	if err != nil {
		return Step{Err: err}
	}
	c.contended = true
	return c.informed(im, now)
}

// conditionImage turns a condition failure into the item it returned
// (nil when there was none); any other error is returned as is.
func conditionImage(err error) (*Image, error) {
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) {
		return nil, err
	}
	return Decode(cf.Item)
}

// withBilled returns p charging the hidden limit for billed failed writes
// as well as its own (p itself when there are none).
func (p *Plan) withBilled(billed int64) *Plan {
	if billed <= 0 {
		return p
	}
	q := p.clone() // with gen: a reservation's release names its hold generation
	q.specs[len(q.specs)-1].amount += billed * unit
	return q
}

// pick returns a uniformly random shard in [0, n) not in tried (-1 when
// every shard was tried).
func pick(rnd Rand, n int64, tried []int) int {
	free := int(n) - len(tried)
	if free <= 0 {
		return -1
	}
	k := rnd.IntN(free)
	sorted := slices.Clone(tried)
	slices.Sort(sorted)
	for _, t := range sorted { // the k-th shard not tried
		if t <= k {
			k++
		}
	}
	return k
}
