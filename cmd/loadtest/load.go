package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// primeMax bounds the configuration reads made before the run: beyond it
// the limiters read configuration during the run, as a process that just
// started would.
const primeMax = 4096

// loadRun is one run: the limiters, their writers and what they measured.
type loadRun struct {
	o       *options
	tgt     *target
	st      *metered
	obs     *observer
	lims    []*limiter.Limiter
	ns      string
	parent  string
	writers []*writer
	epoch   time.Time // the zero of attempt times
	rawKey  store.Key

	limiterTime, rawTime time.Duration // measured time of each kind
	slices               int

	// Running totals for the progress line.
	attempts, admitted, refused, rawWrites atomic.Int64
	dropped                                atomic.Int64 // late slots of the measured slices dropped
}

// writer is one goroutine of the load: it keeps its own records.
type writer struct {
	id   int
	lim  *limiter.Limiter
	rng  *rand.Rand
	atts []attempt

	raw       []uint32 // raw write latencies, µs
	rawFails  int64    // throttled or failed raw writes
	errs      int64
	firstErr  string
	refusedBy map[string]int64 // refusals per exceeded limit ("parent:" for the parent's)
}

func execute(ctx context.Context, o *options, stderr io.Writer) (*report, error) {
	tgt, err := openTarget(ctx, o)
	if err != nil {
		return nil, err
	}
	defer tgt.close()
	ns := cmp.Or(o.namespace, "load"+strconv.FormatInt(time.Now().UnixMilli(), 36))
	r := &loadRun{o: o, tgt: tgt, st: newMetered(tgt.st, o.latency), obs: newObserver(), ns: ns, parent: "parent",
		rawKey: store.Key{PK: ns + "/RAW", SK: "#RAW"}}
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	for p := range o.processes {
		opts := []limiter.Option{limiter.WithNamespace(r.ns), limiter.WithObserver(r.obs), limiter.WithLogger(logger),
			limiter.WithRand(rand.New(rand.NewPCG(o.seed, uint64(p)+1)))}
		if !o.localRefusals {
			opts = append(opts, limiter.WithLocalRefusals(false))
		}
		if o.reservations {
			opts = append(opts, limiter.WithReservations())
		}
		l, err := limiter.New(r.st, opts...)
		if err != nil {
			return nil, err
		}
		r.lims = append(r.lims, l)
	}
	for w := range o.writers {
		r.writers = append(r.writers, &writer{id: w, lim: r.lims[w%o.processes],
			rng: rand.New(rand.NewPCG(o.seed, 1<<32+uint64(w)))})
	}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	if o.raw && o.rawItem == rawItemBucket {
		if r.rawKey, err = r.bucketItem(ctx); err != nil {
			return nil, err
		}
	}
	stopProgress := r.startProgress(stderr)
	defer stopProgress()
	if o.warmup > 0 {
		r.warmup(ctx)
	}
	var smp *sampler
	if tgt.mem != nil {
		smp = newSampler(tgt.mem, r.ns+"/", func(pk string) bool { return pk == r.rawKey.PK || strings.Contains(pk, "#warmup-") })
	}
	r.epoch = time.Now()
	r.obs.epoch = r.epoch
	for left := o.duration; left > 0 && ctx.Err() == nil; left -= o.slice {
		d := min(left, o.slice)
		r.limiterTime += r.limiterSlice(ctx, d, entityNames(o.keys), true)
		if o.raw && ctx.Err() == nil {
			r.rawTime += r.rawSlice(ctx, d, r.rawKey, true)
		}
		r.slices++
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	var hot *hotPartition
	if smp != nil {
		hot = smp.finish()
	}
	rep := r.report(ctx, hot)
	if o.reservations {
		// Give back what the pools hold (not measured: the report counts
		// acquires).
		for _, l := range r.lims {
			_ = l.Close(ctx)
		}
	}
	return rep, nil
}

func entityNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "e" + strconv.Itoa(i)
	}
	return out
}

// setup stores the cascade configuration and reads every process's
// configuration once (Status), so that the run measures acquires and not a
// cold start.
func (r *loadRun) setup(ctx context.Context) error {
	o := r.o
	names := entityNames(o.keys)
	if o.cascade {
		adm, err := admin.New(r.st, admin.WithNamespace(r.ns), admin.WithLimiter(r.lims[0]))
		if err != nil {
			return err
		}
		if err := adm.PutLimits(ctx, admin.Scope{Entity: r.parent}, o.parent); err != nil {
			return fmt.Errorf("store the parent's limits: %w", err)
		}
		for _, e := range names {
			if err := adm.PutEntity(ctx, admin.Entity{ID: e, Parent: r.parent, Cascade: true}); err != nil {
				return fmt.Errorf("store entity %s: %w", e, err)
			}
		}
		names = append(names, r.parent)
	}
	if len(names)*len(r.lims)*(1+len(o.also)) > primeMax {
		return nil
	}
	for _, l := range r.lims {
		for _, e := range names {
			for _, res := range append([]string{o.resource}, o.also...) {
				if _, err := l.Status(ctx, e, res, o.limits); err != nil {
					return fmt.Errorf("read the configuration of %s: %w", e, err)
				}
			}
		}
	}
	return nil
}

