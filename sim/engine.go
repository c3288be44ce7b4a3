package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Config says what to simulate. The zero values of the optional fields
// take the scenario's defaults.
type Config struct {
	// Scenario names a registered scenario (see Scenarios); "" is
	// "steady". Ignored when Workload is set.
	Scenario string
	// Workload, when set, is simulated instead of a named scenario.
	Workload *Workload
	// Seed drives every random choice of the run.
	Seed uint64
	// Writers, Rate (offered acquires per second, all writers together)
	// and Duration (simulated time before the fault-free tail) override
	// the workload's when positive.
	Writers  int
	Rate     float64
	Duration time.Duration
	// Tail is the fault-free liveness phase after Duration: 0 means 10 s
	// (capped at Duration), a negative value none.
	Tail time.Duration
	// Faults adds the workload's fault plan (the default plan when the
	// workload has none) during [1 s, Duration).
	Faults bool
	// Skew overrides the workload's largest clock skew when positive;
	// a negative value removes skew.
	Skew time.Duration
	// Latency overrides the store latency model (DynamoDBLatency).
	Latency *LatencyModel
	// CallTimeout is how long a client waits for a store answer, in
	// simulated time, before it gives up with a timeout (default 1 s).
	CallTimeout time.Duration
	// NoChecks turns the checkers and the change stream off (benchmarks).
	NoChecks bool
	// Progress, when set, is called at every timeline step; it must not
	// change anything the simulation reads.
	Progress func(Progress)
	// Actors are extra simulated processes (see Actor).
	Actors []Actor
}

// Progress reports how far a run has come.
type Progress struct {
	// Sim is the virtual time simulated so far, Total the run's whole
	// virtual time (tail included).
	Sim, Total time.Duration
	// Acquires counts the acquires finished so far.
	Acquires uint64
}

// ErrStopped is the cause of the *store.UnavailableError a store call
// returns when the simulation ends while the call is in flight.
var ErrStopped = errors.New("sim: simulation ended")

// Sim is one simulation run: a discrete-event scheduler on virtual time
// that owns all concurrency. Build one with New, run it with Run.
type Sim struct {
	cfg          Config
	wl           *Workload
	model        *model
	rng          *rand.Rand
	scopeChanges int // the workload's ScopeChanges made so far

	base     int64 // Unix ns of virtual time 0
	now      int64 // virtual ns
	end      int64 // Duration + Tail
	faultEnd int64
	timeout  int64
	lat      [memsim.NumOpKinds]dist

	seq    uint64
	events eventHeap
	st     backend
	maxReq int64
	// partThrottles: per partition, the real (ceiling) throttles seen so far
	partThrottles map[string]uint64
	stream        bool
	lastSeq       uint64
	chk           *checker
	caps          *capLog // the leases of the workload's concurrency cap (nil: none)
	faults        faultState
	sweep         *sweeper // nil unless the fault plan expires items

	clients []*client
	flights []inflight
	free    []int32

	nextOp   uint64
	stopping bool
	ran      bool
	hash     uint64

	step     int64 // timeline step, ns
	tl       []Second
	tlClosed int
	stats    stats
	setupCap store.Capacity
}

// backend is what the scheduler needs of the store: memsim.Store, or a
// stub in the scheduler's own benchmark.
type backend interface {
	store.Store
	StreamLen() uint64
	AppendStream(buf []memsim.Record, afterSeq uint64) []memsim.Record
	TrimStream(throughSeq uint64)
	Items() []store.Item
	Totals() memsim.Totals
	Partition(pk string) memsim.PartitionStats
	PartitionConsumed(pk string) store.Capacity
	PartitionThrottles(pk string) uint64
}

type stats struct {
	offered, acquires, admitted, rejected, unavailable uint64
	adjusts, rollbacks, falseRejections                uint64
	throttled, roundTrips, storeCalls, backlog         uint64
	paths                                              [16]pathStat
	hot                                                pathStat // admitted by one write, nothing read
	crashes, cancelled                                 uint64
	disabled, bypassed                                 uint64 // acquires refused, admitted by a scope's mode
	wouldRefuse                                        uint64 // admitted acquires a shadow limit would have refused
	doublingsSeen                                      int
}

