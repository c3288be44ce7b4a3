package sim

import (
	"context"
	"errors"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// callKind is what a client coroutine yields to the scheduler.
type callKind uint8

const (
	callSleep      callKind = iota + 1 // wake me at until
	callStore                          // one store request (op says which)
	callConcurrent                     // WriteConcurrently: one request per write
)

// call is a client's pending request to the scheduler, reused for every
// call of the client (no allocation per call).
type call struct {
	kind    callKind
	op      memsim.OpKind
	until   int64
	req     request
	writes  []store.Write
	resp    response
	results []store.WriteResult
}

// client is one simulated process: a coroutine running ordinary limiter
// code (or an actor) over its own store handle, with its own limiter,
// clock, random source and caches.
type client struct {
	capLeases []int // the cap leases its last acquire admitted (see capLog)
	s         *Sim
	id        int32
	kind      clientKind
	actor     Actor
	rng       *rand.Rand
	clock     clientClock
	lim       *limiter.Limiter
	startAt   int64

	yield   func(*call) bool
	next    func() (*call, bool)
	stop    func()
	stopped bool
	call    call
	pending int

	cur     opState
	arrival int64   // a writer's next arrival not yet taken
	mean    float64 // a writer's mean time between arrivals (ns)
	crashes uint64  // how many times this writer's process crashed
	consume map[string]int64
	adjust  map[string]int64
	leases  []pendingLease // latest due first (see schedule)
	// charged holds the partition keys the current cascading acquire's
	// writes charged: a later write of it to one of them is its
	// compensation (Sim.isUndo).
	charged []string
	// cancels draws which acquires their caller cancels (nil unless the
	// fault plan cancels some).
	cancels *rand.Rand
}

type clientKind uint8

const (
	kindWriter clientKind = iota
	kindProbe
	kindActor
)

// opState is the client's operation in progress.
type opState struct {
	active bool
	op     operation
	eff    effects
	cause  cause
	snap   [maxRoles]uint64
	heard  [maxRoles]int64 // see checker.Snapshot
	// cascade: a cascading acquire (its charged writes are remembered).
	cascade bool
	// The caller's cancellation: cancel is called after cancelAt store
	// calls (calls counts them), or while the cancelAt-th is in flight
	// when cancelMid is set; nil when the caller does not cancel.
	cancel    context.CancelFunc
	cancelAt  int
	cancelMid bool
	calls     int
}

// pendingLease is an admitted lease waiting for its model call to end.
type pendingLease struct {
	due       int64
	lease     *limiter.Lease
	bucket    int32
	shard     int32
	action    uint8 // settleCommit, settleAdjust, settleRollback, settleAdjustRollback
	estimate  [MaxLimits]int64
	base      [MaxLimits]int64 // what the lease holds, as far as the client knows
	unkPos    [MaxLimits]int64
	unkNeg    [MaxLimits]int64
	mode      string // "admit" for a lease that charged nothing (admit mode)
	skipped   [maxRoles][MaxLimits]bool
	capLeases []int // their indices in the Sim's capLog
	leftOut   [maxRoles]bool
}

const (
	settleAdjust uint8 = iota + 1
	settleRollback
	settleAdjustRollback
	settleCommit // Workload.HoldLeases: commit after the call
)

func (c *client) start(body func()) {
	c.next, c.stop = iter.Pull(func(yield func(*call) bool) {
		c.yield = yield
		body()
	})
}

// suspend hands the pending call to the scheduler and waits for it to
// resume this client. False means the simulation is over.
func (c *client) suspend() bool { return c.yield(&c.call) }

// sleepUntil waits until virtual time t; false when the simulation ended.
func (c *client) sleepUntil(t int64) bool {
	c.call.kind, c.call.until = callSleep, t
	return c.suspend()
}

// handle is a client's store.Store: every call is a scheduling point.
type handle struct{ c *client }

var _ store.Store = handle{}

// unavailable is what a store call answers when the simulation ends
// (ErrStopped) or its context is cancelled while it is in flight (the
// context's error): outcome unknown for a write (it may have applied).
func unavailable(op string, write bool, err error) error {
	return &store.UnavailableError{Op: op, OutcomeUnknown: write, Err: err}
}

// do yields one store request and returns its response.
func (h handle) do(ctx context.Context, op memsim.OpKind, fill func(*request)) response {
	if h.c == nil {
		return response{err: errNoEnv}
	}
	c := h.c
	c.call.kind, c.call.op = callStore, op
	q := &c.call.req
	fill(q)
	undo := op == memsim.OpUpdate && refunds(q.upd.Expr)
	sent := c.s.now
	if err := c.send(ctx, op, op.String(), undo, func(yield func(string) bool) {
		if op.IsWrite() {
			yield(q.writePK(op))
		}
	}); err != nil {
		return response{err: err}
	}
	r := c.call.resp
	if op.IsWrite() {
		c.heard(q.writePK(op), sent, r.err)
	}
	if c.cur.cascade && r.err == nil && op.IsWrite() && charges(q.upd.Expr, op == memsim.OpUpdate) {
		c.charged = append(c.charged, q.writePK(op))
	}
	c.call = call{}
	if c.cur.cancel != nil && c.afterCall(ctx) {
		r = response{err: unavailable(op.String(), op.IsWrite(), ctx.Err())}
	}
	return r
}

// heard tells the checker that the write to pk sent at sent was answered
// with the item (err nil, or its condition failed).
func (c *client) heard(pk string, sent int64, err error) {
	if c.s.chk == nil {
		return
	}
	if _, failed := errors.AsType[*store.ConditionFailedError](err); err == nil || failed {
		c.s.chk.Heard(c.id, pk, sent)
	}
}

// send hands the call in c.call (named name, op for its writes) to the
// scheduler on the caller's ctx; pks are the partition keys of its
// writes. It returns the error that answers the call instead of the
// store: ctx's, cancelled before the call (to a cascading acquire, a
// refund (undo) of an item it charged was its compensation, which must
// not depend on the caller's context; a charge of it again is a new try,
// after a refusal by shadow limits), or ErrStopped; nil: the answers are
// in c.call.
func (c *client) send(ctx context.Context, op memsim.OpKind, name string, undo bool, pks iter.Seq[string]) error {
	if err := ctx.Err(); err != nil {
		if c.cur.active && c.cur.cancel != nil {
			c.cur.op.Cancelled = true
		}
		for pk := range pks {
			if undo && c.cur.cascade && c.cur.active && slices.Contains(c.charged, pk) {
				c.cur.op.UndoCancelled = true
			}
		}
		c.call = call{}
		return &store.UnavailableError{Op: name, Err: err}
	}
	if c.s.stopping || !c.suspend() {
		c.call = call{}
		return unavailable(op.String(), op.IsWrite(), ErrStopped)
	}
	return nil
}

// afterCall counts a store call of the operation in progress and cancels
// its caller's context when the draw says so. True: the cancellation came
// while the call was in flight, and its answer is lost to it.
func (c *client) afterCall(ctx context.Context) bool {
	c.cur.calls++
	if c.cur.calls != c.cur.cancelAt {
		return false
	}
	c.cur.cancel()
	// A call made on a context detached from the caller's (a cascade's
	// compensation) is not stopped by the cancellation.
	if c.cur.cancelMid && ctx.Err() != nil {
		c.cur.op.Cancelled = true
		return true
	}
	return false
}

// Get implements store.Store.
func (h handle) Get(ctx context.Context, in store.GetInput) (store.GetOutput, error) {
	r := h.do(ctx, memsim.OpGet, func(q *request) { q.get = in })
	return r.get, r.err
}

// BatchGet implements store.Store.
func (h handle) BatchGet(ctx context.Context, in store.BatchGetInput) (store.BatchGetOutput, error) {
	r := h.do(ctx, memsim.OpBatchGet, func(q *request) { q.batch = in })
	return r.batch, r.err
}

// Put implements store.Store.
func (h handle) Put(ctx context.Context, in store.PutInput) (store.WriteOutput, error) {
	r := h.do(ctx, memsim.OpPut, func(q *request) { q.put = in })
	return r.write, r.err
}

// Update implements store.Store.
func (h handle) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	r := h.do(ctx, memsim.OpUpdate, func(q *request) { q.upd = in })
	return r.write, r.err
}

