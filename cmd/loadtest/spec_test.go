package main

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

func TestParseLimits(t *testing.T) {
	// The syntax and its meaning are limiter.ParseLimit's, as in
	// limiterctl: rpm:200/min is 200 a minute, the burst is at least the
	// rate, and the period is never implied.
	ls, err := parseLimits("limits", "rps:100000/s, rpm:200/m,tpm:10000/10s:20000,x:5/min")
	if err != nil {
		t.Fatal(err)
	}
	want := []limiter.Limit{
		limiter.PerSecond("rps", 100000),
		limiter.PerMinute("rpm", 200),
		{Name: "tpm", Capacity: 10000, Burst: 20000, Refill: 10000, Period: 10 * time.Second},
		limiter.PerMinute("x", 5),
	}
	if !reflect.DeepEqual(ls, want) {
		t.Errorf("got %+v\nwant %+v", ls, want)
	}
	if got := formatLimits(ls); got != "rps:100000/s,rpm:200/min,tpm:10000/10s:20000,x:5/min" {
		t.Errorf("formatted %q", got)
	}
	for bad, msg := range map[string]string{
		"":             "-limits: no limit given: limiter: invalid limit \"\": must be name:rate/period[:burst]",
		"rps":          `-limits: limiter: invalid limit "rps": must be name:rate/period[:burst]`,
		"rpm:100":      `-limits: limiter: invalid period of limit "rpm:100": is missing`,
		"rps:x/s":      `invalid rate of limit "rps:x/s"`,
		"rps:10/s:0":   `invalid burst of limit "rps:10/s:0": "0" must be a whole number`,
		"rps:10/s:5":   `invalid burst of limit "rps:10/s:5": 5 must be at least the rate (10)`,
		"rps:10/0s":    `invalid period of limit "rps:10/0s": 0s must be between 1ms and 366 days`,
		"rps:10/1.5ms": "must be a whole number of milliseconds",
		"wcu:10/s":     "reserved",
		"1x:10/s":      `invalid name of limit "1x:10/s"`,
		"a:1:2:3":      `invalid limit "a:1:2:3"`,
		"a:1/s,a:2/s":  `-limits: limit "a" given twice`,
	} {
		if _, err := parseLimits("limits", bad); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an error containing %q", bad, err, msg)
		}
	}
}