// Random streams. Every random source of a run is derived from its seed,
// one stream per purpose and client (splitmix64 of the seed, the purpose
// and the index seeds a PCG), so that adding a client or an actor does not
// change what the others draw. The scheduler's own stream (latency) is
// drawn in event order, which the scheduler fixes.
const (
	streamLatency uint64 = iota + 1
	streamFaults
	streamSetup // unused: kept so that the streams after it draw as they did
	streamSkew
	streamStart
	streamClient
	streamLimiter
	streamExpiry
	streamCancel
)

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (s *Sim) derive(purpose, index uint64) *rand.Rand {
	a := splitmix(s.cfg.Seed ^ splitmix(purpose<<32|index))
	return rand.New(rand.NewPCG(a, splitmix(a)))
}

// trueClock is memsim's clock: the simulation's virtual time.
type trueClock struct{ s *Sim }

func (c trueClock) Now() time.Time { return time.Unix(0, c.s.base+c.s.now).UTC() }

// clientClock is a client's clock: virtual time plus the client's skew.
// Skew is a fault: in the fault-free tail the clocks come back to true
// time as the workload's TailClock says.
type clientClock struct {
	s    *Sim
	skew int64
}

func (c clientClock) Now() time.Time {
	s := c.s
	off := c.skew
	if s.now >= s.faultEnd && off != 0 {
		switch s.wl.TailClock {
		case TailKeep:
		case TailStep:
			off = 0
		default: // slew over twice the largest skew
			l := 2 * int64(s.wl.Skew)
			if d := s.now - s.faultEnd; d >= l {
				off = 0
			} else {
				off = int64(float64(off) * float64(l-d) / float64(l))
			}
		}
	}
	return time.Unix(0, s.base+s.now+off).UTC()
}

// New prepares a run: it resolves the workload, creates the store, runs
// the setup writes (entities, stored limits) at virtual time 0 and creates
// the clients. It returns an error for a configuration that cannot run.
func New(cfg Config) (*Sim, error) {
	wl, err := resolve(&cfg)
	if err != nil {
		return nil, err
	}
	for i, a := range cfg.Actors {
		if a == nil {
			return nil, fmt.Errorf("sim: Actors[%d] is nil", i)
		}
	}
	s := &Sim{cfg: cfg, wl: wl}
	s.rng = s.derive(streamLatency, 0)
	s.base = memsim.Epoch().UnixNano()
	if !wl.Start.IsZero() {
		s.base = wl.Start.UnixNano()
	}
	dur := int64(wl.Duration)
	tail := cfg.Tail
	switch {
	case tail == 0:
		tail = min(10*time.Second, wl.Duration)
	case tail < 0:
		tail = 0
	}
	s.faultEnd = dur
	s.end = dur + int64(tail)
	s.timeout = int64(orDefault(cfg.CallTimeout, time.Second))
	lm := DynamoDBLatency()
	if wl.Latency != nil {
		lm = *wl.Latency
	}
	if cfg.Latency != nil {
		lm = *cfg.Latency
	}
	s.lat = lm.compile()
	s.step = timelineStep(s.end)

	s.model = wl.model(s)
	var plan memsim.Injector
	if wl.Faults {
		fp := DefaultFaults()
		if wl.FaultPlan != nil {
			fp = *wl.FaultPlan
		}
		plan, wl.faultDesc = fp.injector(s.derive(streamFaults, 0), s.base, s.faultEnd, &s.faults)
		if fp.ExpiryDelay > 0 && s.faults.from < s.faults.to {
			s.sweep = newSweeper(s, fp.ExpiryDelay, s.faults.from, s.faults.to)
		}
	}
	s.stream = !cfg.NoChecks || len(cfg.Actors) > 0 || s.sweep != nil
	if !cfg.NoChecks {
		s.chk = newChecker(s.model, s.base)
		s.caps = newCapLog(s.wl, s.model)
		s.chk.PartitionAvailable = func(pk string) float64 { return s.st.Partition(pk).WriteAvailable }
		s.chk.PartitionConsumed = func(pk string) float64 { return s.st.PartitionConsumed(pk).WriteUnits }
		s.partThrottles = make(map[string]uint64)
	}
	opts := []memsim.Option{
		memsim.WithClock(trueClock{s}),
		memsim.WithStream(s.stream),
		memsim.WithSleeper(s.sleeper),
		// Nothing in the simulated path modifies an item a write returns
		// (the limiter decodes them, the checkers read the stream's
		// images), so the copy per write is saved.
		memsim.WithSharedResults(true),
	}
	if wl.PartitionWCU > 0 {
		opts = append(opts, memsim.WithPartitionLimits(wl.PartitionWCU, 3*wl.PartitionWCU))
	}
	if plan != nil {
		opts = append(opts, memsim.WithFaults(plan))
	}
	s.st = memsim.New(opts...)
	if err := s.setup(); err != nil {
		return nil, err
	}
	s.makeClients()
	return s, nil
}

