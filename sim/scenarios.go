package sim

import (
	"fmt"
	"time"

	"github.com/shardlimit/limiter"
)

// Scenario is a named workload.
type Scenario struct {
	// Name is what Config.Scenario and cmd/simulate -scenario select it by.
	Name string
	// Summary describes the workload in one line, for listings.
	Summary string
	// Build returns the scenario's workload; cfg's overrides (writers,
	// rate, duration, faults, skew) are applied to it afterwards.
	Build func(cfg Config) *Workload
	// Actors, when set, returns the extra processes the scenario runs
	// (used when Config.Actors is empty), so the CLI can run it as is.
	Actors func(cfg Config) []Actor
}

// DefaultScenario is what an empty Config.Scenario runs.
const DefaultScenario = "steady"

var registry = []Scenario{
	{Name: "steady", Summary: "many API keys (Zipf-popular) on two models, rpm+tpm limits, LLM-style token adjust after the call (default)", Build: steady},
	{Name: "contention", Summary: "128+ writers on one bucket, demand well above its limit", Build: contention},
	{Name: "cascade", Summary: "API keys under projects, every acquire also charges the project (cascade on)", Build: cascade},
	{Name: "all-models", Summary: "API keys on three models, every acquire also charging the key's \"all-models\" bucket (Request.Also), whose stored limits are below the three models' together; an operator changes the resources' modes under load (all-models admitted, one key's model admitted, another key's all-models refused, a model in shadow), each resource of an acquire seeing a change at its own time", Build: allModels},
	{Name: "skew", Summary: "client clocks up to ±1 s apart on a few busy buckets", Build: skewed},
	{Name: "faults", Summary: "three 20 s phases 2 h apart under throttle storms, 5xx before/after apply, lost answers, conflicts, latency spikes, skew, cancelled callers, failed cascade compensations, and items expiring in between; then a fault-free tail", Build: faulty},
	{Name: "hot-entity", Summary: "one entity and resource at 10,000 req/s with limits far above: only the 1000 WCU/s partition ceiling binds, so shards double", Build: hotEntity},
	{Name: "idle-year", Summary: "one bucket at 10 req/s for a simulated year (one busy minute a day, idle in between): must never double", Build: idleYear},
	{Name: "cold-start", Summary: "200 processes start together with empty caches on 1,000 keys of one resource at 10 req/s each: configuration reads must not pile onto shared keys (schema, resource limits)", Build: coldStart},
	{Name: "new-entities", Summary: "about 2,000 keys a second seen for the first time on one resource: each creates a bucket and its GSI3 entry", Build: newEntities},
	{Name: "reservations", Summary: "16 processes with reservations on one key at 10,000 req/s, demand uneven across them, processes crashing holding reservations", Build: reservationsWorkload},
	{Name: "saturated", Summary: "32 processes offer twice a 200/s limit over a store that answers in 30 ms: the race for every refilled token", Build: saturated},
	{Name: "expiry", Summary: "bursts that shard two keys and their cascade parent, then idle periods longer than the TTL in which shards expire one by one in no order, then traffic again; with the faults scenario's fault plan", Build: expiry},
	{Name: "rollout", Summary: "an operator changes limits and modes under load: a new limit tried in shadow, then enforced on one model; a key refused then restored, another admitted without writes for a while, a whole model admitted then enforced again; every acquire must follow its scope's mode (within the 5 s cache TTL), shadow limits refuse nothing and are charged only when they have the tokens, disabled scopes write nothing", Build: rollout},
	{Name: "aggregator", Summary: "hot-entity for 10 s (128 writers, 10,000 req/s) with the aggregator actor consuming the change stream (duplicates included); usage totals checked against the stream",
		Build: aggregatorWorkload, Actors: func(Config) []Actor { return []Actor{NewAggregatorActor()} }},
	{Name: "leases-crash", Summary: "20 keys, each with a rate and at most 5 requests in flight (a concurrency cap, TTL 20 s), offered about 8 in flight each; every writer process crashes about once a minute holding its leases, which are never committed: live leases never above the cap, and a dead holder's slot back within TTL + TTL/4", Build: leasesCrash},
	{Name: "quota-month", Summary: "10 keys with a rate, a monthly money budget and a daily request quota in Havana, across the night of 1 November 2026: the month and the day end at midnight, and an hour later the clocks go back to midnight again (the day lasts 25 hours); busy 30 s in every five minutes", Build: quotaMonth},
}

