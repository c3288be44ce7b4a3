package sim

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// runStore runs cfg and returns the report and the simulated table.
func runStore(t *testing.T, cfg Config) (*Report, *memsim.Store) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep := s.Run()
	requireOK(t, rep)
	return rep, s.st.(*memsim.Store)
}

// unavailableShare returns the unavailable share of the attempts made in
// the first d of a run.
func unavailableShare(rep *Report, d time.Duration) (unavailable, attempts uint64) {
	for _, s := range rep.Timeline {
		if s.TMs < d.Milliseconds() {
			unavailable += s.Unavailable
			attempts += s.Attempts
		}
	}
	return unavailable, attempts
}

// Every configuration read also read the table's #SCHEMA item (strongly
// consistent) and the resource's stored limits, keys every process and
// every entity share: 200 processes starting cold on 1,000 keys read each
// of them about 10,000 times a second, and 58 % of the acquires of the
// cold-start scenario's first 5 s were unavailable (a partition serves
// 3,000 reads a second). A process now checks the schema once and reads a
// resource's limits once per cache TTL. Target: under 0.1 %.
func TestRegressionHotConfigurationKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	rep, st := runStore(t, Config{Scenario: "cold-start", Seed: 1})
	u, n := unavailableShare(rep, 5*time.Second)
	if n == 0 || float64(u) > 0.001*float64(n) {
		t.Errorf("first 5 s: %d of %d attempts unavailable, want under 0.1 %%", u, n)
	}
	writers := uint64(rep.Writers)
	ns := "sim"
	for name, pk := range map[string]string{"schema": keys.Schema().PK, "resource limits": keys.ResourceLimits(ns, "gpt-4o").PK} {
		p := st.Partition(pk)
		if p.Throttles != 0 || p.Requests > 2*writers {
			t.Errorf("%s partition: %d requests, %d throttled; want at most 2 per process, none throttled", name, p.Requests, p.Throttles)
		}
	}
}

// Every new bucket wrote its resource's single GSI2 key, so one resource
// could gain only about 1,000 buckets a second before the index partition
// throttled the writes that create them: 32 % of the new-entities
// scenario's acquires (about 1,800 new buckets a second) were unavailable.
// Bucket shards now enter only GSI3, whose partition key is the entity:
// new buckets of many entities land on as many index partitions, and a
// creation costs 2 WCU (the item and its GSI3 entry), not 3.
func TestRegressionOneIndexKeyPerResource(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	rep, st := runStore(t, Config{Scenario: "new-entities", Seed: 1, Duration: 10 * time.Second, Tail: -1})
	if float64(rep.Unavailable) > 0.001*float64(rep.Acquires) {
		t.Errorf("%d of %d acquires unavailable, want under 0.1 %%", rep.Unavailable, rep.Acquires)
	}
	var entries, most float64
	for _, p := range st.Partitions() {
		switch p.Index {
		case store.IndexGSI2:
			t.Errorf("GSI2 partition %s got %d requests: bucket items carry no GSI2 keys", p.PK, p.Requests)
		case store.IndexGSI3:
			if p.Throttles != 0 {
				t.Errorf("GSI3 partition %s throttled %d writes", p.PK, p.Throttles)
			}
			entries += p.Consumed.IndexWriteUnits
			most = max(most, p.Consumed.IndexWriteUnits)
		}
	}
	// About 1,500 buckets a second over 10 s, each one GSI3 entry.
	if entries < 10_000 || most > 10 {
		t.Errorf("GSI3 entries %.0f, the busiest partition %.0f: want many entities, each a few", entries, most)
	}
}