// timelineStep is one second, or longer for runs over an hour so that
// the timeline keeps at most about 3600 entries.
func timelineStep(end int64) int64 {
	if end < int64(time.Hour) {
		return int64(time.Second)
	}
	return (end/3600 + int64(time.Second) - 1) / int64(time.Second) * int64(time.Second)
}

var discard = slog.New(slog.DiscardHandler)

// setup writes the workload's entities and stored limits at virtual time
// 0, directly (no client, no latency, before any fault window).
func (s *Sim) setup() error {
	adm, err := admin.New(s.st, admin.WithClock(trueClock{s}), admin.WithNamespace(s.model.Namespace))
	if err != nil {
		return err
	}
	ctx := context.Background()
	// Parents first: PutEntity walks the parent chain.
	for pass := 0; pass < 2; pass++ {
		for _, e := range s.wl.Entities {
			if (e.Parent == "") != (pass == 0) {
				continue
			}
			if e.Parent == "" && !s.wl.parents[e.ID] {
				continue
			}
			if err := adm.PutEntity(ctx, admin.Entity{ID: e.ID, Parent: e.Parent, Cascade: e.Cascade}); err != nil {
				return fmt.Errorf("sim: setup: put entity %s: %w", e.ID, err)
			}
		}
	}
	for _, r := range s.wl.Also {
		if s.wl.AlsoLimits != nil {
			if err := adm.PutLimits(ctx, admin.Scope{Resource: r}, s.wl.AlsoLimits); err != nil {
				return fmt.Errorf("sim: setup: put limits of %s: %w", r, err)
			}
		}
	}
	for _, e := range s.wl.Entities {
		if e.Limits != nil {
			if err := adm.PutLimits(ctx, admin.Scope{Entity: e.ID}, e.Limits); err != nil {
				return fmt.Errorf("sim: setup: put limits of %s: %w", e.ID, err)
			}
		}
		if e.Mode != "" {
			if err := adm.SetMode(ctx, admin.Scope{Entity: e.ID}, admin.Mode(e.Mode)); err != nil {
				return fmt.Errorf("sim: setup: set the mode of %s: %w", e.ID, err)
			}
		}
	}
	s.drain(nil)
	s.setupCap = s.st.Totals().Consumed
	return nil
}

// changeScope makes an operator's change of a scope's mode, at its time,
// directly on the table (as setup writes).
func (s *Sim) changeScope(mc ScopeChange) {
	s.now = int64(mc.At)
	adm, err := admin.New(s.st, admin.WithClock(trueClock{s}), admin.WithNamespace(s.model.Namespace))
	scope := admin.Scope{Entity: mc.Entity, Resource: mc.Resource}
	if err == nil && mc.Limits != nil {
		err = adm.PutLimits(context.Background(), scope, mc.Limits)
	}
	if err == nil {
		err = adm.SetMode(context.Background(), scope, admin.Mode(mc.Mode))
	}
	if err != nil && s.chk != nil {
		s.chk.flag(InvHarness, "mode change %+v: %v", mc, err)
	}
	s.drain(nil)
}

func (s *Sim) push(at int64, kind evKind, who, slot int32) {
	s.seq++
	s.events.push(event{at: at, seq: s.seq, kind: kind, who: who, slot: slot})
}

// mix folds x into the trace hash.
func (s *Sim) mix(x uint64) {
	s.hash = bits.RotateLeft64((s.hash^x)*0x100000001b3, 29) + 0x9e3779b97f4a7c15
}

