package limiter

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// zcall is a zerotest.Call, in tables without field names.
type zcall struct {
	Name string
	Fn   func() error
	Want string
}

// Every exported method of the package called on a nil or zero receiver,
// or with nil, zero and out-of-range input, returns (an error naming the
// field when it returns one) and does not panic; bad input writes nothing.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	var nilCtx context.Context
	var nilL *Limiter
	var zeroL Limiter
	var nilLe *Lease
	var zeroLe Lease
	var nilLim *Limit
	var nilState *LimitState
	var nilRL *RateLimitedError
	var nilUE *UnavailableError
	var nilVE *ValidationError
	other := newEnv(t) // for the calls that are fine and write
	calls := []zcall{
		// Lease: nil and zero.
		{"nil Lease.Adjust", func() error { return nilLe.Adjust(e.ctx, map[string]int64{"rpm": 1}) }, "Lease"},
		{"nil Lease.Rollback", func() error { return nilLe.Rollback(e.ctx) }, "Lease"},
		{"nil Lease.Commit", func() error { return nilLe.Commit() }, "Lease"},
		{"nil Lease.FailedOpen", func() error { nilLe.FailedOpen(); return nil }, ""},
		{"nil Lease.Limits", func() error { nilLe.Limits(); return nil }, ""},
		{"nil Lease.ParentLimits", func() error { nilLe.ParentLimits(); return nil }, ""},
		{"nil Lease.Shard", func() error { nilLe.Shard(); return nil }, ""},
		{"zero Lease.Adjust", func() error { return zeroLe.Adjust(e.ctx, map[string]int64{"rpm": 1}) }, "Lease"},
		{"zero Lease.Adjust nil ctx", func() error { return zeroLe.Adjust(nilCtx, nil) }, ""},
		{"zero Lease.Rollback", func() error { return zeroLe.Rollback(e.ctx) }, "Lease"},
		{"zero Lease.Commit", func() error { return zeroLe.Commit() }, "Lease"},
		{"zero Lease.FailedOpen", func() error { zeroLe.FailedOpen(); return nil }, ""},
		{"zero Lease.Limits", func() error { zeroLe.Limits(); return nil }, ""},
		{"zero Lease.ParentLimits", func() error { zeroLe.ParentLimits(); return nil }, ""},
		{"zero Lease.Shard", func() error { zeroLe.Shard(); return nil }, ""},

		// Limiter: nil and zero, the methods without a context.
		{"nil Limiter.Close", func() error { return nilL.Close(e.ctx) }, ""},
		{"nil Limiter.ForgetBucket", func() error { nilL.ForgetBucket("", ""); return nil }, ""},
		{"nil Limiter.Invalidate", func() error { nilL.Invalidate(); return nil }, ""},
		{"zero Limiter.Close", func() error { return zeroL.Close(e.ctx) }, ""},
		{"zero Limiter.ForgetBucket", func() error { zeroL.ForgetBucket("a", ""); return nil }, ""},
		{"zero Limiter.Invalidate", func() error { zeroL.Invalidate(); return nil }, ""},

		// New and its options.
		{"New(nil)", func() error { _, err := New(nil); return err }, "store"},
		{"New nil option", func() error { _, err := New(e.st, nil); return err }, "ok"},
		{"WithClock(nil)", func() error { _, err := New(e.st, WithClock(nil)); return err }, "WithClock"},
		{"WithRand(nil)", func() error { _, err := New(e.st, WithRand(nil)); return err }, "ok"},
		{"WithLogger(nil)", func() error { _, err := New(e.st, WithLogger(nil)); return err }, "ok"},
		{"WithObserver(nil)", func() error { _, err := New(e.st, WithObserver(nil)); return err }, "ok"},
		{"WithNamespace empty", func() error { _, err := New(e.st, WithNamespace("")); return err }, "Namespace"},
		{"WithCacheTTL negative", func() error { _, err := New(e.st, WithCacheTTL(-1)); return err }, "WithCacheTTL"},
		{"WithCacheTTL huge", func() error { _, err := New(e.st, WithCacheTTL(math.MaxInt64)); return err }, ""},
		{"WithMemorySize 0", func() error { _, err := New(e.st, WithMemorySize(0)); return err }, "WithMemorySize"},
		{"WithMemorySize -1", func() error { _, err := New(e.st, WithMemorySize(-1)); return err }, "WithMemorySize"},
		{"WithMemorySize huge", func() error { _, err := New(e.st, WithMemorySize(math.MaxInt)); return err }, ""},
		{"WithPolicy 255", func() error { _, err := New(e.st, WithPolicy(255)); return err }, "WithPolicy"},
		{"WithDefaultLimits zero", func() error { _, err := New(e.st, WithDefaultLimits(Limit{})); return err }, "Limit.Name"},
		{"WithDefaultLimits none", func() error { _, err := New(e.st, WithDefaultLimits()); return err }, "ok"},
		{"WithReservations empty name", func() error { _, err := New(e.st, WithReservations("")); return err }, "WithReservations"},
		{"WithReservations none", func() error { _, err := New(e.st, WithReservations()); return err }, "ok"},
		{"WithObserver(ObserverFunc(nil))", func() error {
			l, err := New(other.st, WithNamespace("ns"), WithClock(other.clock), WithObserver(ObserverFunc(nil)))
			if err != nil {
				return err
			}
			_, err = l.Acquire(e.ctx, req("obs", rpm(10), one))
			return err
		}, "ok"},

		// Acquire with bad requests.
		{"Acquire zero Request", func() error { _, err := l.Acquire(e.ctx, Request{}); return err }, "Entity"},
		{"Acquire nil Consume", func() error { _, err := l.Acquire(e.ctx, req("a", rpm(10), nil)); return err }, "Consume"},
		{"Acquire nil Limits", func() error { _, err := l.Acquire(e.ctx, req("a", nil, one)); return err }, "imits"},
		{"Acquire zero Limit", func() error { _, err := l.Acquire(e.ctx, req("a", []Limit{{}}, one)); return err }, "Limit"},
		{"Acquire Consume 0", func() error { _, err := l.Acquire(e.ctx, req("a", rpm(10), map[string]int64{"rpm": 0})); return err }, "Consume"},
		{"Acquire Consume -1", func() error {
			_, err := l.Acquire(e.ctx, req("a", rpm(10), map[string]int64{"rpm": -1}))
			return err
		}, "Consume"},
		{"Acquire Consume MaxInt64", func() error {
			_, err := l.Acquire(e.ctx, req("a", rpm(10), map[string]int64{"rpm": math.MaxInt64}))
			return err
		}, "Consume"},
		{"Acquire Consume MinInt64", func() error {
			_, err := l.Acquire(e.ctx, req("a", rpm(10), map[string]int64{"rpm": math.MinInt64}))
			return err
		}, "Consume"},
		{"Acquire Consume empty name", func() error { _, err := l.Acquire(e.ctx, req("a", rpm(10), map[string]int64{"": 1})); return err }, "Consume"},
		{"Acquire Also empty", func() error {
			r := req("a", rpm(10), one)
			r.Also = []string{""}
			_, err := l.Acquire(e.ctx, r)
			return err
		}, "Also"},
		{"Acquire Also empty slice", func() error {
			r := req("a", rpm(10), one)
			r.Also = []string{}
			_, err := other.limiter().Acquire(e.ctx, r)
			return err
		}, "ok"},
		{"Acquire Policy 255", func() error {
			r := req("a", rpm(10), one)
			r.Policy = 255
			_, err := l.Acquire(e.ctx, r)
			return err
		}, "Policy"},
		{"Acquire huge Limit", func() error {
			_, err := l.Acquire(e.ctx, req("a", []Limit{PerSecond("rpm", math.MaxInt64)}, one))
			return err
		}, "rpm"},
		{"Acquire negative Limit", func() error { _, err := l.Acquire(e.ctx, req("a", []Limit{PerSecond("rpm", -1)}, one)); return err }, "rpm"},
		{"Acquire negative Period", func() error {
			_, err := l.Acquire(e.ctx, req("a", []Limit{{Name: "rpm", Capacity: 1, Refill: 1, Period: -time.Second}}, one))
			return err
		}, "Period"},
		{"Acquire cancelled ctx", func() error {
			ctx, cancel := context.WithCancel(e.ctx)
			cancel()
			_, err := l.Acquire(ctx, req("c", rpm(10), one))
			return err
		}, "context canceled"},
		{"Wait zero Request", func() error { _, err := l.Wait(e.ctx, Request{}); return err }, "Entity"},
		{"Status empty entity", func() error { _, err := l.Status(e.ctx, "", "", rpm(1)); return err }, "entity"},
		{"Status nil limits", func() error { _, err := l.Status(e.ctx, "a", "", nil); return err }, "limits"},
		{"Status zero Limit", func() error { _, err := l.Status(e.ctx, "a", "", []Limit{{}}); return err }, "Limit.Name"},
		{"Close of a live limiter", func() error { return l.Close(e.ctx) }, "ok"},
		{"ForgetBucket empty", func() error { l.ForgetBucket("", ""); return nil }, ""},

		// A live lease given nonsense amounts.
		{"Lease.Adjust nonsense", func() error {
			le, err := other.limiter().Acquire(e.ctx, req("adj", rpm(10), one))
			if err != nil {
				return err
			}
			for _, d := range []map[string]int64{nil, {}, {"": 1}, {"nope": 1}, {"rpm": math.MinInt64}, {"rpm": math.MaxInt64}, {"rpm": -math.MaxInt64}} {
				_ = le.Adjust(e.ctx, d)
			}
			if err := le.Commit(); err != nil {
				return err
			}
			return le.Rollback(e.ctx)
		}, "ended"},

		// Limit and LimitState.
		{"ParseLimit empty", func() error { _, err := ParseLimit(""); return err }, ""},
		{"ParseLimit nonsense", func() error { _, err := ParseLimit("x:y/z"); return err }, ""},
		{"ParseLimit huge", func() error { _, err := ParseLimit("rpm:9223372036854775807/s"); return err }, ""},
		{"PerSecond zero", func() error { return PerSecond("", 0).Validate() }, "Name"},
		{"PerMinute -1", func() error { return PerMinute("rpm", -1).Validate() }, "rpm"},
		{"PerHour MaxInt64", func() error { return PerHour("rpm", math.MaxInt64).Validate() }, "rpm"},
		{"PerDay MinInt64", func() error { return PerDay("rpm", math.MinInt64).Validate() }, "rpm"},
		{"zero Limit.Validate", func() error { return Limit{}.Validate() }, "Name"},
		{"zero Limit.EffectiveBurst", func() error { Limit{}.EffectiveBurst(); return nil }, ""},
		{"zero Limit.String", func() error { _ = Limit{}.String(); return nil }, ""},
		{"zero Limit.MarshalJSON", func() error { _, err := Limit{}.MarshalJSON(); return err }, ""},
		{"zero Limit.WithBurst(-1)", func() error { return Limit{}.WithBurst(-1).Validate() }, ""},
		{"Limit.WithBurst(-1)", func() error { return PerSecond("rpm", 10).WithBurst(-1).Validate() }, "Burst"},
		{"huge Limit.String", func() error {
			_ = Limit{Name: "x", Capacity: math.MaxInt64, Refill: math.MaxInt64, Period: math.MaxInt64}.String()
			return nil
		}, ""},
		{"nil Limit.UnmarshalJSON", func() error { return nilLim.UnmarshalJSON([]byte(`{}`)) }, ""},
		{"Limit.UnmarshalJSON nil", func() error { var x Limit; return x.UnmarshalJSON(nil) }, ""},
		{"Limit.UnmarshalJSON null", func() error { var x Limit; return x.UnmarshalJSON([]byte("null")) }, ""},
		{"Limit.UnmarshalJSON {}", func() error { var x Limit; return x.UnmarshalJSON([]byte("{}")) }, ""},
		{"zero LimitState.MarshalJSON", func() error { _, err := LimitState{}.MarshalJSON(); return err }, ""},
		{"zero LimitState.ResetSeconds", func() error { LimitState{}.ResetSeconds(); return nil }, ""},
		{"zero LimitState.RetryAfterSeconds", func() error { LimitState{}.RetryAfterSeconds(); return nil }, ""},
		{"huge LimitState.RetryAfterSeconds", func() error {
			LimitState{RetryAfter: math.MaxInt64, Reset: math.MinInt64}.RetryAfterSeconds()
			LimitState{RetryAfter: math.MinInt64, Reset: math.MaxInt64}.ResetSeconds()
			return nil
		}, ""},
		{"nil LimitState.UnmarshalJSON", func() error { return nilState.UnmarshalJSON([]byte(`{}`)) }, ""},
		{"LimitState.UnmarshalJSON null", func() error { var s LimitState; return s.UnmarshalJSON([]byte("null")) }, ""},

		// Outcome, ObserverFunc and the errors.
		{"Outcome(0).String", func() error { _ = Outcome(0).String(); return nil }, ""},
		{"Outcome(255).String", func() error { _ = Outcome(255).String(); return nil }, ""},
		{"ObserverFunc(nil).Observe", func() error { ObserverFunc(nil).Observe(Event{}); return nil }, ""},
		{"nil RateLimitedError.Error", func() error { _ = nilRL.Error(); return nil }, ""},
		{"nil RateLimitedError.RetryAfterSeconds", func() error { nilRL.RetryAfterSeconds(); return nil }, ""},
		{"nil RateLimitedError.Is", func() error { errors.Is(nilRL, ErrRateLimited); return nil }, ""},
		{"zero RateLimitedError.Error", func() error { _ = (&RateLimitedError{}).Error(); return nil }, ""},
		{"nil UnavailableError.Error", func() error { _ = nilUE.Error(); return nil }, ""},
		{"nil UnavailableError.Unwrap", func() error { _ = nilUE.Unwrap(); return nil }, ""},
		{"zero UnavailableError.Error", func() error { _ = (&UnavailableError{}).Error(); return nil }, ""},
		{"nil ValidationError.Error", func() error { _ = nilVE.Error(); return nil }, ""},
	}
	// The first read of configuration stores the table's schema version:
	// made here, so that what follows counts only what bad calls write.
	if _, err := l.Status(e.ctx, "warm", "", rpm(1)); err != nil {
		t.Fatal(err)
	}
	before := e.st.Len()
	zerotest.Run(t, calls)
	if n := e.st.Len() - before; n != 0 {
		t.Errorf("nil, zero and bad calls wrote %d items", n)
	}
}

