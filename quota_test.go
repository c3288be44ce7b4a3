package limiter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/items"
)

// The quota attributes of a bucket (shard 0): what is left in its window
// (millitokens) and the window's start.
func (e *env) quota(entity, resource, name string) (left, window int64) {
	e.t.Helper()
	it := e.bucketItem(entity, resource, 0)
	left, ok1 := it.Int("q_" + name + "_tk")
	window, ok2 := it.Int("q_" + name + "_ws")
	if !ok1 || !ok2 {
		e.t.Fatalf("bucket %s/%s has no quota %s: %v", entity, resource, name, it)
	}
	return left, window
}

func stateOf(t *testing.T, states []LimitState, name string) LimitState {
	t.Helper()
	for _, s := range states {
		if s.Limit.Name == name {
			return s
		}
	}
	t.Fatalf("no state for %s in %+v", name, states)
	return LimitState{}
}

// A monthly budget in Paris beside a rate, across the month's end on the
// night Paris is on winter time: both are charged by one write, a request
// the budget cannot pay is refused until midnight in Paris and takes
// nothing from the rate, and the new month starts at the whole budget.
// A settlement after the boundary leaves the new month alone; a debt
// within the month holds the budget shut until its end.
func TestStoryAMonthlyBudgetInParisAcrossTheMonthsEnd(t *testing.T) {
	e := newEnv(t)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	novemberInParis := time.Date(2026, 11, 1, 0, 0, 0, 0, paris) // 23:00 UTC on 31 October
	e.clock.Set(novemberInParis.Add(-2 * time.Hour))
	l := e.limiter()
	usd := Limit{Name: "usd", Capacity: 1000, Window: "month", TimeZone: "Europe/Paris"}
	limits := []Limit{PerMinute("rpm", 100), usd}
	ask := func(cost int64) Request { return req("k1", limits, map[string]int64{"rpm": 1, "usd": cost}) }

	e.mustAcquire(l, ask(600)) // creates the bucket
	le := e.mustAcquire(l, ask(300))
	e.expectCost(PathSpeculative, 1, 0, 1)
	st := stateOf(t, le.Limits(), "usd")
	if st.Remaining != 100 || st.Reset != 2*time.Hour {
		t.Fatalf("usd after 900 of 1000: remaining %d, reset %v; want 100, 2h (midnight in Paris)", st.Remaining, st.Reset)
	}

	status, err := l.Status(e.ctx, "k1", "gpt-4", limits)
	if st := stateOf(t, status, "usd"); err != nil || st.Remaining != 100 || st.Reset != 2*time.Hour {
		t.Fatalf("Status: %+v, %v; want usd remaining 100, reset 2h", st, err)
	}
	rpmBefore := e.tokens("k1", "gpt-4", "rpm")
	rl := e.mustReject(l, ask(200))
	if rl.RetryAfter != 2*time.Hour || !stateOf(t, rl.Limits, "usd").Exceeded || stateOf(t, rl.Limits, "rpm").Exceeded {
		t.Fatalf("refusal: retry after %v, limits %+v; want 2h, usd exceeded, rpm not", rl.RetryAfter, rl.Limits)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != rpmBefore {
		t.Fatalf("the refused request took %d millitokens of rpm", rpmBefore-got)
	}

	e.clock.Set(novemberInParis)
	e.mustAcquire(l, ask(200))
	left, window := e.quota("k1", "gpt-4", "usd")
	if left != 800_000 || window != novemberInParis.UnixMilli() {
		t.Fatalf("November: %d left from %v, want 800000 from %v", left, time.UnixMilli(window).In(paris), novemberInParis)
	}

	// October's lease settles after its month ended: forgiven, November
	// keeps its budget.
	if err := le.Adjust(e.ctx, map[string]int64{"usd": 500}); err != nil {
		t.Fatal(err)
	}
	if left, _ := e.quota("k1", "gpt-4", "usd"); left != 800_000 {
		t.Fatalf("a settlement of October's lease took %d from November", 800_000-left)
	}

	// A November lease settles above its estimate: November is in debt
	// and refuses until December.
	nov := e.mustAcquire(l, ask(100))
	if err := nov.Adjust(e.ctx, map[string]int64{"usd": 900}); err != nil {
		t.Fatal(err)
	}
	if left, _ := e.quota("k1", "gpt-4", "usd"); left != -200_000 {
		t.Fatalf("after the settlement: %d left, want -200000 (a debt)", left)
	}
	rl = e.mustReject(l, ask(1))
	december := time.Date(2026, 12, 1, 0, 0, 0, 0, paris)
	if want := december.Sub(novemberInParis); rl.RetryAfter != want {
		t.Fatalf("in debt: retry after %v, want %v (December in Paris)", rl.RetryAfter, want)
	}
	// Rolled back, the lease returns its whole charge to November.
	if err := nov.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := e.quota("k1", "gpt-4", "usd"); left != 800_000 {
		t.Fatalf("after the rollback: %d left, want 800000", left)
	}
	// December starts at the whole budget: the debt does not carry.
	e.clock.Set(december)
	e.mustAcquire(l, ask(1000))
	if left, _ := e.quota("k1", "gpt-4", "usd"); left != 0 {
		t.Fatalf("December after 1000: %d left, want 0", left)
	}
}

// Bad quotas are refused naming the field, before anything is written.
func TestQuotaValidationNamesTheField(t *testing.T) {
	q := Limit{Name: "usd", Capacity: 10, Window: "month"}
	with := func(f func(*Limit)) Limit { l := q; f(&l); return l }
	for _, tc := range []struct {
		l     Limit
		field string
	}{
		{with(func(l *Limit) { l.TimeZone = "Mars/Olympus" }), "Limit[usd].TimeZone"},
		{with(func(l *Limit) { l.Window = "fortnight" }), "Limit[usd].Window"},
		{with(func(l *Limit) { l.Capacity = 0 }), "Limit[usd].Capacity"},
		{with(func(l *Limit) { l.Capacity = -5 }), "Limit[usd].Capacity"},
		{with(func(l *Limit) { l.Refill, l.Period = 10, time.Hour }), "Limit[usd].Refill"},
		{with(func(l *Limit) { l.Period = time.Hour }), "Limit[usd].Period"},
		{with(func(l *Limit) { l.Burst = 20 }), "Limit[usd].Burst"},
		{with(func(l *Limit) { l.MonthDay = 32 }), "Limit[usd].MonthDay"},
		{with(func(l *Limit) { l.WeekStart = time.Monday }), "Limit[usd].WeekStart"},
		{with(func(l *Limit) { l.Window = "day"; l.MonthDay = 3 }), "Limit[usd].MonthDay"},
		{PerMinute("rpm", 10).withZone("Europe/Paris"), "Limit[rpm].TimeZone"},
	} {
		err := tc.l.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%+v: %v, want an error naming %s", tc.l, err, tc.field)
		}
	}
	e := newEnv(t)
	l := e.limiter()
	_, err := l.Acquire(e.ctx, req("k1", []Limit{with(func(l *Limit) { l.TimeZone = "Mars/Olympus" })}, map[string]int64{"usd": 1}))
	if !errors.Is(err, ErrInvalid) || e.bucketItem("k1", "gpt-4", 0) != nil {
		t.Fatalf("acquire with a bad zone: %v, item %v; want ErrInvalid and nothing stored", err, e.bucketItem("k1", "gpt-4", 0))
	}
}