func TestParseConsume(t *testing.T) {
	ls, _ := parseLimits("limits", "rpm:100/min,tpm:1000/min")
	for in, want := range map[string]map[string]int64{
		"":             {"rpm": 1, "tpm": 1},
		"3":            {"rpm": 3, "tpm": 3},
		"tpm:500":      {"tpm": 500},
		"rpm:1,tpm:50": {"rpm": 1, "tpm": 50},
	} {
		got, err := parseConsume(in, ls)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0", "-1", "rpm:0", "other:1", "rpm"} {
		if _, err := parseConsume(bad, ls); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestJudge replays a bucket of 2 tokens a second (burst 2) by hand.
func TestJudge(t *testing.T) {
	ls, _ := parseLimits("limits", "rps:2/s")
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	atts := []attempt{
		{start: ms(0), end: ms(100), outcome: outAdmitted},
		{start: ms(100), end: ms(200), outcome: outAdmitted}, // the bucket holds 0.2 tokens after it
		{start: ms(300), end: ms(310), outcome: outRefused},  // 0.4 tokens at its start: a true refusal
		{start: ms(750), end: ms(760), outcome: outRefused},  // 1.3 tokens: false
		{start: ms(700), end: ms(800), outcome: outAdmitted}, // ends after the refusal above started: not counted for it
		{start: ms(810), end: ms(820), outcome: outRefused},  // 0.42 tokens after that admission: true
		{start: ms(820), end: ms(830), outcome: outUnavailable},
	}
	// The 1.3 tokens at 750 ms held the request, but the admission at
	// 800 ms used them: held, not false.
	if f, h, _ := judge(atts, 1, ls, ls, map[string]int64{"rps": 1}, false, nil); f != 0 || h != 1 {
		t.Errorf("%d false refusals, %d held, want 0 and 1", f, h)
	}
	// With cascade, a parent of 1 token a second that the first two
	// admissions emptied makes the refusal at 750 ms a true one.
	parent := []limiter.Limit{{Name: "rps", Capacity: 2, Burst: 2, Refill: 1, Period: time.Second}}
	if f, h, _ := judge(atts, 1, ls, parent, map[string]int64{"rps": 1}, true, nil); f != 0 || h != 0 {
		t.Errorf("cascade: %d false refusals, %d held, want 0", f, h)
	}
	// Two entities have two buckets: a refusal of the other one, whose
	// bucket no admission touched, is false: its tokens stayed unused.
	atts = append(atts, attempt{start: ms(310), end: ms(311), key: 1, outcome: outRefused})
	if f, h, _ := judge(atts, 2, ls, ls, map[string]int64{"rps": 1}, false, nil); f != 1 || h != 2 {
		t.Errorf("two entities: %d false refusals, %d held, want 1 and 2", f, h)
	}
	// Without the admission at 800 ms, the tokens at 750 ms stay unused
	// until the run ends: false. So are the ones at 810 ms (1.42 tokens),
	// but both saw the same 1.42 at the end: one false refusal, not two.
	atts = slices.DeleteFunc(slices.Clone(atts[:7]), func(a attempt) bool { return a.start == ms(700) })
	if f, h, _ := judge(atts, 1, ls, ls, map[string]int64{"rps": 1}, false, nil); f != 1 || h != 2 {
		t.Errorf("unused: %d false refusals, %d held, want 1 and 2", f, h)
	}
	// An admission after the last refusal used the token it saw: not
	// false.
	last := []attempt{
		{start: ms(0), end: ms(1), outcome: outRefused},
		{start: ms(0), end: ms(2), outcome: outAdmitted},
	}
	two, _ := parseLimits("limits", "rps:1/s:1")
	if f, h, _ := judge(last, 1, two, two, map[string]int64{"rps": 1}, false, nil); f != 0 || h != 1 {
		t.Errorf("used after: %d false refusals, %d held, want 0 and 1", f, h)
	}
	// A bucket that fills up spills what a refusal left: false, for each
	// time it filled.
	full := []attempt{
		{start: ms(0), end: ms(1), outcome: outRefused},
		{start: ms(5000), end: ms(5001), outcome: outRefused},
	}
	if f, h, _ := judge(full, 1, ls, ls, map[string]int64{"rps": 1}, false, nil); f != 2 || h != 2 {
		t.Errorf("full: %d false refusals, %d held, want 2 and 2", f, h)
	}
	// A hot key's split refuses falsely while the new shards fill and the
	// processes learn the count; the report counts those apart from the
	// rest. A doubling of the key ended at 4.5 s: the false refusal at
	// 5 s is the split's, the one at 0 s is not; a doubling of another
	// key says nothing of this one.
	if f, _, split := judge(full, 2, ls, ls, map[string]int64{"rps": 1}, false, [][]int64{{ms(4500)}, {ms(0)}}); f != 2 || split != 1 {
		t.Errorf("split: %d false refusals, %d the split's, want 2 and 1", f, split)
	}
}

func TestMeteredCountsAndDelays(t *testing.T) {
	ctx := context.Background()
	m := newMetered(memsim.New(memsim.WithClock(wallClock{})), 4*time.Millisecond)
	m.on.Store(true)
	key := store.Key{PK: "p", SK: "s"}
	add := storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})
	t0 := time.Now()
	if _, err := m.Update(ctx, store.UpdateInput{Key: key, Expr: add}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < 4*time.Millisecond {
		t.Errorf("a call took %v with 4ms of latency", took)
	}
	failing := storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Name("n").GreaterThan(store.Int(5)))
	if _, err := m.Update(ctx, store.UpdateInput{Key: key, Expr: failing}); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("error %v", err)
	}
	res := m.WriteConcurrently(ctx, []store.Write{{Update: &store.UpdateInput{Key: key, Expr: add}},
		{Put: &store.PutInput{Item: store.Item{"PK": store.Str("q"), "SK": store.Str("s")}}}})
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	m.on.Store(false)
	if _, err := m.Get(ctx, store.GetInput{Key: key}); err != nil { // not counted
		t.Fatal(err)
	}
	got := m.stats()
	want := []opStats{{Op: "Put", Calls: 1, WCU: 1}, {Op: "Update", Calls: 3, ConditionFailed: 1, WCU: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stats %+v\nwant %+v", got, want)
	}
}