// endClock stands at one instant.
type endClock struct{ t time.Time }

func (c endClock) Now() time.Time { return c.t }

// A limiter whose clock reads the first or last millisecond int64 holds
// answers an acquire, a status and a wait of a calendar quota (they hung:
// the window search looped forever once the next boundary wrapped around
// int64).
func TestRegressionAQuotaAtTheEndOfTimeReturns(t *testing.T) {
	for _, at := range []time.Time{time.UnixMilli(math.MaxInt64), time.UnixMilli(math.MinInt64)} {
		st := memsim.New(memsim.WithClock(memsim.NewManualClock(at)))
		l, err := New(st, WithClock(endClock{at}))
		if err != nil {
			t.Fatal(err)
		}
		lims := []Limit{PerMinute("rpm", 10), {Name: "q", Capacity: 100, Window: "month"}}
		r := Request{Entity: "a", Limits: lims, Consume: map[string]int64{"rpm": 1, "q": 1}}
		if _, err := l.Acquire(context.Background(), r); err != nil {
			t.Logf("%v: acquire: %v", at, err)
		}
		if _, err := l.Status(context.Background(), "a", "", lims); err != nil {
			t.Logf("%v: status: %v", at, err)
		}
		if _, err := l.Wait(context.Background(), r); err != nil {
			t.Logf("%v: wait: %v", at, err)
		}
	}
}