func (l Limit) withZone(z string) Limit { l.TimeZone = z; return l }

// The text form of a quota reads back as the same limit, and its errors
// name the part that is wrong.
func TestParseLimitReadsQuotas(t *testing.T) {
	for s, want := range map[string]Limit{
		"tokens:1000000/month":                 {Name: "tokens", Capacity: 1_000_000, Window: "month"},
		"usd:50_000_000/month:15@Europe/Paris": {Name: "usd", Capacity: 50_000_000, Window: "month", MonthDay: 15, TimeZone: "Europe/Paris"},
		"req:500/week:mon@America/New_York":    {Name: "req", Capacity: 500, Window: "week", WeekStart: time.Monday, TimeZone: "America/New_York"},
		"req:20/day@UTC":                       {Name: "req", Capacity: 20, Window: "day", TimeZone: "UTC"},
		// A shadow quota: ":shadow" after the zone, which has no ':'.
		"usd:5/month@Europe/Paris:shadow":    {Name: "usd", Capacity: 5, Window: "month", TimeZone: "Europe/Paris", Shadow: true},
		"usd:5/month:15@Europe/Paris:shadow": {Name: "usd", Capacity: 5, Window: "month", MonthDay: 15, TimeZone: "Europe/Paris", Shadow: true},
		"req:9/week:mon:shadow":              {Name: "req", Capacity: 9, Window: "week", WeekStart: time.Monday, Shadow: true},
		"req:20/day@UTC:shadow":              {Name: "req", Capacity: 20, Window: "day", TimeZone: "UTC", Shadow: true},
	} {
		got, err := ParseLimit(s)
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", s, got, err, want)
			continue
		}
		if got.String() != s && !strings.Contains(s, "_") {
			t.Errorf("ParseLimit(%q).String() = %q", s, got.String())
		}
		back, err := ParseLimit(got.String())
		if err != nil || back != got {
			t.Errorf("%q: String %q reads back as %+v, %v", s, got.String(), back, err)
		}
	}
	for s, part := range map[string]string{
		"usd:10/month@Mars/Olympus": "zone", "usd:10/month:32": "anchor", "usd:10/week:monday": "anchor",
		"usd:10/day:3@UTC": "anchor", "usd:0/month": "quota", "usd:10/month@": "zone", "wcu:10/day": "name",
	} {
		_, err := ParseLimit(s)
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, part+" of") {
			t.Errorf("ParseLimit(%q) = %v, want an error naming its %s", s, err, part)
		}
	}
}

