package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/shardlimit/limiter/internal/items"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// An override stored without a name the request consumes turned every
// acquire of the key into ErrInvalid: stored limits replaced the caller's
// whole. They now override by name; names not stored keep the caller's.
func TestRegressionOverrideLackingAConsumedName(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if err := l.putLimits(e.ctx, scope{Entity: "k1"}, rpm(5)); err != nil {
		t.Fatal(err)
	}
	caller := []Limit{PerMinute("rpm", 100), PerMinute("tpm", 1000)}
	e.mustAcquire(l, req("k1", caller, map[string]int64{"rpm": 1, "tpm": 600}))
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 4_000 {
		t.Fatalf("rpm tk = %d, want 4000: the stored 5 a minute applies", got)
	}
	if got := e.tokens("k1", "gpt-4", "tpm"); got != 400_000 {
		t.Fatalf("tpm tk = %d, want 400000: the caller's 1000 a minute applies", got)
	}
	e.mustReject(l, req("k1", caller, map[string]int64{"rpm": 1, "tpm": 600}))
}

// The four scopes combine per name, most specific first: {entity,
// resource}, {entity, ""}, {"", resource}, then the caller's (the request's,
// or the defaults). A stored name the caller lacks is added.
func TestScopesCombinePerName(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithDefaultLimits(PerMinute("rpm", 99), PerMinute("tpm", 999), PerMinute("x", 5)))
	put := func(s scope, ls ...Limit) {
		if err := l.putLimits(e.ctx, s, ls); err != nil {
			t.Fatal(err)
		}
	}
	put(scope{Entity: "k1", Resource: "gpt-4"}, PerMinute("rpm", 10))
	put(scope{Entity: "k1"}, PerMinute("tpm", 100), PerMinute("rpm", 20))
	put(scope{Resource: "gpt-4"}, PerDay("rpd", 1000), PerMinute("rpm", 30), PerMinute("tpm", 300))
	got := map[string]int64{}
	av, err := l.Status(e.ctx, "k1", "gpt-4", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range av {
		got[a.Limit.Name] = a.Remaining
	}
	want := map[string]int64{"rpm": 10, "tpm": 100, "rpd": 1000, "x": 5}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("k1 on gpt-4: %v, want %v", got, want)
	}
	av, err = l.Status(e.ctx, "k2", "gpt-4", []Limit{PerMinute("rpm", 7)})
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]int64{}
	for _, a := range av {
		got[a.Limit.Name] = a.Remaining
	}
	// The request's limits replace the defaults: x is not in force for k2.
	want = map[string]int64{"rpm": 30, "tpm": 300, "rpd": 1000}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("k2 on gpt-4: %v, want %v", got, want)
	}
	// A name only a stored scope defines can be consumed.
	e.mustAcquire(l, Request{Entity: "k2", Resource: "gpt-4", Consume: map[string]int64{"rpd": 1}})
}

// WithDefaultLimits serves requests that carry no limits; bad defaults are
// refused by New.
func TestDefaultLimits(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithDefaultLimits(PerMinute("rpm", 2)))
	r := Request{Entity: "k1", Resource: "gpt-4", Consume: one}
	e.mustAcquire(l, r)
	e.mustAcquire(l, r)
	e.mustReject(l, r)
	for name, ls := range map[string][]Limit{
		"invalid":   {PerMinute("rpm", 0)},
		"duplicate": {PerMinute("rpm", 1), PerSecond("rpm", 1)},
		"reserved":  {PerMinute("wcu", 1)},
	} {
		_, err := New(e.st, WithDefaultLimits(ls...))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field == "" {
			t.Errorf("%s defaults: %v, want a ValidationError", name, err)
		}
	}
	if _, err := New(e.st); err != nil {
		t.Fatalf("no defaults: %v", err)
	}
}

