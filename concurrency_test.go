package limiter

import (
	"errors"
	"github.com/shardlimit/limiter/internal/items"
	"testing"
	"time"
)

// live returns a cap's live count as the bucket's shard stores it.
func (e *env) live(entity, resource, name string, shard int) int64 {
	e.t.Helper()
	v, ok := e.bucketItem(entity, resource, shard).Int("c_" + name + "_lv")
	if !ok {
		e.t.Fatalf("bucket %s/%s shard %d has no cap %s", entity, resource, shard, name)
	}
	return v
}

var inflight = Limit{Name: "inflight", Capacity: 2, Window: "concurrent", TTL: time.Minute}

// Two requests in flight per key beside a rate: the acquire takes its slot
// in the same write as the rate (one write), a third acquire is refused
// and takes nothing from the rate, Commit gives a slot back with one write
// (keeping the rate's charge), and Rollback gives back both.
func TestStoryTwoRequestsInFlightPerKey(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerMinute("rpm", 100), inflight}
	ask := req("k1", limits, map[string]int64{"rpm": 1, "inflight": 1})

	a := e.mustAcquire(l, ask)
	b := e.mustAcquire(l, ask)
	e.expectCost(PathSpeculative, 1, 0, 1)
	if st := stateOf(t, b.Limits(), "inflight"); st.Remaining != 0 {
		t.Fatalf("inflight after two acquires: %+v; want 0 remaining", st)
	}
	rpmBefore := e.tokens("k1", "gpt-4", "rpm")
	rl := e.mustReject(l, ask)
	if !stateOf(t, rl.Limits, "inflight").Exceeded || stateOf(t, rl.Limits, "rpm").Exceeded {
		t.Fatalf("refusal's limits %+v; want inflight exceeded, rpm not", rl.Limits)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != rpmBefore {
		t.Fatalf("the refused acquire took %d millitokens of rpm", rpmBefore-got)
	}
	if lv := e.live("k1", "gpt-4", "inflight", 0); lv != 2 {
		t.Fatalf("live %d after a refusal; want 2", lv)
	}

	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if ev := e.last(); ev.Op != "commit" || ev.WriteUnits != 1 {
		t.Fatalf("commit: %+v; want one write", ev)
	}
	if lv := e.live("k1", "gpt-4", "inflight", 0); lv != 1 {
		t.Fatalf("live %d after a commit; want 1", lv)
	}
	rpmAfterCommit := e.tokens("k1", "gpt-4", "rpm")
	if rpmAfterCommit != rpmBefore {
		t.Fatalf("commit changed rpm by %d millitokens; it keeps the charge", rpmAfterCommit-rpmBefore)
	}
	c := e.mustAcquire(l, ask)
	if err := c.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if lv := e.live("k1", "gpt-4", "inflight", 0); lv != 1 {
		t.Fatalf("live %d after a rollback; want 1", lv)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != rpmAfterCommit {
		t.Fatalf("rollback left rpm at %d; want %d (its charge back)", got, rpmAfterCommit)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if lv := e.live("k1", "gpt-4", "inflight", 0); lv != 0 {
		t.Fatalf("live %d with no lease; want 0", lv)
	}
}

// A holder that dies keeps its slot at most TTL + TTL/4: the slots of dead
// holders come back without any write of theirs, the next acquire retires
// them in its own single write, and a Commit after the slot left the ring
// makes no write at all.
func TestStoryADeadHoldersSlotComesBackAfterItsTTL(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerMinute("rpm", 100), inflight}
	ask := req("k1", limits, map[string]int64{"rpm": 1, "inflight": 1})
	late := e.mustAcquire(l, ask)
	e.mustAcquire(l, ask) // its holder dies
	e.clock.Add(inflight.TTL - time.Millisecond)
	e.mustReject(l, ask) // within the TTL: both still count
	e.clock.Add(inflight.TTL/4 + 2*time.Millisecond)
	e.mustAcquire(l, ask)
	if ev := e.last(); ev.WriteUnits != 1 {
		t.Fatalf("the acquire that retires the dead slots: %+v; want one write", ev)
	}
	if lv := e.live("k1", "gpt-4", "inflight", 0); lv != 1 {
		t.Fatalf("live %d after the dead slots were retired; want 1", lv)
	}
	n := len(e.events)
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	if ev := e.events[len(e.events)-1]; len(e.events) != n+1 || ev.WriteUnits != 0 {
		t.Fatalf("commit of a lease past its TTL: %+v; want no write", ev)
	}
	if lv := e.live("k1", "gpt-4", "inflight", 0); lv != 1 {
		t.Fatalf("live %d; the late commit must not give back another lease's slot", lv)
	}
}

// A cap is written as text and in JSON and comes back the same; bad caps
// are refused naming the field.
func TestCapTextJSONAndValidation(t *testing.T) {
	l, err := ParseLimit("inflight:10/concurrent:5m")
	if err != nil || l != (Limit{Name: "inflight", Capacity: 10, Window: "concurrent", TTL: 5 * time.Minute}) {
		t.Fatalf("ParseLimit: %+v, %v", l, err)
	}
	if back, err := ParseLimit(l.String()); err != nil || back != l {
		t.Fatalf("ParseLimit(%q) = %+v, %v", l.String(), back, err)
	}
	b, _ := l.MarshalJSON()
	var j Limit
	if err := j.UnmarshalJSON(b); err != nil || j != l {
		t.Fatalf("JSON %s: %+v, %v", b, j, err)
	}
	for _, c := range []struct {
		l     Limit
		field string
	}{
		{Limit{Name: "x", Capacity: 0, Window: "concurrent", TTL: time.Minute}, "Limit[x].Capacity"},
		{Limit{Name: "x", Capacity: 1, Window: "concurrent"}, "Limit[x].TTL"},
		{Limit{Name: "x", Capacity: 1, Window: "concurrent", TTL: time.Millisecond}, "Limit[x].TTL"},
		{Limit{Name: "x", Capacity: 1, Window: "concurrent", TTL: time.Minute, Refill: 1}, "Limit[x].Refill"},
		{Limit{Name: "x", Capacity: 1, Window: "concurrent", TTL: time.Minute, Period: time.Second}, "Limit[x].Period"},
		{Limit{Name: "x", Capacity: 1, Window: "concurrent", TTL: time.Minute, TimeZone: "UTC"}, "Limit[x].TimeZone"},
		{PerMinute("x", 1).withTTL(time.Minute), "Limit[x].TTL"},
	} {
		var ve *ValidationError
		if err := c.l.Validate(); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%+v: %v; want a ValidationError on %s", c.l, err, c.field)
		}
	}
	if _, err := ParseLimit("inflight:10/concurrent"); err == nil {
		t.Error("a cap without a TTL parsed")
	}
}