// Delete implements store.Store.
func (h handle) Delete(ctx context.Context, in store.DeleteInput) (store.WriteOutput, error) {
	r := h.do(ctx, memsim.OpDelete, func(q *request) { q.del = in })
	return r.write, r.err
}

// TransactWrite implements store.Store.
func (h handle) TransactWrite(ctx context.Context, in store.TransactWriteInput) (store.WriteOutput, error) {
	r := h.do(ctx, memsim.OpTransactWrite, func(q *request) { q.tx = in })
	return r.write, r.err
}

// Query implements store.Store.
func (h handle) Query(ctx context.Context, in store.QueryInput) (store.QueryOutput, error) {
	r := h.do(ctx, memsim.OpQuery, func(q *request) { q.query = in })
	return r.query, r.err
}

// Scan implements store.Store by reading the table directly, with no
// latency: the simulated clients never scan (it is for operator commands).
func (h handle) Scan(ctx context.Context, in store.ScanInput) (store.ScanOutput, error) {
	if h.c == nil {
		return store.ScanOutput{}, errNoEnv
	}
	return h.c.s.st.Scan(ctx, in)
}

// WriteConcurrently implements store.Store: each write is a request of its
// own, with its own latency, applied when it arrives; the call returns
// when every answer is in.
func (h handle) WriteConcurrently(ctx context.Context, writes []store.Write) []store.WriteResult {
	if h.c == nil {
		out := make([]store.WriteResult, len(writes))
		for i := range out {
			out[i].Err = errNoEnv
		}
		return out
	}
	c := h.c
	c.call.kind, c.call.writes = callConcurrent, writes
	sent := c.s.now
	err := c.send(ctx, memsim.OpUpdate, "WriteConcurrently", false, func(yield func(string) bool) {
		for i := range writes {
			if !yield(actionPK(&writes[i])) {
				return
			}
		}
	})
	if err == nil {
		res := c.call.results
		c.call = call{}
		for i, r := range res {
			c.heard(actionPK(&writes[i]), sent, r.Err)
			if w := &writes[i]; c.cur.cascade && r.Err == nil && (w.Update == nil || charges(w.Update.Expr, true)) {
				c.charged = append(c.charged, actionPK(w))
			}
		}
		if c.cur.cancel == nil || !c.afterCall(ctx) {
			return res
		}
		err = unavailable("WriteConcurrently", true, ctx.Err())
	}
	out := make([]store.WriteResult, len(writes))
	for i := range out {
		out[i].Err = err
	}
	return out
}

