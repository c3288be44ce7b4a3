package engine

import (
	"github.com/shardlimit/limiter/internal/keys"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// The decisions one by one, at their edges: each is a pure function of a
// plan, a view and now. The charge machine's tests (charge_test.go) show
// them at work; these pin the thresholds the comments and
// docs/write-paths.md state.

func TestBusyness(t *testing.T) {
	for _, c := range []struct {
		name         string
		rate         float64
		rateAt, now  int64
		want         busyness
		ceilingToday bool
	}{
		{"never measured", 5, 0, 100, busyNo, false},
		{"at 90 %", hotRate, T, T, busyCeiling, true},
		{"at 85 %", nearRate, T, T, busyNear, false},
		{"just below 85 %", nearRate - 0.001, T, T, busyNo, false},
		{"just below 90 %", hotRate - 0.001, T, T, busyNear, false},
		{"an estimate estimateAge old", 1, T, T + estimateAge, busyCeiling, true},
		{"an estimate older than that", 1, T, T + estimateAge + 1, busyNo, false},
	} {
		v := ShardView{Rate: c.rate, RateAt: c.rateAt}
		if got := v.busyness(c.now); got != c.want || v.hot(c.now) != c.ceilingToday {
			t.Errorf("%s: busyness %d (hot %v), want %d", c.name, got, v.hot(c.now), c.want)
		}
	}
}

// othersSince predicts the other writers' writes since the image, at
// their rate: none without an image, or before it.
func TestOthersSince(t *testing.T) {
	im := image(t, shape{rf: T}.item(plan1(bucketRef)))
	for _, c := range []struct {
		v    ShardView
		now  int64
		want float64
	}{
		{ShardView{Others: 0.5, At: T}, T + 10, 0},
		{ShardView{Img: im, Others: 0.5, At: T}, T, 0},
		{ShardView{Img: im, Others: 0.5, At: T}, T - 10, 0},
		{ShardView{Img: im, Others: 0.5, At: T}, T + 10, 5},
	} {
		if got := c.v.othersSince(c.now); got != c.want {
			t.Errorf("%+v at T%+d: %v, want %v", c.v, c.now-T, got, c.want)
		}
	}
}

// What the other writers drain from a limit counts while the estimate is
// at most drainAge older than the image, never above 1 - 1/minAccrual of
// the shard's refill; with this process's writes in flight it is what
// the image has likely lost by now. A limit at 90 % of its refill drained
// by others is at its limit.
func TestDrainAndAtLimit(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 1})
	rps := &p.specs[0] // 10 millitokens a ms, 5 at 2 shards
	v := ShardView{At: T, RateAt: T - drainAge, Drain: map[string]float64{"rps": 6}}
	if d := v.drain(rps, 1); d != 6 {
		t.Fatalf("drain %v, want 6", d)
	}
	if d := v.drain(rps, 2); d != 5*(1-1.0/minAccrual) {
		t.Fatalf("drain at 2 shards %v, want the capped %v", d, 5*(1-1.0/minAccrual))
	}
	for name, w := range map[string]ShardView{
		"an estimate older than drainAge": {At: T, RateAt: T - drainAge - 1, Drain: v.Drain},
		"no estimate":                     {At: T, Drain: v.Drain},
		"no drain of this limit":          {At: T, RateAt: T, Drain: map[string]float64{"tpm": 4}},
	} {
		if d := w.drain(rps, 1); d != 0 {
			t.Errorf("%s: drain %v, want 0", name, d)
		}
	}
	v.Pending = map[string]int64{"rps": 300}
	if e := v.expected(rps, 1, T+10); e != 360 {
		t.Fatalf("expected loss %d, want 300 in flight + 6 x 10 ms", e)
	}
	if e := v.expected(rps, 1, T); e != 300 {
		t.Fatalf("expected loss at the image's time %d, want 300 (in flight only)", e)
	}
	if e := v.expected(rps, 1, T-10); e != 300 {
		t.Fatalf("expected loss before the image's time %d, want 300 (in flight only)", e)
	}
	if e := (&ShardView{At: T, Pending: v.Pending}).expected(rps, 1, T+10); e != 300 {
		t.Fatalf("expected loss without a drain %d, want 300", e)
	}

	at := ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": atLimitShare * 10}}
	below := ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": atLimitShare*10 - 0.01}}
	if !at.contended(rps, 1) || below.contended(rps, 1) {
		t.Fatalf("contended at exactly %v of the refill: %v; just below: %v", atLimitShare, at.contended(rps, 1), below.contended(rps, 1))
	}
	if !p.atLimit(at, 1) || p.atLimit(below, 1) {
		t.Fatal("atLimit does not follow the charged limit's contention")
	}
	// Only limits the plan charges count: tpm, charged nothing, may be
	// drained to its limit.
	tpm := ShardView{At: T, RateAt: T, Drain: map[string]float64{"tpm": 10}}
	if p.atLimit(tpm, 1) {
		t.Fatal("at its limit by a limit the plan does not charge")
	}
}

