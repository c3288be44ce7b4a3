package limiterotel_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/shardlimit/limiter"
	limiterotel "github.com/shardlimit/limiter/otel"
	"github.com/shardlimit/limiter/store/memsim"
)

// A limiter's metrics on a Prometheus /metrics endpoint, through the
// OpenTelemetry Prometheus exporter.
func Example_prometheus() {
	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		panic(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())
	obs, err := limiterotel.New(provider)
	if err != nil {
		panic(err)
	}
	lim, err := limiter.New(memsim.New(), limiter.WithObserver(obs)) // dynamo.New(...) in production
	if err != nil {
		panic(err)
	}
	req := limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: []limiter.Limit{limiter.PerMinute("rpm", 2)},
		Consume: map[string]int64{"rpm": 1}}
	for range 3 {
		_, _ = lim.Acquire(context.Background(), req)
	}

	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// go http.ListenAndServe(":9464", nil)

	// What a scrape would show, without the histogram's buckets (and
	// without the values of the capacity counters, which depend on the
	// write paths taken):
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			switch {
			case f.GetName() != "limiter_calls_total" && m.GetCounter() != nil:
				lines = append(lines, f.GetName()+"{"+strings.Join(labels, ",")+"} ...")
			case m.GetCounter() != nil:
				lines = append(lines, fmt.Sprintf("%s{%s} %g", f.GetName(), strings.Join(labels, ","), m.GetCounter().GetValue()))
			case m.GetHistogram() != nil:
				lines = append(lines, fmt.Sprintf("%s_count{%s} %d", f.GetName(), strings.Join(labels, ","), m.GetHistogram().GetSampleCount()))
			}
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// limiter_call_duration_seconds_count{limiter_op=acquire,limiter_outcome=admitted} 2
	// limiter_call_duration_seconds_count{limiter_op=acquire,limiter_outcome=rejected} 1
	// limiter_calls_total{limiter_op=acquire,limiter_outcome=admitted,limiter_path=create} 1
	// limiter_calls_total{limiter_op=acquire,limiter_outcome=admitted,limiter_path=speculative} 1
	// limiter_calls_total{limiter_op=acquire,limiter_outcome=rejected,limiter_path=local} 1
	// limiter_store_read_units_total{limiter_op=acquire} ...
	// limiter_store_round_trips_total{limiter_op=acquire} ...
	// limiter_store_write_units_total{limiter_op=acquire} ...
}