// refunds reports whether an update gives tokens back: it ADDs a negative
// amount to a limit's total consumed (b_{L}_tc), as a cascade's
// compensation does. ADD is the expression's last clause.
func refunds(ex store.Expr) bool {
	_, add, ok := strings.Cut(ex.Update, "ADD ")
	if !ok {
		return false
	}
	for add != "" {
		var item string
		item, add, _ = strings.Cut(add, ", ")
		name, value, _ := strings.Cut(item, " ")
		if strings.HasSuffix(ex.Names[name], "_tc") {
			if v, ok := ex.Values[value].AsInt(); ok && v < 0 {
				return true
			}
		}
	}
	return false
}

// charges reports whether a write may charge its item (or return a
// charge): every charge, and every compensation, moves a limit's total
// consumed (an attribute named b_{L}_tc), or creates the item (a put). A
// doubling only resets the guards: a write of the same item after it
// (the charge at the new count) is no compensation.
func charges(ex store.Expr, update bool) bool {
	if !update {
		return true
	}
	for _, name := range ex.Names {
		if strings.HasSuffix(name, "_tc") {
			return true
		}
	}
	return false
}

func (c *client) begin(kind opKind, bucket int32, amount [MaxLimits]int64) *operation {
	s := c.s
	s.nextOp++
	c.cur = opState{active: true, op: operation{ID: s.nextOp, Client: c.id, Kind: kind, Bucket: bucket, Start: s.now, Amount: amount, Shard: -1},
		cause: cause{Op: s.nextOp, Client: c.id, Kind: kind, Bucket: bucket, Amount: amount, Start: s.now}}
	c.charged = c.charged[:0]
	if s.chk != nil {
		c.cur.snap, c.cur.heard = s.chk.Snapshot(c.id, bucket)
	}
	if kind == opAcquire {
		s.second(s.now).Attempts++
	}
	return &c.cur.op
}