// Scenarios returns the registered scenarios in display order.
func Scenarios() []Scenario { return append([]Scenario(nil), registry...) }

// Lookup returns the scenario called name ("" is the default).
func Lookup(name string) (Scenario, bool) {
	if name == "" {
		name = DefaultScenario
	}
	for _, s := range registry {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

func keysEntities(n int, prefix string) []Entity {
	es := make([]Entity, n)
	for i := range es {
		es[i] = Entity{ID: fmt.Sprintf("%s-%04d", prefix, i)}
	}
	return es
}

// projectTree returns projects parents (IDs from idFormat, with their own
// limits and no traffic of their own), each with keys children that
// cascade to it, named "{project}.key-NN".
func projectTree(projects, keys int, idFormat string, limits ...limiter.Limit) []Entity {
	var es []Entity
	for p := 0; p < projects; p++ {
		pid := fmt.Sprintf(idFormat, p)
		es = append(es, Entity{ID: pid, NoTraffic: true, Limits: limits})
		for k := 0; k < keys; k++ {
			es = append(es, Entity{ID: fmt.Sprintf("%s.key-%02d", pid, k), Parent: pid, Cascade: true})
		}
	}
	return es
}

func llmConsume() []Range {
	return []Range{{Min: 1, Max: 1}, {Min: 100, Max: 1500, Adjust: true}}
}

func steady(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 160), limiter.PerMinute("tpm", 100_000)},
		Entities: keysEntities(200, "key"), Resources: []string{"gpt-4o", "claude-3.5"},
		Zipf: 1.1, ZipfV: 50,
		Consume: llmConsume(), AdjustProb: 0.8, AdjustSpread: 0.4, RollbackProb: 0.03,
		CallTime: Latency{Median: 800 * time.Millisecond, P99: 5 * time.Second}, RetryProb: 0.5,
		Writers: 100, Rate: 1000, Duration: 30 * time.Second,
		Probe: true, LimitRate: 200 * 2 * 160 / 60.0,
	}
}

func contention(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 300), limiter.PerMinute("tpm", 12_000_000)},
		Entities: []Entity{{ID: "tenant-1"}}, Resources: []string{"gpt-4o"},
		Consume: []Range{{Min: 1, Max: 1}, {Min: 50, Max: 500, Adjust: true}}, AdjustProb: 0.5, AdjustSpread: 0.3, RollbackProb: 0.05,
		CallTime: Latency{Median: 300 * time.Millisecond, P99: 2 * time.Second}, RetryProb: 0.5,
		Writers: 128, Rate: 400, Duration: 60 * time.Second,
		Probe: true, LimitRate: 300,
	}
}

// allModels: 100 keys on three models, every acquire also charging the
// key's "all-models" bucket, and an operator changing the modes of the
// resources under load, each taking hold within the 5 s cache TTL, on
// each resource of an acquire at its own time: all-models admitted (left
// out of the charges, the models alone charged) from 8 s to 18 s, one
// key's gpt-4o admitted from 12 s to 22 s, another key's all-models
// refused (every acquire of that key refused) from 14 s to 24 s, and
// claude-3.5 in shadow mode from 16 s to 26 s (its limits shadow, tpm
// adjusted after the call, also on leases whose acquire skipped it).
func allModels(Config) *Workload {
	return &Workload{
		CacheTTL: 5 * time.Second,
		ScopeChanges: []ScopeChange{
			{At: 8 * time.Second, Resource: "all-models", Mode: "admit"},
			{At: 12 * time.Second, Entity: "key-0001", Resource: "gpt-4o", Mode: "admit"},
			{At: 14 * time.Second, Entity: "key-0002", Resource: "all-models", Mode: "refuse"},
			{At: 16 * time.Second, Resource: "claude-3.5", Mode: "shadow"},
			{At: 18 * time.Second, Resource: "all-models"},
			{At: 22 * time.Second, Entity: "key-0001", Resource: "gpt-4o"},
			{At: 24 * time.Second, Entity: "key-0002", Resource: "all-models"},
			{At: 26 * time.Second, Resource: "claude-3.5"},
		},
		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 60), limiter.PerMinute("tpm", 60_000)},
		Entities: keysEntities(100, "key"), Resources: []string{"gpt-4o", "claude-3.5", "gemini-2"},
		Also: []string{"all-models"}, AlsoLimits: []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 100_000)},
		Zipf: 1.1, ZipfV: 20,
		Consume: llmConsume(), AdjustProb: 0.8, AdjustSpread: 0.4, RollbackProb: 0.03,
		CallTime: Latency{Median: 800 * time.Millisecond, P99: 5 * time.Second}, RetryProb: 0.5,
		Writers: 100, Rate: 400, Duration: 30 * time.Second,
		Probe: true, LimitRate: 100 * 100 / 60.0,
	}
}

