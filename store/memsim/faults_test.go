package memsim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

func wantUnavailable(t *testing.T, err error, unknown bool) *store.UnavailableError {
	t.Helper()
	var ue *store.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v (%T), want *store.UnavailableError", err, err)
	}
	if ue.OutcomeUnknown != unknown {
		t.Fatalf("OutcomeUnknown = %v, want %v (%v)", ue.OutcomeUnknown, unknown, err)
	}
	return ue
}

func TestChecklist37_InternalServerError(t *testing.T) {
	for _, tc := range []struct {
		fault   memsim.Fault
		applied bool
	}{
		{memsim.Fault5xxBeforeApply, false},
		{memsim.Fault5xxAfterApply, true},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			s := memsim.New(memsim.WithFaults(memsim.Always(tc.fault)))
			k := key("a")
			out, err := s.Put(ctx, store.PutInput{Item: item(k, "n", 1)})
			ue := wantUnavailable(t, err, true) // a write: the client cannot know
			if !errors.Is(ue, memsim.ErrInternalServerError) || ue.Op != "Put" {
				t.Fatalf("cause %v, op %q", ue.Err, ue.Op)
			}
			if out.Consumed != (store.Capacity{}) {
				t.Fatal("an unanswered request reported capacity")
			}
			if applied := s.Peek(k) != nil; applied != tc.applied {
				t.Fatalf("applied = %v, want %v", applied, tc.applied)
			}
			if got := s.StreamLen() == 1; got != tc.applied {
				t.Fatalf("stream len %d", s.StreamLen())
			}
			_, err = s.Get(ctx, store.GetInput{Key: k})
			wantUnavailable(t, err, false) // a read
			tot := s.Totals()
			if tot.Faults != 2 || tot.Requests != 2 {
				t.Fatalf("totals %+v", tot)
			}
			if tc.applied && tot.Consumed.WriteUnits != 1 {
				t.Fatalf("applied write not counted in totals: %+v", tot.Consumed)
			}
		})
	}
}

func TestChecklist38_LostResponse(t *testing.T) {
	plan := memsim.OnOps([]memsim.OpKind{memsim.OpTransactWrite}, memsim.Nth(1, memsim.FaultLostResponse))
	s := memsim.New(memsim.WithFaults(plan))
	in := store.TransactWriteInput{ClientToken: "t", Actions: []store.Write{putAction(item(key("a"), "n", 1))}}
	_, err := s.TransactWrite(ctx, in)
	ue := wantUnavailable(t, err, true)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(ue, memsim.ErrResponseLost) {
		t.Fatalf("lost response is not a timeout: %v", err)
	}
	if s.Peek(key("a")) == nil {
		t.Fatal("lost response did not apply")
	}
	// The SDK retries with the same token: applied once (checklist 44).
	if _, err := s.TransactWrite(ctx, in); err != nil {
		t.Fatal(err)
	}
	if s.StreamLen() != 1 {
		t.Fatalf("retried transaction applied twice: %d records", s.StreamLen())
	}
}

func TestChecklist39_ContextCancellation(t *testing.T) {
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s := memsim.New()
	_, err := s.Put(cctx, store.PutInput{Item: item(key("a"))})
	wantUnavailable(t, err, false) // never sent
	if !errors.Is(err, context.Canceled) || s.Len() != 0 {
		t.Fatalf("err %v, len %d", err, s.Len())
	}
	// Cancelled while the injected latency elapses: not applied, but a
	// client cannot know that.
	sleeps := 0
	s = memsim.New(memsim.WithFaults(memsim.Latency(20*time.Millisecond)),
		memsim.WithSleeper(func(ctx context.Context, d time.Duration) error {
			sleeps++
			if d != 20*time.Millisecond {
				t.Errorf("slept %v", d)
			}
			return context.Canceled
		}))
	_, err = s.Put(ctx, store.PutInput{Item: item(key("a"))})
	wantUnavailable(t, err, true)
	if sleeps != 1 || s.Len() != 0 {
		t.Fatalf("sleeps %d, len %d", sleeps, s.Len())
	}
	_, err = s.Get(ctx, store.GetInput{Key: key("a")})
	wantUnavailable(t, err, false)
	if tot := s.Totals(); tot.InjectedDelay != 40*time.Millisecond {
		t.Fatalf("injected delay %v", tot.InjectedDelay)
	}
}