// end finishes the operation in progress with the outcome err implies.
func (c *client) end(err error) outcome {
	s := c.s
	op := &c.cur.op
	op.End = s.now
	o := classify(err)
	if op.FailedOpen {
		o = outUnavailable // a store failure, answered with a lease that charged nothing
	}
	if s.stopping {
		o = outCut
	}
	op.Outcome = o
	op.CtxErr = errors.Is(err, context.Canceled)
	if op.Cancelled {
		s.stats.cancelled++
	}
	if o == outRejected {
		// errors.AsType, not errors.As: no target to allocate per operation.
		if rl, ok := errors.AsType[*limiter.RateLimitedError](err); ok {
			op.RetryAfter, op.ByParent, op.Local = int64(rl.RetryAfter), rl.Parent, rl.Local
			op.ShadowRefused = slices.ContainsFunc(rl.Limits, func(ls limiter.LimitState) bool { return ls.Exceeded }) &&
				!slices.ContainsFunc(rl.Limits, func(ls limiter.LimitState) bool { return ls.Exceeded && !ls.Limit.Shadow })
			if !slices.ContainsFunc(rl.Limits, func(ls limiter.LimitState) bool { return ls.Exceeded }) {
				s.stats.falseRejections++
			}
		}
	}
	if op.Kind == opAcquire {
		sec := s.second(s.now)
		switch o {
		case outAdmitted:
			s.stats.admitted++
			sec.Admitted++
		case outRejected:
			s.stats.rejected++
			sec.Rejected++
		case outUnavailable:
			s.stats.unavailable++
			sec.Unavailable++
		case outDisabled:
			s.stats.disabled++
		}
		if op.Mode == "admit" && o == outAdmitted {
			s.stats.bypassed++
		}
		if o == outAdmitted && op.Skipped != [maxRoles][MaxLimits]bool{} {
			s.stats.wouldRefuse++
		}
		if o != outCut {
			s.stats.acquires++
		}
	} else if o != outCut {
		if op.Kind == opAdjust {
			s.stats.adjusts++
		} else {
			s.stats.rollbacks++
		}
	}
	s.mix(uint64(s.now))
	s.mix(uint64(op.Client)<<16 | uint64(op.Kind)<<8 | uint64(o))
	if s.chk != nil {
		s.chk.OpDone(op, &c.cur.eff)
	}
	c.cur.active = false
	return o
}

func classify(err error) outcome {
	switch {
	case err == nil:
		return outAdmitted
	case store.OutcomeUnknown(err):
		return outUnavailable // it may have charged, refusal or not
	case errors.Is(err, limiter.ErrRateLimited):
		return outRejected
	case errors.Is(err, limiter.ErrDisabled):
		return outDisabled
	case errors.Is(err, limiter.ErrInvalid), errors.Is(err, store.ErrValidation):
		return outInvalid
	}
	return outUnavailable
}

func (c *client) acquire(bi int32, amount [MaxLimits]int64, limits []limiter.Limit, retry *retryInfo) (*limiter.Lease, outcome, *operation) {
	s := c.s
	bm := &s.model.Buckets[bi]
	clear(c.consume)
	for i, n := range s.model.LimitNames {
		if amount[i] > 0 {
			c.consume[n] = amount[i]
		}
	}
	op := c.begin(opAcquire, bi, amount)
	op.Retry = retry
	c.cur.cascade = bm.Parent >= 0
	ctx, policy := c.caller()
	var also []string
	if len(bm.Also) > 0 {
		also = s.wl.Also
	}
	lease, err := c.lim.Acquire(ctx, limiter.Request{Entity: bm.Entity, Resource: bm.Resource, Also: also, Limits: limits, Consume: c.consume, Policy: policy})
	if c.cur.cancel != nil {
		c.cur.cancel()
	}
	if err == nil && !s.stopping {
		op.Shard = int32(lease.Shard())
		op.FailedOpen = lease.FailedOpen()
	}
	o := c.end(err)
	c.capLeases = nil
	if s.caps != nil && c.kind == kindWriter {
		switch o {
		case outAdmitted:
			c.capLeases = s.caps.admitted(op)
		case outRejected:
			s.caps.refusedBy(op, err)
		case outUnavailable, outCut:
			s.caps.unknown(op)
		}
	}
	return lease, o, op
}