// The -raw-item values.
const (
	rawItemTiny   = "tiny"
	rawItemBucket = "bucket"
)

// bucketItem makes a bucket item of its own with one acquire (the
// limiter's item: every attribute and index key) and returns its key, for
// the raw floor to ADD to.
func (r *loadRun) bucketItem(ctx context.Context) (store.Key, error) {
	req := limiter.Request{Entity: "raw-floor", Resource: r.o.resource, Limits: r.o.limits, Consume: r.o.consume}
	if _, err := r.lims[0].Acquire(ctx, req); err != nil {
		return store.Key{}, fmt.Errorf("make the raw floor's bucket item: %w", err)
	}
	return keys.Bucket{Namespace: r.ns, Entity: req.Entity, Resource: cmp.Or(r.o.resource, limiter.DefaultResource)}.Key(), nil
}

// warmup runs the limiter on entities of their own and the raw write on an
// item of its own, unmeasured: a fresh DynamoDB Local is several times
// slower for its first tens of seconds of load.
func (r *loadRun) warmup(ctx context.Context) {
	names := entityNames(r.o.keys)
	for i := range names {
		names[i] = "warmup-" + names[i]
	}
	r.limiterSlice(ctx, r.o.warmup, names, false)
	if r.o.raw {
		r.rawSlice(ctx, r.o.warmup, store.Key{PK: r.rawKey.PK + "#warmup", SK: r.rawKey.SK}, false)
	}
}

// pace hands out the send times of an open loop: slot n of a slice is at
// start + n/rate, handed at that time to whichever writer is free. A slot
// no writer is free for waits up to maxLate and is then dropped (counted),
// so that writers that fell behind (all of them busy with slow acquires,
// or the process paused) never send a backlog in a burst: no second is
// offered more than the rate, plus maxLate's worth of slots. When the
// writers cannot keep up, the attempts per second of the report fall short
// of -rate, and the dropped slots say by how much.
type pace struct {
	end     time.Time
	slots   chan time.Time // nil: closed loop
	dropped *atomic.Int64  // slots dropped, or nil not to count them
	done    chan struct{}
}

// maxLate is how long a slot waits for a free writer before it is dropped.
const maxLate = 10 * time.Millisecond

// wait blocks until the writer's next slot and reports false when the
// slice is over.
func (p *pace) wait(ctx context.Context) bool {
	if p.slots == nil {
		return ctx.Err() == nil && time.Now().Before(p.end)
	}
	select {
	case <-ctx.Done():
		return false
	case _, ok := <-p.slots:
		return ok
	}
}

// dispatch offers slot n at start + n*interval until the slice ends.
func (p *pace) dispatch(ctx context.Context, start time.Time, interval time.Duration) {
	defer close(p.done)
	defer close(p.slots)
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for n := int64(0); ; n++ {
		at := start.Add(time.Duration(n) * interval)
		if !at.Before(p.end) {
			// The slice lasts until its end, not its last slot: the next
			// slice's first slot must not follow this one's last at once.
			if d := time.Until(p.end); d > 0 {
				t.Reset(d)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
			return
		}
		if d := time.Until(at); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		if d := time.Until(at.Add(maxLate)); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return
			case p.slots <- at:
				if !t.Stop() {
					<-t.C
				}
				continue
			case <-t.C:
			}
		}
		if p.dropped != nil {
			p.dropped.Add(1)
		}
	}
}

// newPace starts the pace of a slice of d; stop ends it.
func (r *loadRun) newPace(ctx context.Context, d time.Duration, measure bool) (p *pace, stop func()) {
	start := time.Now()
	p = &pace{end: start.Add(d)}
	if r.o.rate <= 0 {
		return p, func() {}
	}
	p.slots, p.done = make(chan time.Time), make(chan struct{})
	if measure {
		p.dropped = &r.dropped
	}
	ctx, cancel := context.WithCancel(ctx)
	go p.dispatch(ctx, start, max(time.Duration(float64(time.Second)/r.o.rate), 1))
	return p, func() { cancel(); <-p.done }
}

