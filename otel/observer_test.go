package limiterotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shardlimit/limiter"
	limiterotel "github.com/shardlimit/limiter/otel"
	"github.com/shardlimit/limiter/store/memsim"
)

// collected reads every metric of the observer from an in-memory reader.
type collected map[string]metricdata.Aggregation

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != limiterotel.ScopeName || sm.Scope.Version != limiterotel.Version || sm.Scope.Version == "" {
			t.Fatalf("scope %q version %q, want %q version %q", sm.Scope.Name, sm.Scope.Version, limiterotel.ScopeName, limiterotel.Version)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func attrs(kv ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kv...) }

// sum returns the value of a counter's series with exactly these attributes.
func (c collected) sum(t *testing.T, name string, set attribute.Set) float64 {
	t.Helper()
	switch d := c[name].(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&set) {
				return float64(p.Value)
			}
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&set) {
				return p.Value
			}
		}
	case nil:
		t.Fatalf("no metric %s", name)
	}
	return 0
}

func newObserver(t *testing.T, opts ...limiterotel.Option) (*limiterotel.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	obs, err := limiterotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return obs, r
}

// Every field of an event lands in its instrument, with its attributes.
func TestObserverRecordsEveryField(t *testing.T) {
	obs, r := newObserver(t)
	events := []limiter.Event{
		{Op: "acquire", Outcome: limiter.Admitted, Path: limiter.PathSpeculative, RoundTrips: 1, WriteUnits: 1, Duration: 3 * time.Millisecond},
		{Op: "acquire", Outcome: limiter.Admitted, Path: limiter.PathSpeculative, RoundTrips: 1, WriteUnits: 1, Duration: 4 * time.Millisecond},
		{Op: "acquire", Outcome: limiter.Admitted, Path: limiter.PathNormal, RoundTrips: 3, WriteUnits: 2, ReadUnits: 1,
			Throttled: 1, ShardDoublings: 1, Duration: 30 * time.Millisecond},
		{Op: "acquire", Outcome: limiter.Rejected, Path: limiter.PathReject, RoundTrips: 1, WriteUnits: 1, Duration: 2 * time.Millisecond},
		{Op: "acquire", Outcome: limiter.Admitted, Path: limiter.PathFailOpen, RoundTrips: 1, Throttled: 1,
			Err: errors.New("throttled"), Duration: 200 * time.Millisecond},
		{Op: "adjust", Outcome: limiter.Admitted, Path: limiter.PathSpeculative, RoundTrips: 1, WriteUnits: 1},
		{Op: "acquire", Outcome: limiter.Admitted, Path: limiter.PathSpeculative, RoundTrips: 2, WriteUnits: 2, WouldRefuse: []string{"rpd", "parent:rpd"}},
		{Op: "acquire", Outcome: limiter.Disabled, Mode: "refuse"},
		{Op: "acquire", Outcome: limiter.Admitted, Path: limiter.PathSpeculative, RoundTrips: 1, WriteUnits: 1, LeftOut: []string{"all-models"}},
		{Op: "acquire", Outcome: limiter.Admitted, Mode: "admit", LeftOut: []string{"gpt-4", "all-models"}},
	}
	for _, e := range events {
		obs.Observe(e)
	}
	c := collect(t, r)
	op := func(o string) attribute.Set { return attrs(limiterotel.AttrOp.String(o)) }
	call := func(o, outcome, path string) attribute.Set {
		return attrs(limiterotel.AttrOp.String(o), limiterotel.AttrOutcome.String(outcome), limiterotel.AttrPath.String(path))
	}
	for _, w := range []struct {
		name string
		set  attribute.Set
		want float64
	}{
		{"limiter.calls", call("acquire", "admitted", "speculative"), 4},
		{"limiter.calls", call("acquire", "admitted", "none"), 1},
		{"limiter.mode.left_out", attrs(limiterotel.AttrResource.String("all-models")), 2},
		{"limiter.mode.left_out", attrs(limiterotel.AttrResource.String("gpt-4")), 1},
		{"limiter.calls", call("acquire", "disabled", "none"), 1},
		{"limiter.shadow.would_refuse", attrs(limiterotel.AttrLimit.String("rpd")), 1},
		{"limiter.shadow.would_refuse", attrs(limiterotel.AttrLimit.String("parent:rpd")), 1},
		{"limiter.calls", call("acquire", "admitted", "normal"), 1},
		{"limiter.calls", call("acquire", "rejected", "reject"), 1},
		{"limiter.calls", call("acquire", "admitted", "fail-open"), 1},
		{"limiter.calls", call("adjust", "admitted", "speculative"), 1},
		{"limiter.store.round_trips", op("acquire"), 10},
		{"limiter.store.round_trips", op("adjust"), 1},
		{"limiter.store.write_units", op("acquire"), 8},
		{"limiter.store.read_units", op("acquire"), 1},
		{"limiter.store.throttles", op("acquire"), 2},
		{"limiter.shard.doublings", op("acquire"), 1},
		{"limiter.fail_open", op("acquire"), 1},
	} {
		if got := c.sum(t, w.name, w.set); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.set.ToSlice(), got, w.want)
		}
	}
	h, ok := c["limiter.call.duration"].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("limiter.call.duration: %T", c["limiter.call.duration"])
	}
	admitted := attrs(limiterotel.AttrOp.String("acquire"), limiterotel.AttrOutcome.String("admitted"))
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&admitted) {
			if p.Count != 7 || p.Sum < 0.236 || p.Sum > 0.238 || p.Bounds[0] != 0.001 {
				t.Errorf("acquire/admitted durations: count %d, sum %v, bounds %v", p.Count, p.Sum, p.Bounds)
			}
			// 3 ms and 4 ms fall in (2 ms, 5 ms]; 30 ms in (20, 50]; 200 ms in (100, 200]; three of 0 ms in the first.
			if p.BucketCounts[0] != 3 || p.BucketCounts[2] != 2 || p.BucketCounts[5] != 1 || p.BucketCounts[7] != 1 {
				t.Errorf("bucket counts %v", p.BucketCounts)
			}
		}
	}
}