// caller returns the context and policy of the acquire in progress: in
// the fault window, the fault plan's PCancel of them are cancelled by
// their caller after 0 to 3 store calls, and ask to fail open, so that a
// cancelled caller answered with a lease shows.
func (c *client) caller() (context.Context, limiter.Policy) {
	s := c.s
	if c.cancels == nil || s.now < s.faults.from || s.now >= s.faults.to || c.cancels.Float64() >= s.faults.plan.PCancel {
		return bgctx, limiter.PolicyDefault
	}
	ctx, cancel := context.WithCancel(bgctx)
	c.cur.cancel, c.cur.cancelAt, c.cur.cancelMid = cancel, c.cancels.IntN(4), c.cancels.IntN(2) == 0
	if c.cur.cancelAt == 0 {
		cancel() // before the call: no store call may happen
		c.cur.op.Cancelled = true
	}
	return ctx, limiter.FailOpen
}

// retryInfo describes the operation that just ended (a rejection) for a
// retry.
func (c *client) retryInfo(op *operation) *retryInfo {
	return &retryInfo{Rejection: op.ID, Start: op.Start, End: op.End, RetryAfter: op.RetryAfter, ByParent: op.ByParent,
		Local: op.Local, Snapshot: c.cur.snap, Heard: c.cur.heard, Own: c.cur.eff.Changes}
}

// runWriter is the body of a workload client: open-loop arrivals at the
// workload's rate, LLM-style settlement of admitted leases after the call,
// and retries after the returned retry-after.
func (c *client) runWriter() {
	s := c.s
	wl := s.wl
	next := s.now
	c.arrival = next
	crashAt := int64(-1)
	if wl.CrashEvery > 0 {
		crashAt = s.now + int64(c.rng.ExpFloat64()*float64(wl.CrashEvery))
	}
	var zipf *rand.Zipf
	if wl.Zipf > 1 && len(s.model.traffic) > 1 {
		zipf = rand.NewZipf(c.rng, wl.Zipf, max(wl.ZipfV, 1), uint64(len(s.model.traffic)-1))
	}
	for {
		due, settle := next, false
		if n := len(c.leases); n > 0 && c.leases[n-1].due <= due {
			due, settle = c.leases[n-1].due, true
		}
		if crashAt >= 0 && crashAt <= due {
			if crashAt > s.now && !c.sleepUntil(crashAt) {
				return
			}
			// The process dies: its leases are never settled and its
			// reservations stay taken; a new one starts from nothing.
			c.leases = nil
			c.crashes++
			s.stats.crashes++
			down := int64(orDefault(wl.CrashDowntime, time.Second))
			crashAt = s.now + down + int64(c.rng.ExpFloat64()*float64(wl.CrashEvery))
			// The new process, idle until the next arrival, may crash again
			// and again before it (a long idle period): those crashes change
			// nothing but their count.
			for crashAt+down <= next && crashAt+down < s.end {
				c.crashes++
				s.stats.crashes++
				crashAt += down + int64(c.rng.ExpFloat64()*float64(wl.CrashEvery))
			}
			if !c.sleepUntil(s.now+down) || s.stopping {
				return
			}
			c.lim = s.newLimiter(c, s.derive(streamLimiter, uint64(c.id)|c.crashes<<32))
			if s.chk != nil {
				s.chk.Forget(c.id)
			}
			next = max(next, s.now)
			continue
		}
		if due > s.now && !c.sleepUntil(due) {
			return
		}
		if s.stopping {
			return
		}
		if settle {
			n := len(c.leases)
			pl := c.leases[n-1]
			c.leases = c.leases[:n-1]
			c.settle(&pl)
			continue
		}
		arrival := next
		next = wl.nextArrival(next+int64(c.rng.ExpFloat64()*c.mean), c.rng)
		c.arrival = next
		s.stats.offered++
		s.second(arrival).Offered++
		bi := wl.pick(s.model, c.rng, zipf)
		amount := wl.amounts(c.rng)
		lease, o, op := c.acquire(bi, amount, wl.Limits, nil)
		switch o {
		case outAdmitted:
			c.schedule(lease, op, amount)
		case outRejected:
			if wl.RetryProb > 0 && c.rng.Float64() < wl.RetryProb && op.RetryAfter <= int64(orDefault(wl.MaxRetryWait, 2*time.Second)) {
				ri := c.retryInfo(op)
				if !c.sleepUntil(s.now+op.RetryAfter) || s.stopping {
					return
				}
				lease, o, op = c.acquire(bi, amount, wl.Limits, ri)
				if o == outAdmitted {
					c.schedule(lease, op, amount)
				}
			}
		}
	}
}

