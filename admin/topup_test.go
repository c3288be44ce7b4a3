package admin

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

var big = []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 100_000)}

// shardedBucket makes key-1's gpt-4 bucket 4 shards, every one written.
func (e *env) shardedBucket(l *both) keys.Bucket {
	e.t.Helper()
	ref := keys.Bucket{Namespace: "ns", Entity: "key-1", Resource: "gpt-4"}
	e.mustAcquire(l, req("key-1", big, one))
	for _, from := range []int64{1, 2} {
		if _, err := e.st.Update(e.ctx, keys.DoubleShards(ref, from, keys.LimitsOf(e.bucketItem("key-1", "gpt-4", 0)))); err != nil {
			e.t.Fatal(err)
		}
	}
	l.ForgetBucket("key-1", "gpt-4")
	for range 200 {
		e.clock.Add(time.Second) // new shards start empty
		e.mustAcquire(l, req("key-1", big, one))
		if e.bucketItem("key-1", "gpt-4", 1) != nil && e.bucketItem("key-1", "gpt-4", 2) != nil && e.bucketItem("key-1", "gpt-4", 3) != nil {
			return ref
		}
	}
	e.t.Fatal("200 acquires did not write every shard")
	return ref
}

// tokens returns the stored tokens of a limit on every shard of key-1's
// gpt-4 bucket, in millitokens.
func (e *env) tokens(limit string) []int64 {
	var tk []int64
	for s := range 4 {
		n, _ := e.bucketItem("key-1", "gpt-4", s).Int(bucket.AttrName(limit, bucket.FieldTokens))
		tk = append(tk, n)
	}
	return tk
}

func available(t *testing.T, l *both, name string) int64 {
	t.Helper()
	st, err := l.Status(t.Context(), "key-1", "gpt-4", big)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Limit.Name == name {
			return s.Remaining
		}
	}
	t.Fatalf("no limit %s in the status", name)
	return 0
}

// A top-up ADDs each shard its share once, is audited, shows in Status,
// and stops at the burst.
func TestTopUpGrantsEachShardItsShare(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.shardedBucket(l)
	e.mustAcquire(l, req("key-1", big, map[string]int64{"rpm": 100, "tpm": 20_000}))
	rpmBefore, tpmBefore := e.tokens("rpm"), e.tokens("tpm")
	availBefore := available(t, l, "rpm")

	rec, err := l.TopUp(ContextWithPrincipal(e.ctx, "alice"), "key-1", "gpt-4", map[string]int64{"rpm": 40})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Action != AuditTopUp || rec.Principal != "alice" || rec.After.Shards != 4 || rec.After.Tokens["rpm"] != 40 ||
		len(rec.Pending) != 0 || len(rec.Missed) != 0 {
		t.Fatalf("TopUp record: %+v", rec)
	}
	for s, tk := range e.tokens("rpm") {
		if tk-rpmBefore[s] != 10_000 {
			t.Errorf("shard %d: rpm tokens %d -> %d, want 10 tokens more", s, rpmBefore[s], tk)
		}
	}
	if d := cmp.Diff(tpmBefore, e.tokens("tpm")); d != "" {
		t.Errorf("tpm, not granted, changed:\n%s", d)
	}
	if got := available(t, l, "rpm"); got != availBefore+40 {
		t.Errorf("Status: rpm available %d after a top-up of 40 from %d", got, availBefore)
	}
	recs, err := l.Audit(e.ctx, AuditQuery{Entity: "key-1", Resource: "gpt-4"})
	if err != nil || len(recs) != 1 || !cmp.Equal(recs[0], rec, cmpopts.EquateEmpty()) {
		t.Fatalf("Audit = %+v, %v; want the top-up %+v", recs, err, rec)
	}

	// At the burst: a bucket holds no more than its burst.
	if _, err := l.TopUp(e.ctx, "key-1", "gpt-4", map[string]int64{"rpm": 1_000_000}); err != nil {
		t.Fatal(err)
	}
	if got := available(t, l, "rpm"); got != 1000 {
		t.Errorf("Status: rpm available %d after a top-up beyond the burst, want the burst 1000", got)
	}
	// The guards were reset: the next acquires take from the bucket as it
	// now is, and the burst is all they get.
	admitted := int64(0)
	for range 400 {
		if _, err := l.Acquire(e.ctx, req("key-1", big, map[string]int64{"rpm": 4})); err == nil {
			admitted += 4
		} else if !errors.Is(err, limiter.ErrRateLimited) {
			t.Fatal(err)
		}
	}
	if admitted > 1000 || admitted < 900 {
		t.Errorf("%d admitted from a bucket topped up to its burst of 1000", admitted)
	}
}