// With WithResource and WithAttributes the series carry them.
func TestObserverAttributes(t *testing.T) {
	obs, r := newObserver(t, limiterotel.WithResource(), limiterotel.WithAttributes(attribute.String("limiter.namespace", "tenant-a")))
	obs.Observe(limiter.Event{Op: "acquire", Resource: "gpt-4", Entity: "key-1", Outcome: limiter.Admitted, Path: limiter.PathCreate, RoundTrips: 2})
	obs.Observe(limiter.Event{Op: "acquire", Resource: "gpt-4o", Outcome: limiter.Admitted, Path: limiter.PathCreate, RoundTrips: 2})
	c := collect(t, r)
	set := attrs(limiterotel.AttrOp.String("acquire"), limiterotel.AttrResource.String("gpt-4"),
		attribute.String("limiter.namespace", "tenant-a"), limiterotel.AttrOutcome.String("admitted"), limiterotel.AttrPath.String("create"))
	if got := c.sum(t, "limiter.calls", set); got != 1 {
		t.Fatalf("calls for gpt-4 = %v", got)
	}
	for _, p := range c["limiter.calls"].(metricdata.Sum[int64]).DataPoints {
		if _, ok := p.Attributes.Value("limiter.entity"); ok {
			t.Fatal("entity ids must not be attributes")
		}
	}
	var nilObs *limiterotel.Observer
	nilObs.Observe(limiter.Event{Op: "acquire"}) // no panic
}

