package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// bucketLimit returns the limit named name of the model's bucket of
// (entity, resource).
func bucketLimit(t *testing.T, m *model, entity, resource, name string) (limiter.Limit, bool) {
	t.Helper()
	for _, b := range m.Buckets {
		if b.Entity == entity && b.Resource == resource {
			i := slices.IndexFunc(b.Limits, func(l limiter.Limit) bool { return l.Name == name })
			if i < 0 {
				return limiter.Limit{}, false
			}
			return b.Limits[i], true
		}
	}
	t.Fatalf("no bucket %s/%s in the model", entity, resource)
	return limiter.Limit{}, false
}

// gatewayStoringRPMOnly is a gateway whose "all-models" stores a wide rpm
// and no tpm: the limiter charges and enforces the request's tpm there
// (stored limits override the caller's by name, and a name they lack keeps
// the caller's). Each model is offered about 150 tokens a second: its own
// tpm (a burst of 6,000, 100 a second back) lasts the 40 s; all-models,
// offered both, empties after about 30 s.
func gatewayStoringRPMOnly() *Workload {
	return &Workload{
		Limits:    []limiter.Limit{limiter.PerMinute("rpm", 600), limiter.PerMinute("tpm", 6000)},
		Consume:   []Range{{Min: 1, Max: 1}, {Min: 100, Max: 200}},
		Entities:  []Entity{{ID: "key"}},
		Resources: []string{"gpt-4o", "claude-3.5"},
		Also:      []string{"all-models"}, AlsoLimits: []limiter.Limit{limiter.PerMinute("rpm", 10_000)},
		Writers: 4, Rate: 2, Duration: 40 * time.Second,
	}
}

// The simulator modelled an "all-models" bucket whose AlsoLimits lack a
// limit the request charges as having only AlsoLimits, so the checkers
// judged another bucket than the limiter's: the request's tpm, which the
// limiter charges and enforces there, was unknown to them, and every
// acquire of this gateway was flagged (invariant 5, the tpm counter
// changing without the rpm's). The model now combines the scopes per name
// as the limiter does.
func TestStoryAlsoLimitsWithoutALimitTheRequestCharges(t *testing.T) {
	s, err := New(Config{Workload: gatewayStoringRPMOnly(), Seed: 1})
	if err != nil {
		t.Fatalf("valid for the limiter, refused by the simulator: %v", err)
	}
	tpm, ok := bucketLimit(t, s.model, "key", "all-models", "tpm")
	if !ok || tpm.Capacity != 6000 {
		t.Errorf("all-models tpm in the model: %+v (present %v), want the request's 6000/min", tpm, ok)
	}
	if rpm, _ := bucketLimit(t, s.model, "key", "all-models", "rpm"); rpm.Capacity != 10_000 {
		t.Errorf("all-models rpm in the model: %d, want the stored 10000", rpm.Capacity)
	}
	if testing.Short() {
		return
	}
	rep := s.Run()
	requireOK(t, rep)
	if rep.Rejected == 0 {
		t.Errorf("no acquire refused: all-models' tpm never bound (admitted %d of %d)", rep.Admitted, rep.Acquires)
	}
}

// The all-models scenario's AlsoLimits name every limit its requests
// charge: it validates, and its all-models buckets run with the stored
// numbers.
func TestStoryAllModelsScenarioAlsoLimits(t *testing.T) {
	s, err := New(Config{Scenario: "all-models", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"rpm": 100, "tpm": 100_000} {
		if l, ok := bucketLimit(t, s.model, "key-0000", "all-models", name); !ok || l.Capacity != want {
			t.Errorf("all-models %s: %+v (present %v), want capacity %d", name, l, ok, want)
		}
	}
}