// each runs f on every writer concurrently and returns how long the slice
// took, until the last writer's last call returned.
func (r *loadRun) each(f func(w *writer)) time.Duration {
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, w := range r.writers {
		wg.Go(func() { f(w) })
	}
	wg.Wait()
	return time.Since(t0)
}

// limiterSlice runs the writers' acquires on entities for d.
func (r *loadRun) limiterSlice(ctx context.Context, d time.Duration, entities []string, measure bool) time.Duration {
	r.obs.on.Store(measure)
	r.st.on.Store(measure)
	defer r.obs.on.Store(false)
	defer r.st.on.Store(false)
	p, stop := r.newPace(ctx, d, measure)
	defer stop()
	return r.each(func(w *writer) {
		req := limiter.Request{Resource: r.o.resource, Also: r.o.also, Limits: r.o.limits, Consume: r.o.consume}
		for p.wait(ctx) {
			k := 0
			if len(entities) > 1 {
				k = w.rng.IntN(len(entities))
			}
			req.Entity = entities[k]
			t0 := time.Now()
			le, err := w.lim.Acquire(ctx, req)
			if err == nil {
				// Ends the lease at once: a concurrency cap's slots are
				// given back (one write), any other lease costs nothing.
				_ = le.Commit()
			}
			t1 := time.Now()
			if ctx.Err() != nil {
				return
			}
			if measure {
				r.record(w, k, t0, t1, err)
			}
		}
	})
}

func (r *loadRun) record(w *writer, k int, t0, t1 time.Time, err error) {
	a := attempt{start: t0.Sub(r.epoch).Nanoseconds(), end: t1.Sub(r.epoch).Nanoseconds(), key: int32(k)}
	switch {
	case err == nil:
		a.outcome = outAdmitted
		r.admitted.Add(1)
	case errors.Is(err, limiter.ErrUnavailable):
		a.outcome = outUnavailable
	case errors.Is(err, limiter.ErrRateLimited):
		a.outcome = outRefused
		r.refused.Add(1)
		w.refusal(err)
	default:
		a.outcome = outError
		if w.errs++; w.errs == 1 {
			w.firstErr = err.Error()
		}
	}
	r.attempts.Add(1)
	w.atts = append(w.atts, a)
}

// refusal counts a refusal under the limits that refused it.
func (w *writer) refusal(err error) {
	var rl *limiter.RateLimitedError
	if !errors.As(err, &rl) {
		return
	}
	if w.refusedBy == nil {
		w.refusedBy = map[string]int64{}
	}
	named := false
	for _, s := range rl.Limits {
		if s.Exceeded {
			name := s.Limit.Name
			if rl.Parent {
				name = "parent:" + name
			}
			w.refusedBy[name]++
			named = true
		}
	}
	if !named {
		w.refusedBy["(no limit named)"]++
	}
}

// rawSlice runs the raw floor for d: every writer sends one unconditional
// UpdateItem ADD to key, at the same pace as the limiter's acquires.
func (r *loadRun) rawSlice(ctx context.Context, d time.Duration, key store.Key, measure bool) time.Duration {
	add, err := store.Build(store.Update{}.Add("n", store.Int(1)), store.Condition{})
	if err != nil { // unreachable: Build fails only on an empty name or a zero Value
		return 0
	}
	in := store.UpdateInput{Key: key, Expr: add}
	p, stop := r.newPace(ctx, d, false)
	defer stop()
	return r.each(func(w *writer) {
		for p.wait(ctx) {
			t0 := time.Now()
			// Through the metered store (counting nothing here) for the
			// same simulated latency.
			_, err := r.st.Update(ctx, in)
			took := time.Since(t0)
			if ctx.Err() != nil || !measure {
				continue
			}
			if err != nil {
				w.rawFails++
				continue
			}
			w.raw = append(w.raw, uint32(min(took.Microseconds(), 1<<32-1)))
			r.rawWrites.Add(1)
		}
	})
}

// startProgress prints a line on stderr every -progress for runs longer
// than that; the returned function stops it.
func (r *loadRun) startProgress(stderr io.Writer) func() {
	o := r.o
	total := o.warmup + o.duration
	if o.raw {
		total += o.warmup + o.duration
	}
	if o.progress <= 0 || total <= o.progress {
		return func() {}
	}
	start := time.Now()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(o.progress)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintf(stderr, "loadtest: %v of ~%v: %d acquires (%d admitted, %d refused), %d raw writes\n",
					time.Since(start).Round(time.Second), total, r.attempts.Load(), r.admitted.Load(), r.refused.Load(), r.rawWrites.Load())
			}
		}
	}()
	return func() { close(stop); <-done }
}