func (l Limit) withTTL(d time.Duration) Limit { l.TTL = d; return l }

// A team's cap above its keys' caps: two keys of 3 slots each under a team
// of 4. The team's cap refuses a key with free slots once the team's are
// taken, and the refusal takes nothing from the key (its slot is given
// back by the cascade's undo). A key's commit frees a slot of both.
func TestStoryATeamCapAboveItsKeysCaps(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	for _, en := range []items.Entity{{ID: "team"}, {ID: "k1", Parent: "team", Cascade: true}, {ID: "k2", Parent: "team", Cascade: true}} {
		if err := l.putEntity(e.ctx, en); err != nil {
			t.Fatal(err)
		}
	}
	team := Limit{Name: "inflight", Capacity: 4, Window: "concurrent", TTL: time.Minute}
	if err := l.putLimits(e.ctx, scope{Entity: "team"}, []Limit{PerMinute("rpm", 100), team}); err != nil {
		t.Fatal(err)
	}
	keyCap := Limit{Name: "inflight", Capacity: 3, Window: "concurrent", TTL: time.Minute}
	ask := func(key string) Request {
		return req(key, []Limit{PerMinute("rpm", 100), keyCap}, map[string]int64{"rpm": 1, "inflight": 1})
	}
	var held []*Lease
	for _, k := range []string{"k1", "k1", "k1", "k2"} {
		held = append(held, e.mustAcquire(l, ask(k)))
	}
	e.mustReject(l, ask("k1")) // k1's own cap
	rl := e.mustReject(l, ask("k2"))
	if !rl.Parent {
		t.Fatalf("k2 with 2 free slots refused by %+v; want the team's cap", rl)
	}
	if lv := e.live("k2", "gpt-4", "inflight", 0); lv != 1 {
		t.Fatalf("k2 counts %d slots after the team refused it; want 1", lv)
	}
	if err := held[0].Commit(); err != nil {
		t.Fatal(err)
	}
	if k1, tm := e.live("k1", "gpt-4", "inflight", 0), e.live("team", "gpt-4", "inflight", 0); k1 != 2 || tm != 3 {
		t.Fatalf("after a commit: k1 %d, team %d; want 2 and 3", k1, tm)
	}
	e.mustAcquire(l, ask("k2"))
}

// Status and a lease's Limits report a cap's free slots, and a shadow cap
// that would refuse admits without taking a slot.
func TestStoryStatusAndAShadowCap(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerMinute("rpm", 100), inflight}
	ask := req("k1", limits, map[string]int64{"rpm": 1, "inflight": 1})
	le := e.mustAcquire(l, ask)
	if st := stateOf(t, le.Limits(), "inflight"); st.Remaining != 1 || st.Reset <= 0 {
		t.Fatalf("lease's inflight %+v; want 1 free and a reset", st)
	}
	status, err := l.Status(e.ctx, "k1", "gpt-4", limits)
	if st := stateOf(t, status, "inflight"); err != nil || st.Remaining != 1 {
		t.Fatalf("Status: %+v, %v; want 1 free", st, err)
	}
	shadow := inflight
	shadow.Shadow = true
	ask.Limits = []Limit{PerMinute("rpm", 100), shadow}
	e.mustAcquire(l, ask)
	e.mustAcquire(l, ask) // the cap is full: admitted, in shadow
	if lv := e.live("k1", "gpt-4", "inflight", 0); lv != 2 {
		t.Fatalf("live %d; a shadow cap that would refuse takes no slot", lv)
	}
}