func TestInjectedThrottle(t *testing.T) {
	s := memsim.New(memsim.WithFaults(memsim.OnKey("hot", memsim.Always(memsim.FaultThrottle))), memsim.WithThrottleCode(store.ThrottleThrottling))
	_, err := s.Put(ctx, store.PutInput{Item: item(key("hot"))})
	var te *store.ThrottledError
	if !errors.As(err, &te) || te.Code != store.ThrottleThrottling || te.Key != key("hot") {
		t.Fatalf("err = %v", err)
	}
	mustPut(t, s, item(key("cold")))
	_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{putAction(item(key("cold"))), putAction(item(key("hot")))}})
	var tc *store.TransactionCanceledError
	if !errors.As(err, &tc) || tc.Reasons[1].Code != store.ReasonThrottlingError {
		t.Fatalf("transaction: %v", err)
	}
	if tot := s.Totals(); tot.Throttles != 2 || tot.Consumed.WriteUnits != 1 {
		t.Fatalf("totals %+v", tot)
	}
}

func TestInjectorStrings(t *testing.T) {
	e := memsim.Epoch()
	plan := memsim.Chain(
		memsim.During(e.Add(10*time.Second), e.Add(20*time.Second), memsim.Probability(0.05, 7, memsim.Fault5xxAfterApply)),
		memsim.OnOps([]memsim.OpKind{memsim.OpUpdate, memsim.OpTransactWrite}, memsim.Nth(3, memsim.FaultLostResponse)),
		memsim.ThrottleStorm(e.Add(time.Minute), 5*time.Minute, 10*time.Second, 0.5, 1),
		memsim.OnKey("hot", memsim.Always(memsim.FaultConflict)),
		memsim.Latency(5*time.Millisecond),
	)
	const want = `chain(during[10s,20s](p=0.05 seed=7 -> 5xx-after-apply), on[Update,TransactWrite](nth(3 -> lost-response)), ` +
		`throttle-storm[start=1m0s every=5m0s for=10s](p=0.5 seed=1), key["hot"](always(conflict)), latency(5ms))`
	if got := plan.String(); got != want {
		t.Fatalf("String() =\n%s\nwant\n%s", got, want)
	}
	early := memsim.During(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), e, memsim.Always(memsim.FaultThrottle))
	if got := early.String(); got != "during[2020-01-01T00:00:00Z,0s](always(throttle))" {
		t.Fatal(got)
	}
}