// A request without a resource uses DefaultResource: one bucket per key.
func TestDefaultResource(t *testing.T) {
	if err := checkResource("DefaultResource", DefaultResource); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	l := e.limiter(WithDefaultLimits(PerMinute("rpm", 10)))
	e.mustAcquire(l, Request{Entity: "k1", Consume: one})
	if ev := e.last(); ev.Resource != DefaultResource {
		t.Fatalf("event resource %q, want %q", ev.Resource, DefaultResource)
	}
	if e.bucketItem("k1", DefaultResource, 0) == nil {
		t.Fatal("no bucket on the default resource")
	}
	av, err := l.Status(e.ctx, "k1", "", nil)
	if err != nil || len(av) != 1 || av[0].Remaining != 9 {
		t.Fatalf("Available on the default resource: %+v, %v; want 9 rpm", av, err)
	}
	// Limits stored for the default resource apply like any others.
	if err := l.putLimits(e.ctx, scope{Resource: DefaultResource}, rpm(1)); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(l, Request{Entity: "k2", Consume: one})
	e.mustReject(l, Request{Entity: "k2", Consume: one})
}

// Consume is checked against the limits that apply once stored limits are
// known: a name nobody defines, or an amount over the burst in force, is a
// ValidationError naming the field, and nothing is written.
func TestConsumeCheckedAgainstTheLimitsThatApply(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if err := l.putLimits(e.ctx, scope{Entity: "k1"}, []Limit{PerMinute("rpm", 3), PerDay("extra", 50)}); err != nil {
		t.Fatal(err)
	}
	writes := func() uint64 {
		tot := e.st.Totals()
		return tot.Ops[memsim.OpUpdate].Requests + tot.Ops[memsim.OpPut].Requests
	}
	before := writes()
	for name, c := range map[string]struct {
		r     Request
		field string
	}{
		"undefined":           {req("k1", rpm(100), map[string]int64{"nope": 1, "rpm": 1}), "Request.Consume[nope]"},
		"over stored burst":   {req("k1", rpm(100), map[string]int64{"rpm": 4}), "Request.Consume[rpm]"},
		"first bad name":      {req("k1", rpm(100), map[string]int64{"zz": 1, "aa": 1}), "Request.Consume[aa]"},
		"nothing applies":     {req("k2", nil, one), "Request.Limits"},
		"undefined elsewhere": {req("k2", rpm(10), map[string]int64{"extra": 1}), "Request.Consume[extra]"},
	} {
		_, err := l.Acquire(e.ctx, c.r)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want a ValidationError on %s", name, err, c.field)
		}
	}
	if w := writes(); w != before+1 { // the schema item, written by the first read
		t.Fatalf("%d writes, want only the schema item's", w-before)
	}
	// Stored names the caller lacks may be consumed; the stored burst of 3
	// allows 3 where the caller's 100 would have allowed more.
	e.mustAcquire(l, req("k1", rpm(100), map[string]int64{"extra": 1, "rpm": 3}))
}