func (s *Sim) mixString(str string) {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(str); i++ {
		h = (h ^ uint64(str[i])) * 0x100000001b3
	}
	s.mix(h)
}

// Run simulates until the end of the tail, stops every client, runs the
// final checks and returns the report. A Sim runs once: a second Run, or
// the Run of a nil or zero Sim (not made by New), simulates nothing and
// returns a report whose only violation (InvHarness) says so.
func (s *Sim) Run() *Report {
	switch {
	case s == nil || s.wl == nil:
		return misuse("sim: Run of a nil or zero Sim: create one with New")
	case s.ran:
		return misuse("sim: a Sim runs once: create another with New")
	}
	s.ran = true
	for _, c := range s.clients {
		s.push(c.startAt, evWake, c.id, -1)
	}
	for len(s.events) > 0 && s.events[0].at <= s.end {
		ev := s.events.pop()
		if ev.at >= int64(s.tlClosed+1)*s.step {
			s.closeSteps(ev.at)
		}
		for s.scopeChanges < len(s.wl.ScopeChanges) && int64(s.wl.ScopeChanges[s.scopeChanges].At) <= ev.at {
			s.changeScope(s.wl.ScopeChanges[s.scopeChanges])
			s.scopeChanges++
		}
		s.now = ev.at
		switch ev.kind {
		case evWake:
			s.resume(s.clients[ev.who])
		case evApply:
			s.apply(ev.slot)
		case evDeliver:
			s.deliver(ev.slot)
		case evSweep:
			s.sweep.fire(ev.slot)
		}
	}
	s.now = s.end
	s.closeSteps(s.end)
	s.stopping = true
	for _, c := range s.clients {
		if c.stop != nil {
			c.stop()
		}
		if c.kind == kindWriter && c.startAt < s.end {
			n := c.countBacklog()
			s.stats.backlog += n
			s.stats.offered += n
		}
	}
	items := s.st.Items()
	if s.chk != nil {
		s.drain(nil)
		s.chk.latency = s.maxReq
		s.chk.Finish(items)
		if s.caps != nil {
			s.caps.check(s.chk, s.model)
		}
	}
	return s.report(items)
}

// Run builds and runs a simulation.
func Run(cfg Config) (*Report, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return s.Run(), nil
}

// closeSteps finishes the timeline steps that end at or before t.
func (s *Sim) closeSteps(t int64) {
	for int64(s.tlClosed+1)*s.step <= t && int64(s.tlClosed)*s.step < s.end {
		sec := s.second(int64(s.tlClosed) * s.step)
		if s.chk != nil {
			sec.ShardCount = max(s.chk.maxShardsSeen, 1)
		}
		s.tlClosed++
		if s.cfg.Progress != nil {
			s.cfg.Progress(Progress{Sim: time.Duration(int64(s.tlClosed) * s.step), Total: time.Duration(s.end), Acquires: s.stats.acquires})
		}
	}
}

// second returns the timeline entry of virtual time t (the last one for
// the instant the run ends).
func (s *Sim) second(t int64) *Second {
	if t >= s.end {
		t = s.end - 1
	}
	i := int(t / s.step)
	for len(s.tl) <= i {
		s.tl = append(s.tl, Second{TMs: int64(len(s.tl)) * s.step / int64(time.Millisecond)})
	}
	return &s.tl[i]
}

// resume runs a client until it yields its next request.
func (s *Sim) resume(c *client) {
	if c.stopped {
		return
	}
	cl, ok := c.next()
	if !ok {
		c.stopped = true
		return
	}
	s.dispatch(c, cl)
}