// A local refusal is judged from an image at most LocalRefusalAge old,
// not from the future, and not once a refusal's promise is due.
func TestLocalRefusalsNeedAFreshImageAndNoDuePromise(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 5})
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 0}}.item(p)) // empty at T: 5 tokens in 500 ms
	for _, c := range []struct {
		name    string
		at, now int64
		promise int64
		want    bool
	}{
		{"fresh", T, T + 100, 0, true},
		{"from the future", T + 50, T + 10, 0, false},
		{"promise not due", T, T + 100, T + 101, true},
		{"promise due", T, T + 100, T + 100, false},
	} {
		v := ShardView{Img: im, At: c.at, Promise: c.promise}
		if got := p.refusesLocally(&v, 1, c.now, Options{}); got != c.want {
			t.Errorf("%s: refuses %v, want %v", c.name, got, c.want)
		}
	}
	// An empty bucket's image a second old: too old to refuse from,
	// whatever it says.
	debt := image(t, shape{rf: T, tk: map[string]int64{"rps": -20_000}}.item(p))
	if !p.refusesLocally(&ShardView{Img: debt, At: T}, 1, T+LocalRefusalAge, Options{}) ||
		p.refusesLocally(&ShardView{Img: debt, At: T}, 1, T+LocalRefusalAge+1, Options{}) {
		t.Fatalf("refusals from an image of a bucket in debt: up to exactly %d ms old", LocalRefusalAge)
	}
}

// headroomTarget: 1 % of the burst's refill time, at most maxHeadroomMs.
func TestHeadroomTarget(t *testing.T) {
	for _, c := range []struct {
		l    bucket.Limit
		want int64
	}{
		{rps10.Limit, 10}, // 100 of 10,000 at 10 a ms
		{bucket.Limit{Burst: 4900, RefillAmount: 1000, RefillPeriod: 1000}, 49},
		{bucket.Limit{Burst: 5100, RefillAmount: 1000, RefillPeriod: 1000}, maxHeadroomMs},
		{perMinute("tpm", 6000).Limit, maxHeadroomMs}, // 600 ms
		{bucket.Limit{Burst: 10_000, RefillAmount: 0, RefillPeriod: 1000}, 0},
	} {
		if got := headroomTarget(c.l); got != c.want {
			t.Errorf("headroomTarget(%+v) = %d, want %d", c.l, got, c.want)
		}
	}
}

// Under latency the headroom target is at least twice the round trip, at
// most maxLatencyCushion and what refills 1/latencyShare of the burst:
// writers that learn where the full-at instant stands a round trip late
// need that margin, or it falls back to the clock now and then and every
// write in flight fails at once.
func TestLatencyTarget(t *testing.T) {
	big := bucket.Limit{Burst: 100_000_000, RefillAmount: 100_000_000, RefillPeriod: 1000} // 100,000 a second
	small := bucket.Limit{Burst: 100_000, RefillAmount: 100_000, RefillPeriod: 1000}       // 100 a second
	for _, c := range []struct {
		name      string
		l         bucket.Limit
		lat, want int64
	}{
		{"no round trip known", big, 0, 10},
		{"a round trip within half the target", big, 5, 10},
		{"10 ms", big, 10, 20},
		{"30 ms: 5 % of the burst", big, 30, 50},
		{"30 ms, a burst of 100: 5 %", small, 30, 50},
		{"a second: maxLatencyCushion at most", bucket.Limit{Burst: 10_000_000, RefillAmount: 1_000_000, RefillPeriod: 1000}, 1000, maxLatencyCushion},
	} {
		if got := latencyTarget(c.l, headroomTarget(c.l), c.lat); got != c.want {
			t.Errorf("%s: %d ms, want %d", c.name, got, c.want)
		}
	}
}