func cascade(Config) *Workload {
	const projects = 8
	es := projectTree(projects, 40, "project-%02d", limiter.PerMinute("rpm", 3000), limiter.PerMinute("tpm", 1_500_000))
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 120), limiter.PerMinute("tpm", 100_000)},
		Entities: es, Resources: []string{"gpt-4o", "claude-3.5"},
		Consume: llmConsume(), AdjustProb: 0.7, AdjustSpread: 0.4, RollbackProb: 0.05,
		CallTime: Latency{Median: 800 * time.Millisecond, P99: 5 * time.Second}, RetryProb: 0.5,
		Writers: 160, Rate: 1600, Duration: 60 * time.Second,
		Probe: true, LimitRate: projects * 2 * 3000 / 60.0,
	}
}

func skewed(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 1200), limiter.PerMinute("tpm", 1_000_000)},
		Entities: keysEntities(40, "key"), Resources: []string{"gpt-4o"},
		Consume: llmConsume(), AdjustProb: 0.6, AdjustSpread: 0.4, RollbackProb: 0.05,
		CallTime: Latency{Median: 500 * time.Millisecond, P99: 3 * time.Second}, RetryProb: 0.5,
		Writers: 128, Rate: 1000, Duration: 60 * time.Second,
		Skew:  time.Second,
		Probe: true, LimitRate: 40 * 1200 / 60.0,
	}
}

// faulty: the default fault plan over three 20 s phases of traffic, 2 h
// apart: in between, the buckets (TTL about an hour after they are full
// again) expire and are deleted in no particular order, some before the
// next phase and some after it starts.
func faulty(Config) *Workload {
	es := projectTree(4, 20, "project-%d", limiter.PerMinute("rpm", 2400), limiter.PerMinute("tpm", 1_000_000))
	es = append(es, keysEntities(80, "key")...)
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 240), limiter.PerMinute("tpm", 150_000)},
		Entities: es, Resources: []string{"gpt-4o", "claude-3.5"},
		Consume: llmConsume(), AdjustProb: 0.7, AdjustSpread: 0.4, RollbackProb: 0.05,
		CallTime: Latency{Median: 800 * time.Millisecond, P99: 5 * time.Second}, RetryProb: 0.5,
		Writers: 160, Rate: 1200, Duration: 2*2*time.Hour + 20*time.Second,
		DutyPeriod: 2 * time.Hour, DutyOn: 20 * time.Second,
		Probe: true, WarmUp: 15 * time.Second,
		Skew:   250 * time.Millisecond,
		Faults: true,
	}
}

// expiry: two keys under one project (cascade), 3,000 acquires a second
// for 6 s every 2 h: each burst shards the keys' buckets and the
// project's (partitions at their 1000 write units a second), the
// project's 2,400 a second refuses some (compensations); then the buckets
// sit idle past their TTL (an hour after they are full again), and the
// time to live deletes their shards one by one, in no order, within 2 h:
// when the next burst comes, some shards of a bucket are gone and others
// live, shard 0 among the gone ones as often as not. Processes crash now
// and then (a new one knows nothing of the shards). The faults scenario's
// fault plan runs throughout.
func expiry(Config) *Workload {
	fp := DefaultFaults()
	fp.ExpiryDelay = 2 * time.Hour
	es := []Entity{{ID: "org", NoTraffic: true, Limits: []limiter.Limit{limiter.PerSecond("rps", 2400)}},
		{ID: "org.key-a", Parent: "org", Cascade: true}, {ID: "org.key-b", Parent: "org", Cascade: true}}
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 2000)},
		Entities: es, Resources: []string{"gpt-4o"},
		Consume:   []Range{{Min: 1, Max: 1}},
		RetryProb: 0.5,
		Writers:   64, Rate: 3000, Duration: 4*2*time.Hour + 6*time.Second,
		DutyPeriod: 2 * time.Hour, DutyOn: 6 * time.Second,
		CrashEvery: time.Hour, CrashDowntime: time.Second,
		Faults: true, FaultPlan: &fp,
		Probe: true, LimitRate: 2400, WarmUp: 3 * time.Second,
	}
}