// countBacklog counts, after the run, the arrivals a writer had not taken
// yet (it fell behind): they were offered all the same.
func (c *client) countBacklog() uint64 {
	s, wl := c.s, c.s.wl
	var n uint64
	for t := c.arrival; t < s.end; t = wl.nextArrival(t+int64(c.rng.ExpFloat64()*c.mean), c.rng) {
		s.second(t).Offered++
		n++
	}
	return n
}

// schedule decides how an admitted lease ends and queues it.
func (c *client) schedule(lease *limiter.Lease, op *operation, amount [MaxLimits]int64) {
	wl := c.s.wl
	var action uint8
	x := c.rng.Float64()
	switch {
	case x < wl.RollbackProb:
		action = settleRollback
	case x < wl.RollbackProb+wl.AdjustProb:
		action = settleAdjust
		if c.rng.Float64() < 0.05 {
			action = settleAdjustRollback
		}
	case wl.HoldLeases:
		action = settleCommit
	default:
		_ = lease.Commit()
		return
	}
	pl := pendingLease{due: c.s.now + wl.callTime.draw(c.rng), lease: lease, bucket: op.Bucket, shard: op.Shard,
		action: action, estimate: amount, base: amount, skipped: op.Skipped, capLeases: c.capLeases, leftOut: op.LeftOut}
	if op.Mode == "admit" {
		pl.mode = op.Mode
	}
	// c.leases is sorted by due, latest first, so that the next one is
	// taken off the end; of equal dues the older is nearer the end.
	i := len(c.leases)
	for i > 0 && c.leases[i-1].due <= pl.due {
		i--
	}
	c.leases = slices.Insert(c.leases, i, pl)
}

// settle adjusts and/or rolls back a lease whose model call ended.
func (c *client) settle(pl *pendingLease) {
	s := c.s
	wl := s.wl
	if pl.action == settleCommit {
		c.capEnding(pl)
		c.capEnded(pl, pl.lease.Commit())
		return
	}
	if pl.action == settleAdjust || pl.action == settleAdjustRollback {
		clear(c.adjust)
		var delta [MaxLimits]int64
		any := false
		for i, n := range s.model.LimitNames {
			r := wl.Consume[i]
			if !r.Adjust || pl.estimate[i] == 0 {
				continue
			}
			actual := int64(math.Round(float64(pl.estimate[i]) * math.Exp(wl.AdjustSpread*c.rng.NormFloat64())))
			actual = max(actual, 0)
			if d := actual - pl.estimate[i]; d != 0 {
				delta[i], c.adjust[n], any = d, d, true
			}
		}
		if any {
			op := c.begin(opAdjust, pl.bucket, delta)
			op.Shard = pl.shard
			err := pl.lease.Adjust(bgctx, c.adjust)
			op.Mode, op.Skipped, op.LeftOut = pl.mode, pl.skipped, pl.leftOut
			if c.end(err) == outAdmitted {
				for i := range delta {
					pl.base[i] += delta[i]
				}
			} else {
				for i := range delta {
					pl.unkPos[i] += max(0, delta[i])
					pl.unkNeg[i] += min(0, delta[i])
				}
			}
			if s.stopping {
				return
			}
		}
		if pl.action == settleAdjust {
			c.capEnding(pl)
			c.capEnded(pl, pl.lease.Commit())
			return
		}
	}
	op := c.begin(opRollback, pl.bucket, pl.base)
	op.Shard, op.UnkPos, op.UnkNeg = pl.shard, pl.unkPos, pl.unkNeg
	c.capEnding(pl)
	err := pl.lease.Rollback(bgctx)
	c.capEnded(pl, err)
	op.Mode, op.Skipped, op.LeftOut = pl.mode, pl.skipped, pl.leftOut
	c.end(err)
}