// Headroom on a shared shard near its burst: the refill of headroomGain
// intervals between the shard's writes when full by now, one at the
// target, none at twice the target (farther apart the older the image,
// whose distance the others' writes since are taken to have kept), at most
// the target's refill, with the charge up to a whole ms of refill, at most
// half of what the stored balance holds beyond the charge; none for a
// client alone, or for a limit not charged.
func TestHeadroom(t *testing.T) {
	rps1000 := perSecond("rps", 1000) // 1000 a ms; target 10 ms
	p := NewPlan(bucketRef, []Limit{rps1000, perMinute("tpm", 6000)}, map[string]int64{"rps": 1})
	full := image(t, shape{rf: T}.item(p)) // fl = T
	// 9 tokens stored with fl at T: as after a doubling reset the guards.
	lowItem := shape{rf: T, tk: map[string]int64{"rps": 9000}}.item(p)
	lowItem["b_rps_fl"] = store.Int(T)
	low := image(t, lowItem)
	shared := func(im *Image, rate float64) ShardView { return ShardView{Img: im, At: T, Rate: rate, Others: rate} }
	burn := func(v ShardView, now int64) int64 {
		p := p
		if v.Img != nil && v.Img.hash != p.hash { // a plan of its own limits
			p = NewPlan(bucketRef, []Limit{{Name: "rps", Limit: bucket.Limit{Capacity: 200_000, Burst: 200_000, RefillAmount: 2000, RefillPeriod: 1}}}, map[string]int64{"rps": 1})
		}
		b := p.headroom(&v, 1, now)
		if b == nil {
			return 0
		}
		if b[len(b)-1] != 0 || len(b) == 3 && b[1] != 0 {
			t.Fatalf("burn %v: tpm (charged nothing) and wcu burn nothing", b)
		}
		return b[0]
	}
	for _, c := range []struct {
		name string
		v    ShardView
		now  int64
		want int64
	}{
		{"a write every 10 ms: the target's refill", shared(full, 0.1), T, 10*1000 - 1000},
		{"a write every 4 ms: two intervals", shared(full, 0.25), T, 8*1000 - 1000},
		{"full target ms ahead: one interval", shared(image(t, shape{rf: T - 10, tk: map[string]int64{"rps": 1_000_000 - 20_000}}.item(p)), 0.1), T, 9000},
		{"full 15 ms ahead: half an interval", shared(image(t, shape{rf: T - 10, tk: map[string]int64{"rps": 1_000_000 - 25_000}}.item(p)), 0.1), T, 4000},
		{"full twice the target ahead", shared(image(t, shape{rf: T - 10, tk: map[string]int64{"rps": 1_000_000 - 30_000}}.item(p)), 0.1), T, 0},
		{"an image 40 ms old, full 20 ms ahead then: the others kept it there; three quarters of an interval, up to a whole ms", shared(image(t, shape{rf: T - 10, tk: map[string]int64{"rps": 1_000_000 - 30_000}}.item(p)), 0.1), T + 40, 7000},
		{"a write every 3.3 ms: two intervals, up to a whole ms", shared(full, 0.3), T, 7000 - 1000},
		{"half the balance beyond the charge", shared(low, 0.1), T, 4000},
		{"alone", ShardView{Img: full, At: T, Rate: 0.1}, T, 0},
		{"no rate", ShardView{Img: full, At: T, Others: 0.1}, T, 0},
		{"no image", ShardView{At: T, Rate: 0.1, Others: 0.1}, T, 0},
		{"a burn no larger than the charge", shared(full, 2), T, 0},
		{"the stored balance spent, the refill route paying: one interval at the target", shared(image(t, shape{rf: T - 1000, tk: map[string]int64{"rps": -10_000}}.item(p)), 0.1), T, 9000},
		{"the stored balance spent, the route closed (rf too old): none", shared(image(t, shape{rf: T - refillRouteAge - 1, tk: map[string]int64{"rps": -10_000}, ahead: map[string]int64{"rps": -refillRouteAge + 1010}}.item(p)), 0.1), T, 0},
		{"a write every 100 ms, answers in 30 ms: the refill of a 50 ms target", func() ShardView { v := shared(full, 0.01); v.Lat = 30; return v }(), T, 50*1000 - 1000},
		{"a target of 1 ms", func() ShardView {
			q := NewPlan(bucketRef, []Limit{{Name: "rps", Limit: bucket.Limit{Capacity: 200_000, Burst: 200_000, RefillAmount: 2000, RefillPeriod: 1}}}, map[string]int64{"rps": 1})
			return ShardView{Img: image(t, shape{rf: T}.item(q)), At: T, Rate: 0.5, Others: 0.5}
		}(), T, -1},
		{"a target of 1 ms, full that far ahead: one interval, the charge's refill, no burn", func() ShardView {
			q := NewPlan(bucketRef, []Limit{{Name: "rps", Limit: bucket.Limit{Capacity: 200_000, Burst: 200_000, RefillAmount: 2000, RefillPeriod: 1}}}, map[string]int64{"rps": 1})
			return ShardView{Img: image(t, shape{rf: T, tk: map[string]int64{"rps": 198_000}}.item(q)), At: T, Rate: 2, Others: 2}
		}(), T, 0},
	} {
		if c.want < 0 { // the target's refill (2,000) less the charge
			c.want = 1000
		}
		if got := burn(c.v, c.now); got != c.want {
			t.Errorf("%s: burn %d, want %d", c.name, got, c.want)
		}
	}
}