// A top-up interrupted between shards (its answer lost after the write
// applied, then a write that never applied) is finished by ResumeTopUps,
// and no shard gets its share twice however often it is resumed; until
// then, a new top-up of the bucket is refused.
func TestTopUpInterruptedResumesWithoutDoubleGrant(t *testing.T) {
	var faults []memsim.Fault // the next transactions' faults, in order
	inj := memsim.OnOps([]memsim.OpKind{memsim.OpTransactWrite}, memsim.Func("script", func(memsim.Op) memsim.Decision {
		if len(faults) == 0 {
			return memsim.Decision{}
		}
		f := faults[0]
		faults = faults[1:]
		return memsim.Decision{Fault: f}
	}))
	e := newEnv(t, memsim.WithFaults(inj))
	l := e.limiter()
	e.shardedBucket(l)
	before := e.tokens("tpm")
	grant := map[string]int64{"tpm": 400}

	faults = []memsim.Fault{memsim.FaultNone, memsim.FaultLostResponse} // shard 1 applies, its answer is lost
	rec, err := l.TopUp(e.ctx, "key-1", "gpt-4", grant)
	if !store.OutcomeUnknown(err) || !strings.Contains(err.Error(), "ResumeTopUps") || !cmp.Equal(rec.Pending, []int{1, 2, 3}) {
		t.Fatalf("interrupted TopUp = %+v, %v; want shards 1-3 pending and an unknown outcome", rec, err)
	}
	w := writes(e)
	if _, err := l.TopUp(e.ctx, "key-1", "gpt-4", grant); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("TopUp with one unfinished: %v, want a refusal", err)
	}
	if writes(e) != w {
		t.Fatal("the refused TopUp wrote")
	}

	// Shard 1's write applied with its mark: the record has 2 and 3 pending.
	faults = []memsim.Fault{memsim.FaultNone, memsim.Fault5xxBeforeApply} // shard 2 granted, shard 3 fails
	done, err := l.ResumeTopUps(e.ctx, "key-1", "gpt-4")
	if err == nil || len(done) != 1 || !cmp.Equal(done[0].Pending, []int{3}) {
		t.Fatalf("interrupted ResumeTopUps = %+v, %v; want shard 3 pending", done, err)
	}
	for range 2 {
		done, err = l.ResumeTopUps(e.ctx, "key-1", "gpt-4")
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(done) != 0 {
		t.Fatalf("ResumeTopUps with nothing left = %+v", done)
	}
	for s, tk := range e.tokens("tpm") {
		if tk-before[s] != 100_000 {
			t.Errorf("shard %d: tpm tokens %d -> %d, want 100 tokens more, once", s, before[s], tk)
		}
	}
	recs, err := l.Audit(e.ctx, AuditQuery{Entity: "key-1"})
	if err != nil || len(recs) != 1 || len(recs[0].Pending) != 0 || len(recs[0].Missed) != 0 {
		t.Fatalf("Audit after the resume = %+v, %v", recs, err)
	}

	// A shard deleted before its share is granted is missed, and said so.
	faults = []memsim.Fault{memsim.FaultNone, memsim.Fault5xxBeforeApply}
	if rec, err := l.TopUp(e.ctx, "key-1", "gpt-4", grant); !cmp.Equal(rec.Pending, []int{1, 2, 3}) {
		t.Fatalf("TopUp with a failing shard = %+v, %v; want shards 1-3 pending", rec, err)
	}
	if _, err := e.st.Delete(e.ctx, store.DeleteInput{Key: keys.Bucket{Namespace: "ns", Entity: "key-1", Resource: "gpt-4", Shard: 1}.Key()}); err != nil {
		t.Fatal(err)
	}
	done, err = l.ResumeTopUps(e.ctx, "key-1", "gpt-4")
	if err != nil || len(done) != 1 || !cmp.Equal(done[0].Missed, []int{1}) || len(done[0].Pending) != 0 {
		t.Fatalf("ResumeTopUps over a deleted shard = %+v, %v; want shard 1 missed", done, err)
	}
}