// runProbe is the liveness probe: from the start of the fault-free tail it
// drains its private bucket until refused, waits exactly the retry-after it
// was given and retries, which must succeed (invariant 7).
func (c *client) runProbe() {
	s := c.s
	wl := s.wl
	if !c.sleepUntil(s.model.TailStart + s.model.TailSettle) {
		return
	}
	bi := s.model.probeBucket
	var amount [MaxLimits]int64
	for !s.stopping {
		for i := range s.model.LimitNames {
			amount[i] = 1 + c.rng.Int64N(2)
		}
		lease, o, op := c.acquire(bi, amount, wl.probeLimits, nil)
		if s.stopping {
			return
		}
		switch o {
		case outAdmitted:
			_ = lease.Commit()
			if !c.sleepUntil(s.now + int64(c.rng.IntN(50))*int64(time.Millisecond)) {
				return
			}
		case outRejected:
			ri := c.retryInfo(op)
			if !c.sleepUntil(s.now + op.RetryAfter) {
				return
			}
			if lease, o, _ = c.acquire(bi, amount, wl.probeLimits, ri); o == outAdmitted {
				_ = lease.Commit()
			}
		default:
			if !c.sleepUntil(s.now + int64(100*time.Millisecond)) {
				return
			}
		}
	}
}

// Actor is a hook for simulated processes other than the limiter's
// clients, such as the aggregator (AggregatorActor): Run is the actor's
// body, a coroutine scheduled like a client, whose store calls through
// Env.Store are scheduling points with simulated latency; Records is told
// of every change stream record as the store emits it, in order, before
// the stream is trimmed. The checkers do not attribute an actor's writes
// to any client operation.
type Actor interface {
	// Name identifies the actor, for the caller's logs.
	Name() string
	// Run is the actor's body; it returns when its work is done or when
	// Env.Sleep reports that the simulation ended.
	Run(env *Env)
	// Records receives the change stream records emitted since its last
	// call, in order. It must not modify them: the checkers and the other
	// actors see the same records.
	Records(recs []memsim.Record)
}

// Env is what an Actor may use. Run gives each Actor its own; a nil or zero
// Env (not given by Run) is a simulation that has ended: Sleep returns
// false, Now the zero time, Rand a source seeded with 0, and its Store
// answers every request with a ValidationError.
type Env struct{ c *client }

// Store returns the actor's store handle.
func (e *Env) Store() store.Store {
	if e == nil || e.c == nil {
		return handle{}
	}
	return handle{e.c}
}

// Now returns virtual time (the actor's clock has no skew).
func (e *Env) Now() time.Time {
	if e == nil || e.c == nil {
		return time.Time{}
	}
	return e.c.clock.Now()
}

// Sleep waits d of virtual time; false means the simulation ended and Run
// must return.
func (e *Env) Sleep(d time.Duration) bool {
	if e == nil || e.c == nil {
		return false
	}
	return e.c.sleepUntil(e.c.s.now+int64(d)) && !e.c.s.stopping
}

// Rand returns the actor's seeded random source.
func (e *Env) Rand() *rand.Rand {
	if e == nil || e.c == nil {
		return rand.New(rand.NewPCG(0, 0))
	}
	return e.c.rng
}

// errNoEnv answers the requests of a nil or zero Env's store.
var errNoEnv = &store.ValidationError{Message: "sim: the Env is nil or zero: use the one Run gives the Actor"}

// makeClients creates the writers, the probe and the actors.
func (s *Sim) makeClients() {
	wl := s.wl
	n := wl.Writers
	skews := make([]int64, n)
	skewRand, startRand := s.derive(streamSkew, 0), s.derive(streamStart, 0)
	lo, hi := int64(0), int64(0)
	for i := range skews {
		if wl.Skew > 0 {
			skews[i] = skewRand.Int64N(2*int64(wl.Skew)+1) - int64(wl.Skew)
		}
		lo, hi = min(lo, skews[i]), max(hi, skews[i])
	}
	s.model.SkewSpread = hi - lo
	spread := int64(orDefault(wl.StartSpread, time.Second))
	mk := func(kind clientKind, skew int64) *client {
		id := uint64(len(s.clients))
		c := &client{s: s, id: int32(id), kind: kind, clock: clientClock{s, skew},
			rng:     s.derive(streamClient, id),
			consume: make(map[string]int64, MaxLimits), adjust: make(map[string]int64, MaxLimits)}
		s.clients = append(s.clients, c)
		if kind != kindActor {
			c.lim = s.newLimiter(c, s.derive(streamLimiter, id))
		}
		if kind == kindWriter && s.faults.plan.PCancel > 0 {
			c.cancels = s.derive(streamCancel, id)
		}
		return c
	}
	for i := 0; i < n; i++ {
		c := mk(kindWriter, skews[i])
		c.startAt = startRand.Int64N(spread)
		c.mean = wl.meanArrivalOf(i)
		c.start(c.runWriter)
	}
	if wl.Probe && s.model.probeBucket >= 0 {
		c := mk(kindProbe, 0)
		c.start(c.runProbe)
	}
	for _, a := range s.cfg.Actors {
		c := mk(kindActor, 0)
		c.actor = a
		env := &Env{c}
		c.start(func() { a.Run(env) })
	}
}