// refresh: the normal write at once when neither the stored tokens nor
// the refill route (fh, pushed by what the others likely charged since)
// can pay but the refill can (and no other writer likely refilled since);
// now and then on a shared shard whose stored balance runs below a
// quarter of the burst while the route closes (fh drifted, rf aged);
// never when the refill cannot pay either.
func TestRefresh(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 1})
	img := func(tk int64) *Image { return image(t, shape{rf: T - 100, tk: map[string]int64{"rps": tk}}.item(p)) }
	ahead := func(tk, ms int64) *Image {
		return image(t, shape{rf: T - 100, tk: map[string]int64{"rps": tk}, ahead: map[string]int64{"rps": ms}}.item(p))
	}
	aged := func(tk int64) *Image {
		return image(t, shape{rf: T - refillRouteAge/2 - 1, tk: map[string]int64{"rps": tk}}.item(p))
	}
	// img(500): 0.5 token at T-100, 1.5 at T; full at T+850; the route
	// pays one token while fh <= T+900.
	for _, c := range []struct {
		name string
		v    ShardView
		burn []int64
		draw float64
		want bool
	}{
		{"short, the route pays", ShardView{Img: img(500), At: T}, nil, 0.99, false},
		{"short, fh 50 ms drifted: the route still pays", ShardView{Img: ahead(500, 50), At: T}, nil, 0.99, false},
		{"short, fh 51 ms drifted, alone", ShardView{Img: ahead(500, 51), At: T}, nil, 0.99, true},
		{"short, drifted, others wrote since", ShardView{Img: ahead(500, 51), At: T - 20, Others: 0.05}, nil, 0.99, false},
		{"short, drifted, under one other write since", ShardView{Img: ahead(500, 51), At: T - 19, Others: 0.05}, nil, 0.99, true},
		{"short, the others' drain since closes the route", ShardView{Img: img(500), At: T - 100, RateAt: T - 100,
			Drain: map[string]float64{"rps": 9}}, nil, 0.99, true},
		{"short, the others' drain since leaves the route open", ShardView{Img: img(500), At: T - 100, RateAt: T - 100,
			Drain: map[string]float64{"rps": 0.5}}, nil, 0.99, false},
		{"short by the burn, drifted", ShardView{Img: ahead(1500, 1000), At: T}, []int64{600, 0}, 0.99, true},
		{"short by the burn, the route pays", ShardView{Img: img(1500), At: T}, []int64{600, 0}, 0.99, false},
		{"short, the refill cannot pay", ShardView{Img: img(-1000), At: T}, nil, 0, false},
		{"a quarter of the burst beyond the charge, drifted", ShardView{Img: ahead(1000+2500, 1000), At: T, Others: 1}, nil, 0, false},
		{"just below it, drifted, alone", ShardView{Img: ahead(1000+2499, 1000), At: T}, nil, 0, false},
		{"just below it, drifted, shared, lucky draw", ShardView{Img: ahead(1000+2499, 1000), At: T, Others: 0.05}, nil, 0.49, true},
		{"just below it, drifted, shared, unlucky draw", ShardView{Img: ahead(1000+2499, 1000), At: T, Others: 0.05}, nil, 0.5, false},
		{"just below it, undrifted, shared, lucky draw", ShardView{Img: img(1000 + 2499), At: T, Others: 0.05}, nil, 0.49, false},
		{"just below it, 250 ms drift, shared, lucky draw", ShardView{Img: ahead(1000+2499, 250), At: T, Others: 0.05}, nil, 0.49, false},
		{"just below it, 251 ms drift, shared, lucky draw", ShardView{Img: ahead(1000+2499, 251), At: T, Others: 0.05}, nil, 0.49, true},
		{"just below it, rf half the route's age, shared, lucky draw", ShardView{Img: aged(1000 + 2499), At: T, Others: 0.05}, nil, 0.49, true},
		{"just below it, rf exactly half the route's age, shared, lucky draw", ShardView{Img: image(t, shape{rf: T - refillRouteAge/2, tk: map[string]int64{"rps": 1000 + 2499}}.item(p)), At: T, Others: 0.05}, nil, 0.49, false},
	} {
		if got := p.refresh(&c.v, 1, T, c.burn, c.draw); got != c.want {
			t.Errorf("%s: refresh %v, want %v", c.name, got, c.want)
		}
	}
	// The wcu gauge is counted, never a condition: a gauge run dry is no
	// reason to refill early, shared or not.
	wcu := &p.specs[len(p.specs)-1]
	gauge := image(t, shape{rf: T - 100, tk: map[string]int64{"rps": 5000, keys.HiddenLimit: wcu.amount - 1}}.item(p))
	for _, draw := range []float64{0, 0.49} {
		if p.refresh(&ShardView{Img: gauge, At: T, Others: 0.05}, 1, T, nil, draw) {
			t.Errorf("wcu below the unit, shared, draw %v: refresh, want none", draw)
		}
	}
	other := NewPlan(bucketRef, []Limit{perSecond("tpm", 10)}, map[string]int64{"tpm": 1})
	if other.refresh(&ShardView{Img: img(0), At: T}, 1, T, nil, 0) {
		t.Fatal("refresh for a limit the image lacks: the store must say what it holds")
	}
}