// On a bucket of four shards each shard holds a quarter of the daily
// quota; the shards made by the doublings start the day they are made
// empty. So neither the day the bucket split nor the next one admits more
// than the quota, and the next day admits nearly all of it.
func TestShardedQuotaHoldsItsWindowAcrossShards(t *testing.T) {
	limits := []Limit{PerSecond("rps", 100_000), {Name: "req", Capacity: 400, Window: "day"}}
	e, l := shardedEnv(t, "hot", limits)
	r := Request{Entity: "hot", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1, "req": 1}}
	spend := func() (admitted int) {
		for i := 0; i < 600; i++ {
			_, err := l.Acquire(e.ctx, r)
			var rl *RateLimitedError
			switch {
			case err == nil:
				admitted++
			case !errors.As(err, &rl):
				t.Fatal(err)
			}
		}
		return admitted
	}
	if first := spend(); first > 400 {
		t.Fatalf("the day the bucket split admitted %d, above the quota of 400", first)
	}
	midnight := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	e.clock.Set(midnight)
	second := spend()
	if second > 400 || second < 390 {
		t.Fatalf("the next day admitted %d, want at most the quota of 400 and nearly all of it", second)
	}
	for s := 0; s < 4; s++ {
		it := e.bucketItem("hot", "r", s)
		left, _ := it.Int("q_req_tk")
		ws, _ := it.Int("q_req_ws")
		if ws != midnight.UnixMilli() || left < 0 || left > 100_000 {
			t.Errorf("shard %d: %d left from %v, want at most its quarter (100000) from midnight", s, left, time.UnixMilli(ws).UTC())
		}
	}
}

// A team's monthly budget above its keys' budgets: a key's acquire
// charges its own budget and the team's in one step, all or nothing. When
// the team's budget is spent a key with budget left is refused, by the
// team, and charged nothing.
func TestCascadeTeamBudgetAboveItsKeys(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	for _, ent := range []items.Entity{{ID: "team"}, {ID: "key-a", Parent: "team", Cascade: true}, {ID: "key-b", Parent: "team", Cascade: true}} {
		if err := l.putEntity(e.ctx, ent); err != nil {
			t.Fatal(err)
		}
	}
	month := func(n int64) []Limit {
		return []Limit{PerMinute("rpm", 1000), {Name: "usd", Capacity: n, Window: "month", TimeZone: "Europe/Paris"}}
	}
	if err := l.putLimits(e.ctx, scope{Entity: "team"}, month(1000)); err != nil {
		t.Fatal(err)
	}
	ask := func(key string, usd int64) Request {
		return Request{Entity: key, Resource: "gpt-4", Limits: month(600), Consume: map[string]int64{"rpm": 1, "usd": usd}}
	}
	e.mustAcquire(l, ask("key-a", 600))
	e.mustAcquire(l, ask("key-b", 300))
	before, _ := e.quota("key-b", "gpt-4", "usd")
	rl := e.mustReject(l, ask("key-b", 200)) // key-b has 300 left, the team 100
	if !rl.Parent || rl.Entity != "team" || !stateOf(t, rl.Limits, "usd").Exceeded {
		t.Fatalf("refusal %+v: want the team's budget named", rl)
	}
	if after, _ := e.quota("key-b", "gpt-4", "usd"); after != before {
		t.Fatalf("the refused request took %d from key-b's budget", before-after)
	}
	if team, _ := e.quota("team", "gpt-4", "usd"); team != 100_000 {
		t.Fatalf("the team has %d left, want 100000", team)
	}
	e.mustAcquire(l, ask("key-b", 100))
}

// A quota round-trips through JSON with its calendar fields, and a rate's
// JSON form is unchanged by them.
func TestQuotaJSONRoundTrips(t *testing.T) {
	q := Limit{Name: "usd", Capacity: 50_000_000, Window: "week", TimeZone: "Asia/Kolkata", WeekStart: time.Monday}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"name":"usd","capacity":50000000,"window":"week","time_zone":"Asia/Kolkata","week_start":1}` {
		t.Fatalf("JSON %s", b)
	}
	var back Limit
	if err := json.Unmarshal(b, &back); err != nil || back != q {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, q)
	}
	if b, _ := json.Marshal(PerMinute("rpm", 100)); string(b) != `{"name":"rpm","capacity":100,"burst":100,"refill":100,"period":"1m0s"}` {
		t.Fatalf("a rate's JSON %s", b)
	}
	// A shadow quota keeps both its calendar and its flag.
	q.Shadow = true
	b, _ = json.Marshal(q)
	if string(b) != `{"name":"usd","capacity":50000000,"window":"week","time_zone":"Asia/Kolkata","week_start":1,"shadow":true}` {
		t.Fatalf("a shadow quota's JSON %s", b)
	}
	if err := json.Unmarshal(b, &back); err != nil || back != q {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, q)
	}
}