// newLimiter makes a client's limiter (again, after a crash).
func (s *Sim) newLimiter(c *client, r *rand.Rand) *limiter.Limiter {
	wl := s.wl
	opts := []limiter.Option{limiter.WithClock(c.clock), limiter.WithNamespace(s.model.Namespace),
		limiter.WithRand(r), limiter.WithPolicy(limiter.FailClosed),
		limiter.WithCacheTTL(orDefault(wl.CacheTTL, time.Minute)), limiter.WithLogger(s.logger()), limiter.WithObserver(observer{s, c})}
	if wl.Reservations {
		opts = append(opts, limiter.WithReservations())
	}
	lim, err := limiter.New(handle{c}, opts...)
	if err != nil {
		panic("sim: " + err.Error()) // options are fixed: cannot happen
	}
	return lim
}

// observer counts the limiter's write paths and tells the client's
// current operation what its reservations did.
type observer struct {
	s *Sim
	c *client
}

func (o observer) Observe(ev limiter.Event) {
	if c := o.c; c != nil && c.cur.active && ev.Op != "close" {
		op := &c.cur.op
		op.Pooled = ev.Path == limiter.PathPool
		op.Mode = ev.Mode
		op.Stray = ev.Op == "acquire" && ev.Outcome == limiter.Admitted && ev.Err != nil && ev.Path != limiter.PathFailOpen
		for _, res := range ev.LeftOut {
			// The resource's role and its parent's (see effects).
			role := 0
			if j := slices.Index(o.s.wl.Also, res); j >= 0 {
				role = 2 + 2*j
			} else if res != o.s.model.Buckets[op.Bucket].Resource {
				continue
			}
			op.LeftOut[role], op.LeftOut[role+1] = true, true
		}
		for _, name := range ev.WouldRefuse {
			// "[parent:][RESOURCE/]NAME": the role of the bucket (see
			// effects), the resource named when it is one of Also's.
			role, n := 0, name
			if rest, ok := strings.CutPrefix(name, "parent:"); ok {
				role, n = 1, rest
			}
			if k := strings.LastIndexByte(n, '/'); k >= 0 {
				j := slices.Index(o.s.wl.Also, n[:k])
				if j < 0 {
					continue
				}
				role, n = role+2+2*j, n[k+1:]
			}
			if i := slices.Index(o.s.model.LimitNames, n); i >= 0 {
				op.Skipped[role][i] = true
			}
		}
		for i, name := range o.s.model.LimitNames {
			op.Reserved[i] += ev.Reserved[name]
			op.Returned[i] += ev.Returned[name]
			op.Unsettled[i] += ev.Unsettled[name]
		}
	}
	if ev.Op == "acquire" && int(ev.Path) < len(o.s.stats.paths) {
		o.s.stats.paths[ev.Path].add(ev)
		if ev.Outcome == limiter.Admitted && ev.RoundTrips == 1 && ev.ReadUnits == 0 {
			o.s.stats.hot.add(ev)
		}
	}
	o.s.stats.doublingsSeen += ev.ShardDoublings
}

func (ps *pathStat) add(ev limiter.Event) {
	ps.n++
	ps.roundTrips += uint64(ev.RoundTrips)
	ps.wcu += ev.WriteUnits
	ps.rcu += ev.ReadUnits
	if ev.Outcome == limiter.Admitted {
		ps.admitted++
	}
}