// Wired into a limiter: real events, durations by the limiter's clock.
func TestObserverOnALimiter(t *testing.T) {
	obs, r := newObserver(t)
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memsim.New(memsim.WithClock(clock), memsim.WithHook(func(context.Context, memsim.Op) { clock.Add(5 * time.Millisecond) }))
	lim, err := limiter.New(st, limiter.WithClock(clock), limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	req := limiter.Request{Entity: "k", Resource: "gpt-4", Limits: []limiter.Limit{limiter.PerMinute("rpm", 2)},
		Consume: map[string]int64{"rpm": 1}}
	ctx := context.Background()
	for range 3 {
		_, _ = lim.Acquire(ctx, req)
	}
	c := collect(t, r)
	op := attrs(limiterotel.AttrOp.String("acquire"))
	calls := 0.0
	for _, p := range c["limiter.calls"].(metricdata.Sum[int64]).DataPoints {
		calls += float64(p.Value)
	}
	rejected := attrs(limiterotel.AttrOp.String("acquire"), limiterotel.AttrOutcome.String("rejected"), limiterotel.AttrPath.String("local"))
	if calls != 3 || c.sum(t, "limiter.calls", rejected) != 1 || c.sum(t, "limiter.store.round_trips", op) < 3 ||
		c.sum(t, "limiter.store.write_units", op) < 3 {
		t.Fatalf("calls %v, rejected %v, round trips %v, WCU %v", calls, c.sum(t, "limiter.calls", rejected),
			c.sum(t, "limiter.store.round_trips", op), c.sum(t, "limiter.store.write_units", op))
	}
	var sum float64
	var n uint64
	for _, p := range c["limiter.call.duration"].(metricdata.Histogram[float64]).DataPoints {
		sum += p.Sum
		n += p.Count
	}
	if n != 3 || sum < 0.015 || int(sum*1000+0.5)%5 != 0 {
		t.Fatalf("durations: %d calls, %v s (every store call takes 5 ms)", n, sum)
	}
}

// Adjusts, rollbacks and status reads reach the metrics, as
// limiter.op "adjust", "rollback" and "status", with the outcome
// "succeeded": they admit nothing.
func TestObserverSeesEveryOp(t *testing.T) {
	obs, r := newObserver(t)
	clock := memsim.NewManualClock(memsim.Epoch())
	lim, err := limiter.New(memsim.New(memsim.WithClock(clock)), limiter.WithClock(clock), limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	limits := []limiter.Limit{limiter.PerMinute("rpm", 10)}
	ctx := context.Background()
	lease, err := lim.Acquire(ctx, limiter.Request{Entity: "k", Resource: "gpt-4", Limits: limits, Consume: map[string]int64{"rpm": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Adjust(ctx, map[string]int64{"rpm": -1}); err != nil {
		t.Fatal(err)
	}
	if err := lease.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Status(ctx, "k", "gpt-4", limits); err != nil {
		t.Fatal(err)
	}
	c := collect(t, r)
	for _, want := range []struct{ op, outcome, path string }{
		{"acquire", "admitted", "create"},
		{"adjust", "succeeded", "speculative"},
		{"rollback", "succeeded", "speculative"},
		{"status", "succeeded", "none"},
	} {
		set := attrs(limiterotel.AttrOp.String(want.op), limiterotel.AttrOutcome.String(want.outcome), limiterotel.AttrPath.String(want.path))
		if got := c.sum(t, "limiter.calls", set); got != 1 {
			t.Errorf("limiter.calls{op=%s,outcome=%s,path=%s} = %v, want 1", want.op, want.outcome, want.path, got)
		}
	}
	if got := c.sum(t, "limiter.store.read_units", attrs(limiterotel.AttrOp.String("status"))); got <= 0 {
		t.Errorf("status read units %v, want its reads counted", got)
	}
}

// A calendar quota reaches the metrics like a rate: the acquire it
// refuses is a rejected call, and a shadow quota that would refuse counts
// in limiter.shadow.would_refuse under its name. (The instruments carry
// no limit's remaining or reset, a quota's no more than a rate's: those
// are in Lease.Limits, RateLimitedError.Limits and Status.)
func TestObserverSeesQuotas(t *testing.T) {
	obs, r := newObserver(t)
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	lim, err := limiter.New(memsim.New(memsim.WithClock(clock)), limiter.WithClock(clock), limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	req := limiter.Request{Entity: "k", Resource: "gpt-4", Limits: []limiter.Limit{
		limiter.PerMinute("rpm", 100),
		{Name: "req", Capacity: 2, Window: "day"},
		{Name: "usd", Capacity: 1, Window: "month", TimeZone: "Europe/Paris", Shadow: true},
	}, Consume: map[string]int64{"rpm": 1, "req": 1, "usd": 1}}
	ctx := context.Background()
	for range 3 {
		_, _ = lim.Acquire(ctx, req)
	}
	c := collect(t, r)
	var admitted, rejected float64
	for _, p := range c["limiter.calls"].(metricdata.Sum[int64]).DataPoints {
		switch v, _ := p.Attributes.Value(limiterotel.AttrOutcome); v.AsString() {
		case "admitted":
			admitted += float64(p.Value)
		case "rejected":
			rejected += float64(p.Value)
		}
	}
	if admitted != 2 || rejected != 1 {
		t.Errorf("%v admitted and %v rejected, want 2 and 1 (the daily quota of 2 refuses the third)", admitted, rejected)
	}
	if got := c.sum(t, "limiter.shadow.would_refuse", attrs(limiterotel.AttrLimit.String("usd"))); got < 1 {
		t.Errorf("limiter.shadow.would_refuse{limit=usd} = %v, want the second acquire counted", got)
	}
}