// Every configuration load read the table-wide #SCHEMA item, and every
// entity of a resource read the same resource item: a cold start of many
// processes on many entities pushed both keys past DynamoDB's 3,000 reads
// a second per partition. Now a process reads the schema once and a
// resource's item once per cache TTL, in the batch of its first entity.
// (The simulator's cold-start scenario shows the effect on availability:
// TestRegressionHotConfigurationKeys in package sim.)
func TestHotConfigurationKeysReadOncePerProcess(t *testing.T) {
	e := newEnv(t)
	reads := func(pk string) uint64 { return e.st.Partition(pk).Requests }
	schemaPK, resPK := keys.Schema().PK, keys.ResourceLimits("ns", "gpt-4").PK
	for p := 0; p < 3; p++ {
		l := e.limiter()
		for i := 0; i < 200; i++ {
			e.mustAcquire(l, req(fmt.Sprintf("key-%03d", i), rpm(10), one))
			switch {
			case i == 0 && p == 0: // one read of 5 items, the schema written, the first write, which creates the bucket (2 WCU: its GSI3 entry)
				e.expectCost(PathCreate, 3, 5, 3)
			case i == 0: // one read of 5 items (schema and resource included); the process has no history, so its first write is the full one, which fails on a bucket below its burst; then the write
				e.expectCost(PathRetry, 3, 5, 2)
			case p == 0: // one read of the entity's 3 items, the first write, which creates the bucket (and its GSI3 entry)
				e.expectCost(PathCreate, 2, 3, 2)
			default: // one read of the entity's 3 items, one write
				e.expectCost(PathSpeculative, 2, 3, 1)
			}
		}
		e.mustAcquire(l, req("key-000", rpm(10), one))
		e.expectCost(PathSpeculative, 1, 0, 1)
	}
	// Process 1 reads the schema, finds none and writes it (2 requests);
	// the others read it once each. Each reads the resource item once.
	if got := reads(schemaPK); got != 2+2 {
		t.Errorf("schema partition: %d requests, want 4", got)
	}
	if got := reads(resPK); got != 3 {
		t.Errorf("resource partition: %d requests, want 3 (one per process)", got)
	}
	// After the TTL the resource is read again, once, with the next entity.
	l := e.limiter(WithCacheTTL(time.Minute))
	e.mustAcquire(l, req("key-000", rpm(10), one))
	e.clock.Add(time.Minute)
	for i := 0; i < 10; i++ {
		e.mustAcquire(l, req(fmt.Sprintf("key-%03d", i), rpm(10), one))
	}
	if got := reads(resPK); got != 5 {
		t.Errorf("resource partition: %d requests, want 5", got)
	}
	if got := reads(schemaPK); got != 5 {
		t.Errorf("schema partition: %d requests, want 5 (once per process)", got)
	}
}