func writes(e *env) uint64 {
	var n uint64
	for k, o := range e.st.Totals().Ops {
		if memsim.OpKind(k).IsWrite() {
			n += o.Requests
		}
	}
	return n
}

// Bad input gets an error naming the field, and nothing is written.
func TestTopUpBadInput(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("key-1", rpm(10), one))
	before, w := e.st.Items(), writes(e)
	seventeen := map[string]int64{}
	for i := range 17 {
		seventeen["l"+strconv.Itoa(i)] = 1
	}
	for _, c := range []struct {
		entity, resource string
		tokens           map[string]int64
		field, rule      string
	}{
		{"key-1", "gpt-4", map[string]int64{"rpm": 0}, "tokens[rpm]", "between 1 and"},
		{"key-1", "gpt-4", map[string]int64{"rpm": -5}, "tokens[rpm]", "between 1 and"},
		{"key-1", "gpt-4", map[string]int64{"rpm": limiter.MaxTokens + 1}, "tokens[rpm]", "between 1 and 1000000000000 tokens"},
		{"key-1", "gpt-4", map[string]int64{"r#m": 1}, "tokens[r#m]", "limit name"},
		{"key-1", "gpt-4", map[string]int64{"wcu": 1}, "tokens[wcu]", "limit name"},
		{"key-1", "gpt-4", map[string]int64{}, "tokens", "name 1 to 16"},
		{"key-1", "gpt-4", nil, "tokens", "name 1 to 16"},
		{"key-1", "gpt-4", seventeen, "tokens", "17 limits"},
		{"key-1", "gpt-4", map[string]int64{"rpm": 1, "tpm": 1}, "tokens[tpm]", `holds no limit "tpm" (it holds rpm)`},
		{"key-1", "gpt-5", map[string]int64{"rpm": 1}, "resource", "no bucket"},
		{"key#1", "gpt-4", map[string]int64{"rpm": 1}, "entity", "must match"},
		{"key-1", "", map[string]int64{"rpm": 1}, "resource", "must match"},
	} {
		_, err := l.TopUp(e.ctx, c.entity, c.resource, c.tokens)
		if !isField(err, c.field) || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("TopUp(%q, %q, %v) = %v; want a validation error on %s saying %q", c.entity, c.resource, c.tokens, err, c.field, c.rule)
		}
	}
	if _, err := l.ResumeTopUps(e.ctx, "key#1", "gpt-4"); !isField(err, "entity") {
		t.Errorf("ResumeTopUps of a bad entity: %v", err)
	}
	var nilAdmin *Admin
	if _, err := nilAdmin.TopUp(e.ctx, "key-1", "gpt-4", map[string]int64{"rpm": 1}); !isField(err, "Admin") {
		t.Errorf("TopUp on a nil Admin: %v", err)
	}
	if _, err := nilAdmin.ResumeTopUps(e.ctx, "key-1", "gpt-4"); !isField(err, "Admin") {
		t.Errorf("ResumeTopUps on a nil Admin: %v", err)
	}
	if writes(e) != w {
		t.Errorf("bad input wrote %d requests", writes(e)-w)
	}
	if d := cmp.Diff(before, e.st.Items()); d != "" {
		t.Fatalf("bad input changed the table (-before +after):\n%s", d)
	}
	if done, err := l.ResumeTopUps(e.ctx, "key-1", "gpt-4"); err != nil || len(done) != 0 {
		t.Fatalf("ResumeTopUps with no top-up = %+v, %v", done, err)
	}
	if recs, err := l.Audit(e.ctx, AuditQuery{Entity: "key-1"}); err != nil || len(recs) != 0 {
		t.Fatalf("audit records after bad input: %+v, %v", recs, err)
	}
}