func TestInjectorsCompose(t *testing.T) {
	e := memsim.Epoch()
	op := func(kind memsim.OpKind, at time.Duration, pk string) memsim.Op {
		return memsim.Op{Kind: kind, Keys: []store.Key{key(pk)}, Time: e.Add(at)}
	}
	t.Run("chain: first fault wins, delays add up", func(t *testing.T) {
		c := memsim.Chain(memsim.Latency(time.Millisecond), memsim.OnKey("x", memsim.Always(memsim.FaultThrottle)),
			memsim.Latency(2*time.Millisecond), memsim.Always(memsim.Fault5xxBeforeApply))
		d := c.Inject(op(memsim.OpGet, 0, "x"))
		if d.Fault != memsim.FaultThrottle || d.Delay != time.Millisecond || d.By != `key["x"](always(throttle))` {
			t.Fatalf("%+v", d)
		}
		d = c.Inject(op(memsim.OpGet, 0, "y"))
		if d.Fault != memsim.Fault5xxBeforeApply || d.Delay != 3*time.Millisecond {
			t.Fatalf("%+v", d)
		}
		if d := memsim.Chain(memsim.Latency(time.Millisecond)).Inject(op(memsim.OpGet, 0, "y")); d.Fault != memsim.FaultNone || d.Delay != time.Millisecond {
			t.Fatalf("%+v", d)
		}
	})
	t.Run("during is half-open", func(t *testing.T) {
		d := memsim.During(e.Add(time.Second), e.Add(2*time.Second), memsim.Always(memsim.FaultThrottle))
		for at, want := range map[time.Duration]memsim.Fault{
			999 * time.Millisecond: memsim.FaultNone, time.Second: memsim.FaultThrottle,
			1999 * time.Millisecond: memsim.FaultThrottle, 2 * time.Second: memsim.FaultNone,
		} {
			if got := d.Inject(op(memsim.OpPut, at, "a")).Fault; got != want {
				t.Errorf("at %v: %v, want %v", at, got, want)
			}
		}
	})
	t.Run("nth on ops", func(t *testing.T) {
		n := memsim.OnOps([]memsim.OpKind{memsim.OpUpdate}, memsim.Nth(2, memsim.FaultLostResponse))
		var got []memsim.Fault
		for _, k := range []memsim.OpKind{memsim.OpUpdate, memsim.OpGet, memsim.OpUpdate, memsim.OpUpdate} {
			got = append(got, n.Inject(op(k, 0, "a")).Fault)
		}
		want := []memsim.Fault{memsim.FaultNone, memsim.FaultNone, memsim.FaultLostResponse, memsim.FaultNone}
		if !cmp.Equal(got, want) {
			t.Fatalf("%v, want %v", got, want)
		}
	})
	t.Run("throttle storm windows", func(t *testing.T) {
		st := memsim.ThrottleStorm(e.Add(time.Minute), time.Minute, 10*time.Second, 1, 3)
		for at, want := range map[time.Duration]memsim.Fault{
			59 * time.Second: memsim.FaultNone, 60 * time.Second: memsim.FaultThrottle, 69 * time.Second: memsim.FaultThrottle,
			70 * time.Second: memsim.FaultNone, 125 * time.Second: memsim.FaultThrottle, 175 * time.Second: memsim.FaultNone,
		} {
			if got := st.Inject(op(memsim.OpPut, at, "a")).Fault; got != want {
				t.Errorf("at %v: %v, want %v", at, got, want)
			}
		}
	})
	t.Run("probability is seeded", func(t *testing.T) {
		draw := func(seed uint64) []memsim.Fault {
			p := memsim.Probability(0.3, seed, memsim.FaultThrottle)
			out := make([]memsim.Fault, 1000)
			for i := range out {
				out[i] = p.Inject(op(memsim.OpPut, 0, "a")).Fault
			}
			return out
		}
		a, b, c := draw(7), draw(7), draw(8)
		if !cmp.Equal(a, b) {
			t.Fatal("same seed, different decisions")
		}
		if cmp.Equal(a, c) {
			t.Fatal("different seeds, same decisions")
		}
		hits := 0
		for _, f := range a {
			if f == memsim.FaultThrottle {
				hits++
			}
		}
		if hits < 240 || hits > 360 {
			t.Fatalf("%d hits of 1000 at p=0.3", hits)
		}
	})
}

// run plays a fixed request sequence against a store with a seeded fault
// plan and returns everything observable.
func run(t *testing.T, seed uint64) string {
	clk := memsim.NewManualClock(memsim.Epoch())
	plan := memsim.Chain(
		memsim.Probability(0.1, seed, memsim.Fault5xxAfterApply),
		memsim.Probability(0.1, seed+1, memsim.FaultThrottle),
		memsim.OnOps([]memsim.OpKind{memsim.OpTransactWrite}, memsim.Probability(0.2, seed+2, memsim.FaultConflict)),
	)
	s := memsim.New(memsim.WithClock(clk), memsim.WithFaults(plan), memsim.WithPartitionLimits(50, 100))
	var log []string
	for i := range 400 {
		clk.Add(3 * time.Millisecond)
		pk := fmt.Sprintf("p%d", i%5)
		var err error
		switch i % 4 {
		case 0:
			_, err = s.Put(ctx, store.PutInput{Item: item(key(pk), "i", i)})
		case 1:
			_, err = s.Get(ctx, store.GetInput{Key: key(pk), ConsistentRead: true})
		case 2:
			_, err = s.Delete(ctx, store.DeleteInput{Key: key(fmt.Sprintf("p%d", (i+1)%5))})
		case 3:
			_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
				putAction(item(key(pk), "t", i)), putAction(item(store.Key{PK: pk, SK: "other"}, "t", i)),
			}})
		}
		log = append(log, fmt.Sprint(err))
	}
	return fmt.Sprintf("%v\n%+v\n%+v\n%+v\n%+v", log, s.Items(), s.Stream(0), s.Totals(), s.Partitions())
}

func TestDeterministic(t *testing.T) {
	a, b := run(t, 42), run(t, 42)
	if a != b {
		t.Fatal("same seed and requests gave different results")
	}
	if a == run(t, 43) {
		t.Fatal("the seed has no effect")
	}
}