func hotEntity(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 1_000_000)},
		Entities: []Entity{{ID: "hot-tenant"}}, Resources: []string{"gpt-4o"},
		Consume: []Range{{Min: 1, Max: 1}},
		Writers: 128, Rate: 10_000, Duration: 120 * time.Second,
		LimitRate: 0,
	}
}

// quotaMonth crosses a month's end in a zone whose clocks go back an hour
// later, to midnight again: Havana, 1 November 2026. Midnight comes at
// 04:00 UTC (the month and the day end) and again at 05:00 UTC (no window
// ends: the day lasts 25 hours). The run starts at 03:59:45 UTC and is
// busy the first 30 s of every five minutes, so both midnights fall in a
// busy stretch. Each key spends its budgets a few busy minutes into the new
// windows; every acquire after that is refused and must take nothing.
func quotaMonth(Config) *Workload {
	return &Workload{
		Limits: []limiter.Limit{limiter.PerMinute("rpm", 600),
			{Name: "usd", Capacity: 60_000, Window: "month", TimeZone: "America/Havana"},
			{Name: "req", Capacity: 1_000, Window: "day", TimeZone: "America/Havana"}},
		Entities: keysEntities(10, "key"), Resources: []string{"gpt-4o"},
		Consume:    []Range{{Min: 1, Max: 1}, {Min: 50, Max: 150, Adjust: true}, {Min: 1, Max: 1}},
		AdjustProb: 0.7, AdjustSpread: 0.4, RollbackProb: 0.05,
		CallTime: Latency{Median: 800 * time.Millisecond, P99: 5 * time.Second}, RetryProb: 0.5,
		Writers: 16, Rate: 40, Duration: 62 * time.Minute,
		DutyPeriod: 5 * time.Minute, DutyOn: 30 * time.Second,
		Start:  time.Date(2026, 11, 1, 3, 59, 45, 0, time.UTC),
		WarmUp: time.Minute,
	}
}

// leasesCrash: 20 keys at 4 acquires a second each, each lease held for
// a call of about 2 s (p99 10 s, below the cap's TTL of 20 s): about 8 in
// flight per key, above the cap of 5, so the cap refuses. Each of the 16
// writer processes crashes about once a minute, down for a second, and
// its leases in flight die with it (their slots are counted until the TTL
// and a quarter pass, without any write of theirs).
func leasesCrash(Config) *Workload {
	return &Workload{
		Limits: []limiter.Limit{limiter.PerMinute("rpm", 600),
			{Name: "inflight", Capacity: 5, Window: "concurrent", TTL: 20 * time.Second}},
		Entities: keysEntities(20, "key"), Resources: []string{"gpt-4o"},
		Consume:    []Range{{Min: 1, Max: 1}, {Min: 1, Max: 1}},
		HoldLeases: true, RollbackProb: 0.1,
		CallTime: Latency{Median: 2 * time.Second, P99: 10 * time.Second}, RetryProb: 0,
		Writers: 16, Rate: 80, Duration: 5 * time.Minute,
		CrashEvery: time.Minute, CrashDowntime: time.Second,
		WarmUp: 30 * time.Second,
	}
}

func idleYear(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 20), limiter.PerDay("rpd", 2_000_000)},
		Entities: []Entity{{ID: "quiet-tenant"}}, Resources: []string{"gpt-4o"},
		Consume: []Range{{Min: 1, Max: 1}, {Min: 1, Max: 1}},
		Writers: 2, Rate: 10, Duration: 365 * 24 * time.Hour,
		DutyPeriod: 24 * time.Hour, DutyOn: time.Minute,
		LimitRate: 20, WarmUp: 24 * time.Hour,
	}
}

// coldStart: every writer is a process with its own caches, and all start
// within 100 ms on 1,000 keys of one resource, none cached. Each key's
// first acquire in each process reads its configuration, about 10,000
// reads a second for the first seconds; what those reads share (the
// table's schema item, the resource's stored limits) must not be read by
// each of them: one key serves 3,000 reads a second. The limits (100 a
// second per key, 10 offered) never refuse.
func coldStart(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 100)},
		Entities: keysEntities(1000, "key"), Resources: []string{"gpt-4o"},
		Consume: []Range{{Min: 1, Max: 1}},
		Writers: 200, Rate: 10_000, Duration: 5 * time.Second,
		StartSpread: 100 * time.Millisecond,
		LimitRate:   100_000, WarmUp: time.Second,
	}
}

