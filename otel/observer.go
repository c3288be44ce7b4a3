// Package limiterotel records a limiter's calls as OpenTelemetry metrics:
// a [limiter.Observer] on the go.opentelemetry.io/otel/metric API. It is a
// module of its own (github.com/shardlimit/limiter/otel), so that the
// limiter itself does not depend on OpenTelemetry.
//
//	obs, err := limiterotel.New(otel.GetMeterProvider())
//	lim, err := limiter.New(st, limiter.WithObserver(obs))
//
// Instruments (meter "github.com/shardlimit/limiter/otel", version
// [Version]):
//
//	limiter.calls               counter    {call}        op, outcome, path
//	limiter.call.duration       histogram  s             op, outcome
//	limiter.store.round_trips   counter    {round_trip}  op
//	limiter.store.read_units    counter    {RCU}         op
//	limiter.store.write_units   counter    {WCU}         op
//	limiter.store.throttles     counter    {throttle}    op
//	limiter.shard.doublings     counter    {doubling}    op
//	limiter.fail_open           counter    {call}        op
//	limiter.shadow.would_refuse counter    {call}        limit
//	limiter.mode.left_out       counter    {call}        resource
//
// Attributes: limiter.op is "acquire", "adjust", "rollback", "status" or
// "close"; limiter.outcome is "admitted" (an acquire), "succeeded" (an
// adjust, rollback, status read or close that worked), "rejected",
// "unavailable" or "invalid"; limiter.path is the last write path
// ("speculative", "full", "create", "normal", "retry", "reject",
// "fail-open", "local" for a refusal answered without a store call, "pool"
// for an acquire answered from a reservation, "double" for a shard
// doubling the store refused, or "none" when no write was made, as for a
// status read). With [WithResource], the first eight instruments also
// carry limiter.resource. Entity ids are never attributes: there are too
// many.
//
// Through the Prometheus exporter the names become limiter_calls_total,
// limiter_call_duration_seconds, limiter_store_round_trips_total and so on.
package limiterotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shardlimit/limiter"
)

// ScopeName is the instrumentation scope (meter name) of the instruments.
const ScopeName = "github.com/shardlimit/limiter/otel"

// Version is this module's version, without the leading "v": the
// instrumentation scope's version, so a backend can tell which release
// recorded a series. It changes with each release of the module.
const Version = "0.1.0"

// Attribute keys.
const (
	// AttrOp is the limiter call: "acquire", "adjust", "rollback",
	// "status" or "close".
	AttrOp = attribute.Key("limiter.op")
	// AttrOutcome is how the call ended: "admitted", "succeeded",
	// "rejected", "unavailable" or "invalid".
	AttrOutcome = attribute.Key("limiter.outcome")
	// AttrPath is the call's last write path (see the package
	// documentation); "none" when it made no write.
	AttrPath = attribute.Key("limiter.path")
	// AttrResource is the request's resource (see WithResource), and the
	// resource an admit mode left out (limiter.mode.left_out, always).
	AttrResource = attribute.Key("limiter.resource")
	// AttrLimit is the limit a shadow limit's would-refuse count is of
	// (a cascade parent's as "parent:NAME").
	AttrLimit = attribute.Key("limiter.limit")
)

// DurationBuckets are the histogram bucket bounds of limiter.call.duration,
// in seconds: from a fast DynamoDB round trip (a few ms) to a throttled
// call that waited out its retries.
var DurationBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}

// Option configures an Observer.
type Option func(*options)

type options struct {
	resource bool
	attrs    []attribute.KeyValue
}

// WithResource adds the request's resource as attribute limiter.resource.
// Use it when resources are few (model names, API routes): each one
// multiplies the number of series.
func WithResource() Option { return func(o *options) { o.resource = true } }

// WithAttributes adds constant attributes to every measurement, such as
// the limiter's namespace. Several calls add up.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(o *options) { o.attrs = append(o.attrs, kv...) }
}

// Observer implements limiter.Observer with OpenTelemetry instruments. It is
// safe for concurrent use; create it with New. A nil or zero Observer
// observes nothing.
type Observer struct {
	opts        options
	calls       metric.Int64Counter
	duration    metric.Float64Histogram
	roundTrips  metric.Int64Counter
	readUnits   metric.Float64Counter
	writeUnits  metric.Float64Counter
	throttles   metric.Int64Counter
	doublings   metric.Int64Counter
	failOpen    metric.Int64Counter
	wouldRefuse metric.Int64Counter
	leftOut     metric.Int64Counter
}

var _ limiter.Observer = (*Observer)(nil)