// dispatch turns what a client yielded into events.
func (s *Sim) dispatch(c *client, cl *call) {
	if cl.kind == callSleep {
		s.push(max(cl.until, s.now), evWake, c.id, -1)
		return
	}
	s.stats.roundTrips++
	if cl.kind == callStore {
		c.pending = 1
		slot := s.newFlight(c, -1)
		s.flights[slot].kind = cl.op // its request stays in cl until it is applied
		s.send(slot)
		return
	}
	// callConcurrent: one request per write.
	n := len(cl.writes)
	cl.results = make([]store.WriteResult, n)
	if n == 0 {
		s.push(s.now, evWake, c.id, -1)
		return
	}
	c.pending = n
	for i := range cl.writes {
		w := &cl.writes[i]
		slot := s.newFlight(c, int32(i))
		f := &s.flights[slot]
		q := new(request)
		f.own = q
		switch {
		case w.Put != nil:
			f.kind, q.put = memsim.OpPut, *w.Put
		case w.Update != nil:
			f.kind, q.upd = memsim.OpUpdate, *w.Update
		case w.Delete != nil:
			f.kind, q.del = memsim.OpDelete, *w.Delete
		default:
			f.kind, f.bad = memsim.OpUpdate, true
		}
		s.send(slot)
	}
}

// inflight is one store request between its client and the store.
type inflight struct {
	client   int32
	sub      int32 // position in a WriteConcurrently batch, -1 for a single call
	kind     memsim.OpKind
	bad      bool // an empty Write: answered with a validation error
	refs     int8
	timedOut bool // the client is (or was) told "timeout" at the deadline
	orphan   bool // the request arrives after its deadline: nobody waits for its answer
	send     int64
	deadline int64
	resp     int64 // response latency
	extra    int64 // delay injected by the fault plan
	cause    cause
	hasCause bool
	ctx      callCtx
	// own is the request when it is not its client's call.req (which
	// stays put while the client waits): one write of a WriteConcurrently,
	// or a request applied after its caller has moved on.
	own *request
	out response
}

func (s *Sim) request(f *inflight) *request {
	if f.own != nil {
		return f.own
	}
	return &s.clients[f.client].call.req
}

// callCtx is the context of one store request as the store sees it: its
// deadline is the client's timeout on the virtual clock. Wall time never
// cancels it; the scheduler enforces the deadline (a request that would
// answer later is answered with a timeout at the deadline).
// Its Done, Err and Value are the background context's: a request is never
// cancelled while the store serves it.
type callCtx struct {
	context.Context
	s        *Sim
	slot     int32
	deadline int64
}

// Deadline returns the virtual deadline.
func (c *callCtx) Deadline() (time.Time, bool) { return time.Unix(0, c.s.base+c.deadline).UTC(), true }

// request holds the input of any store call.
type request struct {
	get   store.GetInput
	batch store.BatchGetInput
	put   store.PutInput
	upd   store.UpdateInput
	del   store.DeleteInput
	tx    store.TransactWriteInput
	query store.QueryInput
}

// response holds the output of any store call.
type response struct {
	get   store.GetOutput
	batch store.BatchGetOutput
	write store.WriteOutput
	query store.QueryOutput
	err   error
}

func (s *Sim) newFlight(c *client, sub int32) int32 {
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		s.flights = append(s.flights, inflight{})
		slot = int32(len(s.flights) - 1)
	}
	f := &s.flights[slot]
	f.client, f.sub, f.send, f.deadline = c.id, sub, s.now, s.now+s.timeout
	if c.cur.active {
		f.cause, f.hasCause = c.cur.cause, true
	}
	return slot
}

func (s *Sim) release(slot int32) {
	f := &s.flights[slot]
	if f.refs--; f.refs <= 0 {
		*f = inflight{}
		s.free = append(s.free, slot)
	}
}

// send draws the request's latency and schedules its application (and,
// when the request alone outlasts the client's timeout, the timeout).
func (s *Sim) send(slot int32) {
	f := &s.flights[slot]
	s.stats.storeCalls++
	rt := s.lat[f.kind].draw(s.rng)
	req := int64(float64(rt) * (0.3 + 0.4*s.rng.Float64()))
	f.resp = rt - req
	if req >= s.timeout {
		// Applied after its caller has moved on: a copy of its own (the
		// client's call holds its next request by then).
		if f.own == nil {
			q := s.clients[f.client].call.req
			f.own = &q
		}
		f.timedOut, f.orphan, f.refs = true, true, 2
		s.push(f.deadline, evDeliver, f.client, slot)
	} else {
		f.refs = 1
		s.maxReq = max(s.maxReq, req)
	}
	s.push(s.now+req, evApply, f.client, slot)
}

