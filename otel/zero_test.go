package limiterotel_test

import (
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/shardlimit/limiter"
	limiterotel "github.com/shardlimit/limiter/otel"
)

// A nil meter provider is an error naming it; a nil option is skipped; a
// nil or zero Observer observes nothing; empty and zero events and
// attributes are measured: no panic.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	var nilObs *limiterotel.Observer
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	calls := []struct {
		Name string
		Fn   func() error
		Want string // "" only no panic, "ok" no error, else the error names it
	}{
		{"New(nil)", func() error { _, err := limiterotel.New(nil); return err }, "MeterProvider"},
		{"New nil option", func() error { _, err := limiterotel.New(mp, nil); return err }, "ok"},
		{"WithAttributes()", func() error { _, err := limiterotel.New(mp, limiterotel.WithAttributes()); return err }, "ok"},
		{"WithAttributes empty key", func() error {
			o, err := limiterotel.New(mp, limiterotel.WithAttributes(attribute.KeyValue{}), limiterotel.WithResource())
			if err == nil {
				o.Observe(limiter.Event{})
			}
			return err
		}, "ok"},
		{"nil Observer.Observe", func() error { nilObs.Observe(limiter.Event{Op: "acquire"}); return nil }, ""},
		{"zero Observer.Observe", func() error { (&limiterotel.Observer{}).Observe(limiter.Event{Op: "acquire"}); return nil }, ""},
		{"Observe zero and nonsense events", func() error {
			o, err := limiterotel.New(mp)
			if err != nil {
				return err
			}
			o.Observe(limiter.Event{})
			o.Observe(limiter.Event{Outcome: 255, Path: 255, RoundTrips: -1, ReadUnits: -1, WriteUnits: 1e308, Duration: -1,
				WouldRefuse: []string{""}, LeftOut: []string{""}})
			return nil
		}, "ok"},
	}
	zerotest.Run(t, calls)
}