// retryable: the consumption-only write can land on the image when its
// stored tokens pay the charge and burn, and every charged limit is below
// its burst (fl > now).
func TestRetryable(t *testing.T) {
	p := plan1(bucketRef)
	at := func(tk, fl int64) *Image {
		it := shape{rf: T, tk: map[string]int64{"rps": tk}}.item(p)
		it["b_rps_fl"] = store.Int(fl)
		return image(t, it)
	}
	for _, c := range []struct {
		name string
		im   *Image
		burn []int64
		want bool
	}{
		{"pays exactly, below its burst", at(1000, T+1), nil, true},
		{"a millitoken short", at(999, T+1), nil, false},
		{"pays the charge, not the burn", at(1500, T+1), []int64{501, 0}, false},
		{"pays charge and burn", at(1500, T+1), []int64{500, 0}, true},
		{"full by now", at(5000, T), nil, false},
	} {
		if got := p.retryable(c.im, 1, T, c.burn); got != c.want {
			t.Errorf("%s: retryable %v, want %v", c.name, got, c.want)
		}
	}
}

// blind: on an image full by now, the full write when another writer's
// write likely lands within a charge's refill time less often than the
// bucket sits full beyond the ride-ahead slack (by the client's estimate;
// before it has one, only on an item of its own refill), else the
// ride-ahead write (a speculative one); the normal write when refresh says
// so; else the speculative write.
func TestBlindChoosesFromTheView(t *testing.T) {
	p := plan1(bucketRef)
	full := image(t, shape{rf: T - 1000}.item(p))
	short := image(t, shape{rf: T - 100, tk: map[string]int64{"rps": 500}}.item(p))
	drift := image(t, shape{rf: T - 100, tk: map[string]int64{"rps": 500}, ahead: drifted}.item(p))
	for _, c := range []struct {
		name string
		v    ShardView
		n    int64
		want Path
	}{
		{"nothing known", ShardView{}, 1, PathSpeculative},
		{"an image at another count", ShardView{Img: full, At: T}, 2, PathSpeculative},
		{"full, others seldom write within a charge's refill", ShardView{Img: full, At: T - 10, Others: 0.0005, Rate: 0.0005}, 1, PathFull},
		{"full, alone", ShardView{Img: full, At: T - 10, Rate: 0.049, RateAt: T - 500}, 1, PathFull},
		{"full, others often write within a charge's refill: ride ahead", ShardView{Img: full, At: T - 10, Others: 0.049, Rate: 0.049}, 1, PathSpeculative},
		{"full exactly now", ShardView{Img: image(t, shape{rf: T - 1000, tk: map[string]int64{"rps": 0}}.item(p)), At: T - 1000, OwnRefill: true}, 1, PathFull},
		// Before the client's first estimate: an item of its own refill
		// says full; one another writer refilled says nothing of others.
		{"full, no estimate, its own refill", ShardView{Img: full, At: T - 10, OwnRefill: true}, 1, PathFull},
		{"full, no estimate, another's refill", ShardView{Img: full, At: T - 10}, 1, PathSpeculative},
		{"full, an estimate of no one else, another's refill", ShardView{Img: full, At: T - 10, RateAt: T - 500}, 1, PathFull},
		{"short, the refill route pays", ShardView{Img: short, At: T}, 1, PathSpeculative},
		{"short, refill pays, fh drifted", ShardView{Img: drift, At: T}, 1, PathNormal},
	} {
		if _, got, err := p.blind(&c.v, c.n, T, 0.99, PathNone, false); err != nil || got != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
}

// Path names: every path has its name, anything else is "unknown".
func TestPathNames(t *testing.T) {
	if PathUndo.String() != "undo" || PathNone.String() != "none" || Path(len(pathNames)).String() != "unknown" {
		t.Fatalf("names: %q %q %q", PathUndo, PathNone, Path(len(pathNames)))
	}
}

// A call's latency is from when it was sent to now; unknown (0) without a
// send time or from a clock that stepped back.
func TestLatency(t *testing.T) {
	for _, c := range []struct{ sent, now, want int64 }{{0, T, 0}, {T, T + 30, 30}, {T, T, 0}, {T, T - 1, 0}} {
		r := Result{Sent: c.sent}
		if got := r.latency(c.now); got != c.want {
			t.Errorf("sent T%+d, now T%+d: latency %d, want %d", c.sent-T, c.now-T, got, c.want)
		}
	}
}

// pick chooses the k-th shard not tried yet, whatever order they were
// tried in; -1 when every shard was.
func TestPickSkipsTheTriedShards(t *testing.T) {
	for _, c := range []struct {
		n     int64
		tried []int
		k     int
		want  int
	}{
		{4, nil, 2, 2},
		{4, []int{2}, 2, 3},
		{4, []int{3, 0}, 0, 1},
		{4, []int{3, 0}, 1, 2},
		{4, []int{2, 1}, 1, 3},
		{4, []int{0, 1, 2, 3}, 0, -1},
		{2, []int{1, 0}, 0, -1},
		{2, []int{1}, 0, 0},
	} {
		if got := pick(picks(c.k), c.n, c.tried); got != c.want {
			t.Errorf("pick(%d of %d, tried %v) = %d, want %d", c.k, c.n, c.tried, got, c.want)
		}
	}
	// With every shard tried, no draw is made (a draw from none panics).
	if got := pick(newRand(1), 2, []int{0, 1}); got != -1 {
		t.Errorf("pick with every shard tried = %d", got)
	}
}

// withBilled charges the failed writes not billed yet to the hidden
// limit, beside the write's own unit; without any it is the plan itself.
func TestWithBilled(t *testing.T) {
	p := plan1(bucketRef)
	if p.withBilled(0) != p || p.withBilled(-1) != p {
		t.Fatal("a plan without billed failures was copied")
	}
	q := p.withBilled(3)
	if w := q.specs[len(q.specs)-1].amount; w != 4*unit || p.specs[len(p.specs)-1].amount != unit || q.specs[0].amount != 1000 {
		t.Fatalf("wcu %d (plan's %d), rps %d: want 4 units, the plan untouched", w, p.specs[len(p.specs)-1].amount, q.specs[0].amount)
	}
}

// retryOf is a refusal's longest wait among its exceeded limits; a limit
// no wait cures counts as longest of all.
func TestRetryOf(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 100)}, map[string]int64{"rps": 5, "tpm": 50})
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 3000, "tpm": 0}}.item(p))
	if w := retryOf(&Refusal{Plan: p, Img: im, N: 1, Now: T}); w != 500 {
		t.Fatalf("wait %d ms, want 500 (tpm: 50 tokens at 100 a second; rps needs 200)", w)
	}
	big := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 11})
	if w := retryOf(&Refusal{Plan: big, Img: image(t, shape{rf: T}.item(big)), N: 1, Now: T}); w < 1<<62 {
		t.Fatalf("wait %d for a charge above the burst, want the longest", w)
	}
}