// sleeper receives the delay memsim's fault plan injects into the request
// being applied (ctx is the request's callCtx). A delay that pushes the
// answer past the client's deadline fails the request unapplied, as a
// client-side timeout would.
func (s *Sim) sleeper(ctx context.Context, d time.Duration) error {
	c, ok := ctx.(*callCtx)
	if !ok {
		return nil
	}
	if s.now+int64(d) >= c.deadline {
		return context.DeadlineExceeded
	}
	s.flights[c.slot].extra += int64(d)
	return nil
}

var bgctx = context.Background()

// apply hands a request to the store at its arrival time.
func (s *Sim) apply(slot int32) {
	f := &s.flights[slot]
	q := s.request(f)
	f.ctx = callCtx{Context: bgctx, s: s, slot: slot, deadline: f.deadline}
	ctx := context.Context(&f.ctx) // valid during the call: s.flights does not grow meanwhile
	var err error
	pk := q.writePK(f.kind) // "" but for a single-item write: set below for the others
	s.faults.undo = f.kind.IsWrite() && s.isUndo(f)
	if f.bad {
		err = &store.ValidationError{Message: "sim: a Write with no operation"}
	} else {
		switch f.kind {
		case memsim.OpGet:
			f.out.get, err = s.st.Get(ctx, q.get)
			pk = q.get.Key.PK
		case memsim.OpBatchGet:
			f.out.batch, err = s.st.BatchGet(ctx, q.batch)
			if len(q.batch.Keys) > 0 {
				pk = q.batch.Keys[0].PK
			}
		case memsim.OpPut:
			f.out.write, err = s.st.Put(ctx, q.put)
		case memsim.OpUpdate:
			f.out.write, err = s.st.Update(ctx, q.upd)
		case memsim.OpDelete:
			f.out.write, err = s.st.Delete(ctx, q.del)
		case memsim.OpTransactWrite:
			f.out.write, err = s.st.TransactWrite(ctx, q.tx)
			if len(q.tx.Actions) > 0 {
				pk = actionPK(&q.tx.Actions[0])
			}
		case memsim.OpQuery:
			f.out.query, err = s.st.Query(ctx, q.query)
			pk = q.query.PartitionKey
		}
	}
	s.faults.undo = false
	f.out.err = err
	code := errCode(err)
	if code == codeThrottled {
		s.stats.throttled++
		s.second(s.now).Throttled++
		if s.chk != nil && f.kind.IsWrite() {
			s.realThrottles(f)
		}
	} else if code == codeValidation && s.chk != nil {
		s.chk.flag(InvHarness, "client %d: the store refused a %s on %s: %v", f.client, f.kind, pk, err)
	}
	s.mix(uint64(s.now))
	s.mix(uint64(f.client)<<32 | uint64(f.kind)<<8 | uint64(code))
	s.mixString(pk)

	var cause *cause // for the checker (drain does nothing without the stream)
	if f.hasCause {
		cause = &f.cause
		cause.Effects = nil
		if c := s.clients[f.client]; c.cur.active && c.cur.op.ID == f.cause.Op {
			cause.Effects = &c.cur.eff
		}
	}
	s.drain(cause)

	if f.orphan { // the client gave up before the request arrived
		s.release(slot)
		return
	}
	at := s.now + f.resp + f.extra
	if errors.Is(err, context.DeadlineExceeded) || at > f.deadline {
		at, f.timedOut = f.deadline, true
	}
	s.push(at, evDeliver, f.client, slot)
}

// isUndo reports whether a write is a cascade's compensation: a write of
// a cascading acquire, still running, to an item one of its writes
// charged (once a side is charged, the only write the acquire makes to it
// again is its refund).
func (s *Sim) isUndo(f *inflight) bool {
	if !f.hasCause || f.cause.Kind != opAcquire || s.faults.plan.PUndoFail <= 0 {
		return false
	}
	c := s.clients[f.client]
	return c.cur.active && c.cur.op.ID == f.cause.Op && slices.Contains(c.charged, s.request(f).writePK(f.kind))
}