// newEntities: 100,000 keys picked uniformly at 2,000 a second, so most
// acquires meet a key never seen before (about 1,800 new buckets a second
// over 20 s), as after a quiet hour in which every bucket expired. Each new
// bucket writes its item and its GSI3 entry, whose partition key is the
// entity: creations must neither throttle nor cost more than 2 WCU.
func newEntities(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 60)},
		Entities: keysEntities(100_000, "key"), Resources: []string{"gpt-4o"},
		Consume: []Range{{Min: 1, Max: 1}},
		Writers: 64, Rate: 2000, Duration: 20 * time.Second,
		WarmUp: time.Second,
	}
}

// reservationsWorkload: 16 processes share one key at 10,000 acquires a
// second, the busiest offering several times what the quietest does; a
// process crashes every 20 s on average (its reservation stranded), and a
// new one takes over a second later. The limit (15,000/s) is above the
// load, so every refusal is a false one.
func reservationsWorkload(Config) *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 15_000)},
		Entities: []Entity{{ID: "tenant"}}, Resources: []string{"gpt-4o"},
		Consume: []Range{{Min: 1, Max: 1}},
		Writers: 16, Rate: 10_000, Duration: 60 * time.Second,
		Uneven:       0.7,
		Reservations: true,
		CrashEvery:   20 * time.Second,
		LimitRate:    15_000,
	}
}

// saturated: 32 processes offer 400 acquires a second against a 200/s
// limit, over a store whose every call takes 30 ms: at the limit, every
// refilled token is raced for by several processes whose last view of the
// bucket is at least a round trip old.
func saturated(cfg Config) *Workload {
	lm := FixedLatency(30 * time.Millisecond)
	return &Workload{
		Latency: &lm, Limits: []limiter.Limit{limiter.PerSecond("rps", 200)},
		Entities: []Entity{{ID: "tenant"}}, Resources: []string{"gpt-4o"},
		Consume: []Range{{Min: 1, Max: 1}},
		Writers: 32, Rate: 400, Duration: 60 * time.Second,
		LimitRate: 200,
	}
}

// rollout: 40 keys on two models at twice their limits, and an operator
// changing modes and limits on live traffic (limiterctl mode set, or a
// manifest). A new limit, rpm-new (60 a minute, half of rpm), is tried in
// shadow from the start (the requests carry it as shadow), and enforced on
// claude-3.5 at 30 s (stored for the resource without the flag). Meanwhile
// key-0000 is refused from 10 s to 40 s (a revoked key restored),
// key-0001 admitted without writes from 15 s to 45 s (an internal caller
// let through), and every key on gpt-4o admitted from 25 s to 35 s (an
// incident's bypass of one model). The limiters cache configuration for
// 5 s, so each change takes hold within 5 s.
func rollout(Config) *Workload {
	shadow := limiter.PerMinute("rpm-new", 60)
	shadow.Shadow = true
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 120), limiter.PerMinute("tpm", 100_000), shadow},
		Entities: keysEntities(40, "key"), Resources: []string{"gpt-4o", "claude-3.5"},
		Consume: append(llmConsume(), Range{Min: 1, Max: 1}), AdjustProb: 0.7, AdjustSpread: 0.4, RollbackProb: 0.05,
		CallTime: Latency{Median: 800 * time.Millisecond, P99: 5 * time.Second}, RetryProb: 0.5,
		Writers: 64, Rate: 320, Duration: 60 * time.Second, CacheTTL: 5 * time.Second,
		ScopeChanges: []ScopeChange{
			{At: 10 * time.Second, Entity: "key-0000", Mode: "refuse"},
			{At: 15 * time.Second, Entity: "key-0001", Mode: "admit"},
			{At: 25 * time.Second, Resource: "gpt-4o", Mode: "admit"},
			{At: 30 * time.Second, Resource: "claude-3.5", Limits: []limiter.Limit{limiter.PerMinute("rpm-new", 60)}},
			{At: 35 * time.Second, Resource: "gpt-4o"},
			{At: 40 * time.Second, Entity: "key-0000"},
			{At: 45 * time.Second, Entity: "key-0001"},
		},
		Probe: true, LimitRate: 40 * 2 * 120 / 60.0,
	}
}