// A schema error is not remembered as checked: once the table is right
// again, the next acquire checks again and goes ahead.
func TestSchemaCheckedAgainAfterASchemaError(t *testing.T) {
	e := newEnv(t)
	k := keys.Schema()
	put := func(v int64) {
		if _, err := e.st.Put(e.ctx, store.PutInput{Item: store.Item{"PK": store.Str(k.PK), "SK": store.Str(k.SK), "version": store.Int(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	put(items.SchemaVersion + 1)
	l := e.limiter()
	if _, err := l.Acquire(e.ctx, req("k1", rpm(10), one)); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Acquire = %v, want ErrSchemaVersion", err)
	}
	if _, err := l.Acquire(e.ctx, req("k2", rpm(10), one)); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("second Acquire = %v, want ErrSchemaVersion (checked again)", err)
	}
	put(items.SchemaVersion)
	e.mustAcquire(l, req("k1", rpm(10), one))
}

// The configuration cache forgot every entry at once past 65,536 keys, so
// a large tenant population fell off its one-round-trip path all together.
// It is now an LRU: past its size only the least recently used entries go.
func TestConfigCacheEvictsLeastRecentlyUsed(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	l.meta.entities, _ = simplelru.NewLRU[configKey, entityConf](4, nil) // small, so the test can pass the bound
	for i := 0; i < 5; i++ {
		e.mustAcquire(l, req(fmt.Sprintf("k%d", i), rpm(10), one))
	}
	// k0 was evicted (least recently used); k1..k4 are still cached.
	for i := 4; i >= 1; i-- {
		e.mustAcquire(l, req(fmt.Sprintf("k%d", i), rpm(10), one))
		e.expectCost(PathSpeculative, 1, 0, 1)
	}
	e.mustAcquire(l, req("k0", rpm(10), one))
	if ev := e.last(); ev.RoundTrips != 2 {
		t.Fatalf("k0 after eviction: %d round trips, want 2 (a read, then the write)", ev.RoundTrips)
	}
}

// Concurrent callers of one limiter share cold reads and see the same
// configuration (run with -race).
func TestConcurrentColdReads(t *testing.T) {
	e := newEnv(t)
	admin := e.limiter()
	if err := admin.putLimits(e.ctx, scope{Resource: "gpt-4"}, rpm(1000)); err != nil {
		t.Fatal(err)
	}
	l := e.limiter(WithObserver(nil)) // (the env's observer, which Status calls, is not safe for concurrent use)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				av, err := l.Status(e.ctx, fmt.Sprintf("k%d", i), "gpt-4", rpm(5))
				if err == nil && (len(av) != 1 || av[0].Limit.Capacity != 1000) {
					err = fmt.Errorf("k%d: %+v, want the stored 1000", i, av)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := e.st.Partition(keys.ResourceLimits("ns", "gpt-4").PK).Requests; got > 1+8 {
		t.Errorf("resource item read %d times by 8 goroutines (one write included)", got)
	}
}

// A read that ended with its caller's cancelled context leaves nothing
// behind: the next caller reads afresh.
func TestCancelledReadIsNotCached(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := l.Acquire(cancelled, req("k1", rpm(10), one)); err == nil {
		t.Fatal("Acquire on a cancelled context succeeded")
	}
	e.mustAcquire(l, req("k1", rpm(10), one))
}

// blockingStore holds BatchGet calls whose context is cancellable until
// that context ends.
type blockingStore struct {
	store.Store
	entered chan struct{}
}

func (b blockingStore) BatchGet(ctx context.Context, in store.BatchGetInput) (store.BatchGetOutput, error) {
	if ctx.Done() != nil {
		b.entered <- struct{}{}
		<-ctx.Done()
		return store.BatchGetOutput{}, &store.UnavailableError{Op: "BatchGet", Err: ctx.Err()}
	}
	return b.Store.BatchGet(ctx, in)
}

// A caller waiting for another caller's read, which ends with that
// caller's cancelled context, reads again instead of failing.
func TestWaiterOutlivesACancelledLeader(t *testing.T) {
	e := newEnv(t)
	bs := blockingStore{Store: e.st, entered: make(chan struct{})}
	l, err := New(bs, WithNamespace("ns"), WithClock(e.clock))
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	ctx, cancel := context.WithCancel(e.ctx)
	leader := make(chan error)
	go func() {
		_, err := l.Status(ctx, "k1", "gpt-4", rpm(10))
		leader <- err
	}()
	<-bs.entered // the leader's read is under way
	var once sync.Once
	l.meta.onRead = func() { once.Do(func() { close(waiting) }) } // (ordered after the leader's read of it by entered)
	waiter := make(chan error)
	go func() {
		_, err := l.Status(e.ctx, "k1", "gpt-4", rpm(10))
		waiter <- err
	}()
	<-waiting // the second caller joins the leader's read
	cancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v, want its context's error", err)
	}
	if err := <-waiter; err != nil {
		t.Fatalf("waiter: %v, want a fresh read", err)
	}
}

// A caller adds a limit to a key that has a bucket already, and charges
// nothing of it (a daily cap the request does not count against yet).
// The bucket takes the new limit full; every acquire of the key then
// failed with "missing attribute" (the new limit's total consumed was
// never written), from every process, until the bucket expired.
func TestRegressionALimitAddedAndChargedNothing(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	before := []Limit{PerMinute("rpm", 100), PerMinute("tpm", 1000)}
	e.mustAcquire(l, req("k1", before, map[string]int64{"rpm": 1, "tpm": 10}))
	after := append(before[:2:2], PerDay("daily", 50))
	e.mustAcquire(l, req("k1", after, map[string]int64{"rpm": 1, "tpm": 10}))
	e.mustAcquire(e.limiter(), req("k1", after, map[string]int64{"rpm": 1, "tpm": 10}))
	if got := e.tokens("k1", "gpt-4", "daily"); got != 50_000 {
		t.Fatalf("daily tk = %d, want 50000: the new limit starts full", got)
	}
	e.mustAcquire(l, req("k1", after, map[string]int64{"rpm": 1, "daily": 1}))
}

// shortStore answers a BatchGet with one item fewer than it was asked for.
type shortStore struct{ store.Store }

func (s shortStore) BatchGet(ctx context.Context, in store.BatchGetInput) (store.BatchGetOutput, error) {
	out, err := s.Store.BatchGet(ctx, in)
	if len(out.Items) > 0 {
		out.Items = out.Items[:len(out.Items)-1]
	}
	return out, err
}

// A store that answers a configuration read with fewer items than keys
// (a broken backend) gets an error naming the counts, not a panic, and
// nothing is cached.
func TestConfigurationReadOfTooFewItems(t *testing.T) {
	e := newEnv(t)
	l, err := New(shortStore{e.st}, WithNamespace("ns"), WithClock(e.clock))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.Acquire(e.ctx, req("k1", rpm(10), one)); err == nil || !strings.Contains(err.Error(), "items for") {
			t.Fatalf("Acquire = %v, want the short answer's error", err)
		}
	}
}

// Limits change while buckets live: a lowered limit caps the tokens at the
// next write, a new limit appears full, a removed one is REMOVEd, and the
// consumption counter of a limit that stays is kept.
func TestLimitChangesReachExistingBuckets(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", []Limit{PerMinute("rpm", 100), PerMinute("old", 5)}, map[string]int64{"rpm": 2, "old": 1}))
	e.mustAcquire(l, req("k1", []Limit{PerMinute("rpm", 10), PerMinute("tpm", 1000)}, map[string]int64{"rpm": 1, "tpm": 7}))
	it := e.bucketItem("k1", "gpt-4", 0)
	if tk, _ := it.Int("b_rpm_tk"); tk != 9_000 {
		t.Fatalf("rpm tk = %d, want 9000: capped at the new burst of 10, minus 1", tk)
	}
	if tc, _ := it.Int("b_rpm_tc"); tc != 3_000 {
		t.Fatalf("rpm tc = %d, want 3000 (kept across the change)", tc)
	}
	if tk, _ := it.Int("b_tpm_tk"); tk != 993_000 {
		t.Fatalf("tpm tk = %d, want 993000 (new, full, minus 7)", tk)
	}
	for name := range it {
		if len(name) > 6 && name[:6] == "b_old_" {
			t.Fatalf("removed limit left %s behind", name)
		}
	}
	// The next acquire with the same limits is back on the hot path.
	e.mustAcquire(l, req("k1", []Limit{PerMinute("rpm", 10), PerMinute("tpm", 1000)}, map[string]int64{"rpm": 1}))
	e.expectCost(PathSpeculative, 1, 0, 1)
}

// A table written by a newer layout is refused before anything is written.
func TestUnknownSchemaVersionStopsTheLimiter(t *testing.T) {
	e := newEnv(t)
	k := keys.Schema()
	if _, err := e.st.Put(e.ctx, store.PutInput{Item: store.Item{"PK": store.Str(k.PK), "SK": store.Str(k.SK), "version": store.Int(2)}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.limiter().Acquire(e.ctx, req("k1", rpm(10), one))
	if !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Acquire = %v, want ErrSchemaVersion", err)
	}
	if e.bucketItem("k1", "gpt-4", 0) != nil {
		t.Fatal("a bucket was written despite the unknown schema")
	}
}

// New values under the same limit names (rpm 100 → 10) reach a bucket at
// its next write, the hot path's included: the consumption-only write is
// conditional on the limits hash, so on a bucket written for other values
// it fails and the write that follows rewrites the limits. Without that
// condition the bucket would go on serving the 99 tokens it held under the
// old limit.
func TestChangedLimitValuesReachTheHotPath(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithLocalRefusals(false))
	e.mustAcquire(l, req("k1", rpm(100), one)) // 99 left, below the burst: the hot path's case
	admitted := 0
	for i := 0; i < 30; i++ {
		if _, err := l.Acquire(e.ctx, req("k1", rpm(10), one)); err == nil {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("%d admitted under a limit of 10 a minute (the bucket held 99 under the old limit of 100)", admitted)
	}
	if bx, _ := e.bucketItem("k1", "gpt-4", 0).Int("b_rpm_bx"); bx != 10_000 {
		t.Fatalf("stored burst %d, want 10000: the new limit was never written", bx)
	}
}