// writePK returns the partition key a single-item write names.
func (q *request) writePK(op memsim.OpKind) string {
	switch op {
	case memsim.OpUpdate:
		return q.upd.Key.PK
	case memsim.OpPut:
		pk, _ := q.put.Item.Str(store.AttrPK)
		return pk
	case memsim.OpDelete:
		return q.del.Key.PK
	}
	return ""
}

// realThrottles tells the checker which partitions of a throttled write
// were really over their ceiling (memsim counts those per partition, and
// not the throttles its fault plan injects).
func (s *Sim) realThrottles(f *inflight) {
	check := func(pk string) {
		n := s.st.PartitionThrottles(pk)
		if n > s.partThrottles[pk] {
			s.partThrottles[pk] = n
			s.chk.PartitionThrottled(pk, s.now)
		}
	}
	q := s.request(f)
	if f.kind != memsim.OpTransactWrite {
		check(q.writePK(f.kind))
		return
	}
	for i := range q.tx.Actions {
		check(actionPK(&q.tx.Actions[i]))
	}
}

func actionPK(a *store.Write) string {
	switch {
	case a.Put != nil:
		pk, _ := a.Put.Item.Str(store.AttrPK)
		return pk
	case a.Update != nil:
		return a.Update.Key.PK
	case a.Delete != nil:
		return a.Delete.Key.PK
	case a.Check != nil:
		return a.Check.Key.PK
	}
	return ""
}

// drain feeds the new change stream records to the checker and the
// actors, then trims the stream.
func (s *Sim) drain(cause *cause) {
	if !s.stream {
		return
	}
	n := s.st.StreamLen()
	if n == s.lastSeq {
		return
	}
	recs := s.st.AppendStream(nil, s.lastSeq)
	if s.chk != nil {
		for i := range recs {
			s.chk.Record(&recs[i], cause)
		}
	}
	if s.sweep != nil {
		s.sweep.observe(recs)
	}
	for _, a := range s.cfg.Actors {
		a.Records(recs)
	}
	s.st.TrimStream(n)
	s.lastSeq = n
}

// deliver hands an answer to its client and resumes the client when it
// has every answer it waits for.
func (s *Sim) deliver(slot int32) {
	f := &s.flights[slot]
	c := s.clients[f.client]
	out := f.out
	if f.timedOut && !errors.Is(out.err, context.DeadlineExceeded) {
		out = response{err: &store.UnavailableError{Op: f.kind.String(), OutcomeUnknown: f.kind.IsWrite(), Err: context.DeadlineExceeded}}
	}
	sub := f.sub
	s.release(slot)
	if c.stopped {
		return
	}
	if sub >= 0 {
		c.call.results[sub] = store.WriteResult{Output: out.write, Err: out.err}
	} else {
		c.call.resp = out
	}
	c.pending--
	if c.pending == 0 {
		s.resume(c)
	}
}

type errClass uint8

const (
	codeOK errClass = iota
	codeCondition
	codeThrottled
	codeCanceled
	codeConflict
	codeUnavailable
	codeValidation
	codeOther
)

func errCode(err error) errClass {
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, store.ErrConditionFailed):
		return codeCondition
	case errors.Is(err, store.ErrThrottled):
		return codeThrottled
	case errors.Is(err, store.ErrTransactionCanceled):
		if tc, ok := errors.AsType[*store.TransactionCanceledError](err); ok {
			for _, r := range tc.Reasons {
				if r.Code == store.ReasonThrottlingError || r.Code == store.ReasonProvisionedThroughputExceeded {
					return codeThrottled
				}
			}
		}
		return codeCanceled
	case errors.Is(err, store.ErrTransactionConflict):
		return codeConflict
	case errors.Is(err, store.ErrUnavailable):
		return codeUnavailable
	case errors.Is(err, store.ErrValidation):
		return codeValidation
	}
	return codeOther
}

// logger returns the logger simulated limiters use: nothing, unless the
// workload asks for one (debugging).
func (s *Sim) logger() *slog.Logger {
	if s.wl.Log != nil {
		return slog.New(slog.NewTextHandler(s.wl.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return discard
}

// pathStat is what the acquires whose last path was one path cost.
type pathStat struct {
	n, roundTrips, admitted uint64
	wcu, rcu                float64
}