// attrSets are the attributes of one call's measurements.
type attrSets struct {
	call    metric.MeasurementOption // op, outcome, path
	outcome metric.MeasurementOption // op, outcome
	op      metric.MeasurementOption // op
}

// New returns an Observer whose instruments come from mp's meter
// ScopeName. It fails when mp is nil or cannot create an instrument; a
// nil option is skipped.
func New(mp metric.MeterProvider, opts ...Option) (*Observer, error) {
	if mp == nil {
		return nil, errors.New("limiterotel: the MeterProvider is nil: pass one, such as otel.GetMeterProvider()")
	}
	o := &Observer{}
	for _, f := range opts {
		if f != nil {
			f(&o.opts)
		}
	}
	m := mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version))
	var err error
	i64 := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	f64 := func(name, unit, desc string) metric.Float64Counter {
		if err != nil {
			return nil
		}
		var c metric.Float64Counter
		c, err = m.Float64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	o.calls = i64("limiter.calls", "{call}", "Limiter calls (acquire, adjust, rollback, status, close) by outcome and write path.")
	o.roundTrips = i64("limiter.store.round_trips", "{round_trip}", "Store calls made by limiter calls; concurrent writes count once.")
	o.readUnits = f64("limiter.store.read_units", "{RCU}", "DynamoDB read capacity consumed by limiter calls.")
	o.writeUnits = f64("limiter.store.write_units", "{WCU}", "DynamoDB write capacity consumed by limiter calls, index writes included.")
	o.throttles = i64("limiter.store.throttles", "{throttle}", "Store calls answered with a throttling error.")
	o.doublings = i64("limiter.shard.doublings", "{doubling}", "Shard-count doublings performed by limiter calls.")
	o.failOpen = i64("limiter.fail_open", "{call}", "Acquires admitted without the store because it failed and the policy is fail-open.")
	o.wouldRefuse = i64("limiter.shadow.would_refuse", "{call}", "Acquires a shadow limit would have refused (admitted, not charged by it), by limit.")
	o.leftOut = i64("limiter.mode.left_out", "{call}", "Acquires admitted without charging a resource whose scope is in admit mode, by resource.")
	if err != nil {
		return nil, err
	}
	o.duration, err = m.Float64Histogram("limiter.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of limiter calls, by the limiter's clock."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Observe records one finished call. A nil Observer records nothing.
func (o *Observer) Observe(e limiter.Event) {
	if o == nil || o.calls == nil {
		return
	}
	s := o.attrSets(e)
	ctx := context.Background()
	o.calls.Add(ctx, 1, s.call)
	o.duration.Record(ctx, e.Duration.Seconds(), s.outcome)
	if e.RoundTrips > 0 {
		o.roundTrips.Add(ctx, int64(e.RoundTrips), s.op)
	}
	if e.ReadUnits > 0 {
		o.readUnits.Add(ctx, e.ReadUnits, s.op)
	}
	if e.WriteUnits > 0 {
		o.writeUnits.Add(ctx, e.WriteUnits, s.op)
	}
	if e.Throttled > 0 {
		o.throttles.Add(ctx, int64(e.Throttled), s.op)
	}
	if e.ShardDoublings > 0 {
		o.doublings.Add(ctx, int64(e.ShardDoublings), s.op)
	}
	if e.Path == limiter.PathFailOpen {
		o.failOpen.Add(ctx, 1, s.op)
	}
	for _, name := range e.WouldRefuse {
		o.wouldRefuse.Add(ctx, 1, metric.WithAttributes(append(o.opts.attrs[:len(o.opts.attrs):len(o.opts.attrs)], AttrLimit.String(name))...))
	}
	for _, res := range e.LeftOut {
		o.leftOut.Add(ctx, 1, metric.WithAttributes(append(o.opts.attrs[:len(o.opts.attrs):len(o.opts.attrs)], AttrResource.String(res))...))
	}
}

func (o *Observer) attrSets(e limiter.Event) attrSets {
	base := append([]attribute.KeyValue{AttrOp.String(e.Op)}, o.opts.attrs...)
	if o.opts.resource {
		base = append(base, AttrResource.String(e.Resource))
	}
	outcome := append(base[:len(base):len(base)], AttrOutcome.String(e.Outcome.String()))
	call := append(outcome[:len(outcome):len(outcome)], AttrPath.String(e.Path.String()))
	return attrSets{
		call:    metric.WithAttributeSet(attribute.NewSet(call...)),
		outcome: metric.WithAttributeSet(attribute.NewSet(outcome...)),
		op:      metric.WithAttributeSet(attribute.NewSet(base...)),
	}
}
