package sim

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
)

// Workload is the traffic of a simulation: who asks for what, how often,
// and what happens around it. Scenarios build one; property tests generate
// them.
type Workload struct {
	// Namespace of every key (default "sim").
	Namespace string
	// Limits are the limits every request carries (1 to MaxLimits, names
	// distinct); their order fixes the index of amounts in the history.
	Limits []limiter.Limit
	// Entities are the rate-limited principals. Entities with traffic
	// (NoTraffic false) are picked uniformly, or, when Zipf (> 1) is set,
	// the k-th with probability proportional to (ZipfV + k)^-Zipf
	// (math/rand/v2's Zipf; ZipfV >= 1, larger flattens the head): the first
	// entities are the hot ones. Resources are picked uniformly.
	Entities []Entity
	// Resources are the resource names requests pick from (at least one).
	Resources []string
	// Also are resources every acquire charges besides the one picked
	// (limiter.Request.Also; at most MaxAlso, none of them in
	// Resources): a gateway charging a model and "all-models". AlsoLimits,
	// when set, are stored for each of them (every entity) and override
	// the requests' limits there by name, as an entity's own stored limits
	// override them in turn. As in the limiter (see limiter.Request.Limits),
	// a name AlsoLimits lacks is not dropped: the request's limit of that
	// name applies on the Also resources too (an "all-models" storing only
	// rpm still charges and enforces the request's tpm there), and the
	// checkers judge it so. Not with Reservations.
	Also       []string
	AlsoLimits []limiter.Limit
	// Zipf and ZipfV shape the entity pick (see Entities); Zipf 0 picks
	// uniformly, ZipfV 0 counts as 1.
	Zipf  float64
	ZipfV float64
	// Consume says how many tokens of each limit (same index as Limits)
	// one acquire asks for; a Range with Max 0 takes nothing of it.
	Consume []Range
	// AdjustProb is the probability that an admitted lease is adjusted
	// after its call (LLM style: the real token count is known afterwards),
	// by a factor drawn log-normally with sigma AdjustSpread around the
	// estimate, on the limits whose Range has Adjust set. RollbackProb is the
	// probability that the call fails and the lease is rolled back instead.
	AdjustProb, AdjustSpread, RollbackProb float64
	// CallTime is the time between an admission and its adjust or rollback.
	CallTime Latency
	// RetryProb is the probability that a client refused with a
	// retry-after of at most MaxRetryWait (default 2 s) waits exactly
	// that long and retries once.
	RetryProb    float64
	MaxRetryWait time.Duration
	// Writers is the number of simulated clients, Rate the offered
	// acquires per second of all of them together (open loop: arrivals
	// do not wait for answers, a busy client catches up), Duration the
	// simulated time before the fault-free tail.
	Writers  int
	Rate     float64
	Duration time.Duration
	// StartSpread spreads the clients' first arrivals (default 1 s).
	StartSpread time.Duration
	// DutyPeriod and DutyOn, when set, make arrivals happen only during
	// the first DutyOn of every DutyPeriod (a long, mostly idle run).
	DutyPeriod, DutyOn time.Duration
	// Skew is the largest clock skew of a client, either way. Skew is a
	// fault: TailClock says how the clocks come back together when the
	// fault-free tail starts.
	Skew      time.Duration
	TailClock TailClock
	// Faults turns the fault plan on; FaultPlan (nil: DefaultFaults) is
	// what it injects.
	Faults    bool
	FaultPlan *FaultPlan
	// Latency, when set, is the scenario's store latency model (a
	// Config.Latency overrides it).
	Latency *LatencyModel
	// Reservations turns the limiters' reservations on
	// (limiter.WithReservations for every limit).
	Reservations bool
	// CrashEvery, when set, is the mean time between a writer's crashes:
	// the process stops at once (its leases are never settled, its
	// reservations are stranded) and a new one, with empty caches, takes
	// over after CrashDowntime (default 1 s).
	CrashEvery, CrashDowntime time.Duration
	// Uneven, when above 0, spreads Rate over the writers unevenly: the
	// i-th writer offers in proportion to 1/(i+1)^Uneven.
	Uneven float64
	// CacheTTL is the limiters' configuration cache TTL (default 60 s).
	CacheTTL time.Duration
	// ScopeChanges are an operator's changes of scopes' modes during the
	// run, in time order.
	ScopeChanges []ScopeChange
	// PartitionWCU overrides memsim's per-partition write ceiling (0: the
	// default 1000 units per second).
	PartitionWCU float64
	// HoldLeases makes every admitted lease last its call time (CallTime)
	// before it is committed, rather than be committed at once: the
	// leases of a concurrency cap are in flight meanwhile.
	HoldLeases bool
	// Probe adds the liveness probe client (a private bucket, active in
	// the tail).
	Probe bool
	// LimitRate is the acquire rate the limits admit at most, all buckets
	// together, drawn in plots (0: not drawn).
	LimitRate float64
	// Start is the wall time the run starts at (default memsim.Epoch()):
	// calendar quotas' windows follow it.
	Start time.Time
	// WarmUp is the time excluded from the report's after-warm-up figures
	// (default: 30 s, at most a quarter of Duration).
	WarmUp time.Duration
	// Log, when set, receives the simulated limiters' debug logs.
	Log io.Writer

	// derived
	name        string
	entityIdx   map[string]int
	parents     map[string]bool // entities some entity names as its parent
	probeLimits []limiter.Limit
	faultDesc   string
	callTime    dist
}

// TailClock says what skewed clocks do when the fault-free tail starts.
type TailClock uint8

// Tail clock behaviours.
const (
	// TailSlew brings every clock to true time over twice the largest
	// skew, each running at between half and one and a half times the
	// true rate: no clock goes backwards (as NTP slews).
	TailSlew TailClock = iota
	// TailStep sets every clock to true time at once (an NTP step: fast
	// clocks jump back).
	TailStep
	// TailKeep leaves the clocks skewed: invariant 7 is then judged with
	// skewed clocks too.
	TailKeep
)

// Entity is one principal of a workload.
type Entity struct {
	// ID is the entity's id (unique in the workload).
	ID string
	// Parent and Cascade make the entity's acquires also charge the
	// parent's bucket for the same resource.
	Parent  string
	Cascade bool
	// Limits, when set, are stored for the entity (all resources) and
	// override the requests' limits (and AlsoLimits) by name; a name they
	// lack keeps the limit of the next scope that has one, as in the
	// limiter.
	Limits []limiter.Limit
	// NoTraffic marks an entity that is never picked (a cascade parent).
	NoTraffic bool
	// Mode, when set, is stored for the entity on every resource
	// (admin.SetMode): "admit", "refuse" or "shadow".
	Mode string
}

// ScopeChange is an operator's change of a scope's mode (admin.SetMode)
// and, when Limits is set, of its limits (admin.PutLimits), at At of
// virtual time, made directly on the table (no client, no latency, no
// fault): the limiters see it within their CacheTTL.
type ScopeChange struct {
	// At is when the change is made, in virtual time from the start.
	At time.Duration
	// Entity and Resource name the scope (one may be "").
	Entity, Resource string
	// Mode is "admit", "refuse", "shadow" or "" (enforce).
	Mode string
	// Limits, when set, are stored for the scope. They must be the
	// workload's limits of the same names and numbers (the checker judges
	// each bucket by one set of numbers); only Shadow may differ: a limit
	// tried in shadow, then enforced.
	Limits []limiter.Limit
}

// Range is an inclusive range of token amounts.
type Range struct {
	// Min and Max bound the amount in whole tokens: 0 <= Min <= Max, and
	// Min >= 1 unless Max is 0 (nothing taken).
	Min, Max int64
	// Adjust makes this limit's charge corrected after the call.
	Adjust bool
}

// orDefault returns d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// limitsOf returns the limits in force for an entity's buckets: its
// stored limits, then the request's, per name.
func (w *Workload) limitsOf(e *Entity) []limiter.Limit {
	return mergeLimits(e.Limits, w.Limits)
}

// alsoLimitsOf returns the limits in force for an entity's buckets on the
// Also resources: its stored limits, then AlsoLimits, then the request's,
// per name.
func (w *Workload) alsoLimitsOf(e *Entity) []limiter.Limit {
	return mergeLimits(e.Limits, w.AlsoLimits, w.Limits)
}

// mergeLimits combines the limits of scopes, most specific first, as the
// limiter does: per name, the first scope that defines it wins, and every
// name some scope defines applies. A single scope is returned as is.
func mergeLimits(scopes ...[]limiter.Limit) []limiter.Limit {
	var out []limiter.Limit
	n := 0
	for _, sc := range scopes {
		if sc != nil {
			out, n = sc, n+1
		}
	}
	if n <= 1 {
		return out
	}
	out = nil
	for _, sc := range scopes {
		for _, l := range sc {
			if !slices.ContainsFunc(out, func(x limiter.Limit) bool { return x.Name == l.Name }) {
				out = append(out, l)
			}
		}
	}
	return out
}

// resolve returns the workload a configuration runs, with the overrides
// applied and validated.
func resolve(cfg *Config) (*Workload, error) {
	var w Workload
	if cfg.Workload != nil {
		w = *cfg.Workload
		w.name = "custom"
	} else {
		sc, ok := Lookup(cfg.Scenario)
		if !ok {
			return nil, fmt.Errorf("sim: unknown scenario %q (see -list)", cfg.Scenario)
		}
		w = *sc.Build(*cfg)
		w.name = sc.Name
		if sc.Actors != nil && len(cfg.Actors) == 0 {
			cfg.Actors = sc.Actors(*cfg)
		}
	}
	if cfg.Writers > 0 {
		w.Writers = cfg.Writers
	}
	if cfg.Rate > 0 {
		w.Rate = cfg.Rate
	}
	w.Duration = orDefault(cfg.Duration, w.Duration)
	w.Faults = w.Faults || cfg.Faults
	switch {
	case cfg.Skew > 0:
		w.Skew = cfg.Skew
	case cfg.Skew < 0:
		w.Skew = 0
	}
	if w.Namespace == "" {
		w.Namespace = "sim"
	}
	if err := w.validate(); err != nil {
		return nil, err
	}
	w.callTime = w.CallTime.compile()
	return &w, nil
}

// probability reports whether p is in [0, 1] (NaN is not).
func probability(p float64) bool { return p >= 0 && p <= 1 }

func (w *Workload) validate() error {
	switch {
	case w.Writers < 1:
		return errors.New("sim: writers must be at least 1")
	case w.Writers > 1_000_000:
		return errors.New("sim: writers must be at most 1000000")
	case !(w.Rate > 0) || w.Rate > 1e8:
		return errors.New("sim: rate must be positive (and at most 1e8 per second)")
	case w.Duration <= 0:
		return errors.New("sim: duration must be positive")
	case len(w.Limits) < 1 || len(w.Limits) > MaxLimits:
		return fmt.Errorf("sim: a workload needs 1 to %d limits, not %d", MaxLimits, len(w.Limits))
	case len(w.Consume) != len(w.Limits):
		return errors.New("sim: Consume needs one Range per limit")
	case len(w.Resources) == 0:
		return errors.New("sim: a workload needs at least one resource")
	case w.Skew < 0 || w.Skew > time.Hour:
		return errors.New("sim: skew must be between 0 and 1h")
	case w.TailClock > TailKeep:
		return errors.New("sim: unknown TailClock")
	case w.Zipf != 0 && !(w.Zipf > 1):
		return errors.New("sim: Zipf must be above 1 (or 0 for uniform)")
	case w.Zipf != 0 && w.ZipfV != 0 && !(w.ZipfV >= 1):
		return errors.New("sim: ZipfV must be at least 1")
	case w.DutyPeriod < 0 || w.DutyOn < 0 || (w.DutyPeriod > 0 && (w.DutyOn <= 0 || w.DutyOn > w.DutyPeriod)):
		return errors.New("sim: DutyOn must be in (0, DutyPeriod]")
	case len(w.Also) > MaxAlso:
		return fmt.Errorf("sim: at most %d Also resources, not %d", MaxAlso, len(w.Also))
	case len(w.Also) > 0 && w.Reservations:
		return errors.New("sim: Also with Reservations is not simulated (reservations serve acquires of one resource)")
	case !probability(w.AdjustProb) || !probability(w.RollbackProb) || !probability(w.RetryProb):
		return errors.New("sim: AdjustProb, RollbackProb and RetryProb must be probabilities, in [0, 1]")
	case !(w.AdjustSpread >= 0) || math.IsInf(w.AdjustSpread, 1):
		return errors.New("sim: AdjustSpread must be a finite number, at least 0")
	case !(w.Uneven >= 0) || math.IsInf(w.Uneven, 1):
		return errors.New("sim: Uneven must be a finite number, at least 0")
	case !(w.PartitionWCU >= 0) || 3*w.PartitionWCU > 1e6:
		return errors.New("sim: PartitionWCU must be between 0 (the default) and 333333 write units per second")
	}
	for _, e := range w.Entities {
		if e.ID == "" {
			return errors.New("sim: an entity's ID must not be empty")
		}
	}
	if slices.Contains(w.Resources, "") || slices.Contains(w.Also, "") {
		return fmt.Errorf("sim: a resource in Resources or Also must not be empty (name the default one %q)", limiter.DefaultResource)
	}
	for i, r := range w.Also {
		if slices.Contains(w.Resources, r) || slices.Contains(w.Also[:i], r) {
			return fmt.Errorf("sim: Also resource %q twice (in Resources or Also)", r)
		}
	}
	if len(w.AlsoLimits) > 0 {
		if err := w.fits(w.AlsoLimits, ""); err != nil {
			return err
		}
	}
	for i, l := range w.Limits {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("sim: limit %d: %w", i, err)
		}
		if slices.ContainsFunc(w.Limits[:i], func(m limiter.Limit) bool { return m.Name == l.Name }) {
			return fmt.Errorf("sim: limit %q twice", l.Name)
		}
	}
	consumed := false
	for i, r := range w.Consume {
		if r.Min < 0 || r.Max < r.Min || (r.Max > 0 && r.Min < 1) {
			return fmt.Errorf("sim: Consume[%d] = %+v is not a range of positive amounts", i, r)
		}
		consumed = consumed || r.Max > 0
	}
	if !consumed {
		return errors.New("sim: Consume takes nothing from any limit")
	}
	w.entityIdx = make(map[string]int, len(w.Entities))
	w.parents = make(map[string]bool)
	traffic := false
	for i, e := range w.Entities {
		if e.Parent != "" {
			w.parents[e.Parent] = true
		}
		if _, dup := w.entityIdx[e.ID]; dup {
			return fmt.Errorf("sim: entity %q twice", e.ID)
		}
		w.entityIdx[e.ID] = i
		traffic = traffic || !e.NoTraffic
	}
	if !traffic {
		return errors.New("sim: no entity has traffic")
	}
	for i := range w.Entities {
		e := &w.Entities[i]
		if e.Cascade && e.Parent == "" {
			return fmt.Errorf("sim: entity %q cascades without a parent", e.ID)
		}
		if e.Parent != "" {
			p, ok := w.entityIdx[e.Parent]
			if !ok {
				return fmt.Errorf("sim: entity %q has unknown parent %q", e.ID, e.Parent)
			}
			if w.Entities[p].Parent != "" {
				return fmt.Errorf("sim: entity %q: parents of parents are not simulated", e.ID)
			}
		}
		if e.NoTraffic {
			continue
		}
		if err := w.fits(w.limitsOf(e), e.ID); err != nil {
			return err
		}
		if e.Cascade {
			if err := w.fits(w.limitsOf(&w.Entities[w.entityIdx[e.Parent]]), e.Parent); err != nil {
				return err
			}
		}
	}
	for _, e := range w.Entities {
		if err := checkMode(e.Mode); err != nil {
			return fmt.Errorf("sim: entity %q: %w", e.ID, err)
		}
	}
	var last time.Duration
	for i, mc := range w.ScopeChanges {
		if err := checkMode(mc.Mode); err != nil {
			return fmt.Errorf("sim: ScopeChanges[%d]: %w", i, err)
		}
		if _, ok := w.entityIdx[mc.Entity]; mc.Entity != "" && !ok {
			return fmt.Errorf("sim: ScopeChanges[%d]: unknown entity %q", i, mc.Entity)
		}
		if (mc.Entity == "" && mc.Resource == "") || mc.At < last {
			return fmt.Errorf("sim: ScopeChanges[%d]: needs an entity or a resource, and changes in time order", i)
		}
		last = mc.At
	}
	if w.Probe {
		w.probeLimits = make([]limiter.Limit, len(w.Limits))
		for i, l := range w.Limits {
			w.probeLimits[i] = limiter.PerSecond(l.Name, 4)
			if l.Window != "" { // the same kind (the checker reads it so), never binding
				w.probeLimits[i] = limiter.Limit{Name: l.Name, Capacity: 1_000_000_000, Window: l.Window, TimeZone: l.TimeZone, TTL: l.TTL}
			}
		}
	}
	return nil
}

// checkMode accepts the modes a workload may set.
func checkMode(m string) error {
	switch m {
	case "", "admit", "refuse", "shadow":
		return nil
	}
	return fmt.Errorf("unknown mode %q (want admit, refuse, shadow or \"\")", m)
}

// modeSpans returns the modes of entity's bucket on resource over the
// run: the mode in force from 0, then one span per change of it, each
// from the change's time (the most specific scope with a mode wins, as
// for an acquire).
func (w *Workload) modeSpans(entity, resource string) []modeSpan {
	type scope struct{ e, r string }
	modes := map[scope]string{{entity, ""}: w.Entities[w.entityIdx[entity]].Mode}
	mode := func() string {
		return cmp.Or(modes[scope{entity, resource}], modes[scope{entity, ""}], modes[scope{"", resource}])
	}
	spans := []modeSpan{{From: 0, Mode: mode()}}
	for _, mc := range w.ScopeChanges {
		modes[scope{mc.Entity, mc.Resource}] = mc.Mode
		if m := mode(); m != spans[len(spans)-1].Mode {
			spans = append(spans, modeSpan{From: int64(mc.At), Mode: m})
		}
	}
	return spans
}

// markShadow sets Shadow on the bucket's limits (a copy) that are shadow
// at some time of the run: shadow in the workload or a scope change, or
// all of them when the bucket is ever in shadow mode.
func (w *Workload) markShadow(bm *bucketModel) {
	all := slices.ContainsFunc(bm.Modes, func(s modeSpan) bool { return s.Mode == "shadow" })
	ls := slices.Clone(bm.Limits)
	for i := range ls {
		named := func(x limiter.Limit) bool { return x.Name == ls[i].Name && x.Shadow }
		shadow := all || slices.ContainsFunc(w.Limits, named)
		for _, sc := range w.ScopeChanges {
			shadow = shadow || slices.ContainsFunc(sc.Limits, named)
		}
		ls[i].Shadow = ls[i].Shadow || shadow
	}
	bm.Limits = ls
}

// fits checks that every limit of ls the request names has a burst that
// can serve the largest amount.
func (w *Workload) fits(ls []limiter.Limit, who string) error {
	for i, r := range w.Consume {
		if r.Max == 0 {
			continue
		}
		for _, l := range ls {
			if l.Name == w.Limits[i].Name {
				if b := l.EffectiveBurst(); r.Max > b {
					return fmt.Errorf("sim: entity %q: limit %s has burst %d, below the largest charge %d", who, l.Name, b, r.Max)
				}
			}
		}
	}
	return nil
}

// model builds what the checkers know of the workload.
func (w *Workload) model(s *Sim) *model {
	m := &model{Namespace: w.Namespace, probeBucket: -1, Reservations: w.Reservations}
	for _, l := range w.Limits {
		m.LimitNames = append(m.LimitNames, l.Name)
		m.Quotas = append(m.Quotas, calendarOf(l))
	}
	nr := len(w.Resources) + len(w.Also) // the Also resources after the others
	m.index = make([]int32, len(w.Entities)*nr)
	for i := range m.index {
		m.index[i] = -1
	}
	add := func(e, r int) int32 {
		k := e*nr + r
		if m.index[k] < 0 {
			m.index[k] = int32(len(m.Buckets))
			bm := bucketModel{Entity: w.Entities[e].ID, Parent: -1}
			if r < len(w.Resources) {
				bm.Resource, bm.Limits = w.Resources[r], w.limitsOf(&w.Entities[e])
			} else {
				bm.Resource, bm.Limits = w.Also[r-len(w.Resources)], w.alsoLimitsOf(&w.Entities[e])
			}
			bm.Modes = w.modeSpans(bm.Entity, bm.Resource)
			m.Buckets = append(m.Buckets, bm)
			w.markShadow(&m.Buckets[len(m.Buckets)-1])
		}
		return m.index[k]
	}
	for e := range w.Entities {
		ent := &w.Entities[e]
		if ent.NoTraffic {
			continue
		}
		m.traffic = append(m.traffic, e)
		parent := func(b int32, r int) {
			if !ent.Cascade {
				return
			}
			p := add(w.entityIdx[ent.Parent], r)
			m.Buckets[b].Parent = p
			if slices.ContainsFunc(m.Buckets[b].Modes, func(s modeSpan) bool { return s.Mode == "shadow" }) {
				// A child in shadow mode makes its parent's limits shadow
				// for its acquires.
				ls := slices.Clone(m.Buckets[p].Limits)
				for i := range ls {
					ls[i].Shadow = true
				}
				m.Buckets[p].Limits = ls
			}
		}
		var also []int32 // shared by the entity's buckets: read only
		for j := range w.Also {
			a := add(e, len(w.Resources)+j)
			parent(a, len(w.Resources)+j)
			also = append(also, a)
		}
		for r := range w.Resources {
			b := add(e, r)
			m.Buckets[b].Also = also
			parent(b, r)
		}
	}
	if w.Probe {
		m.probeBucket = int32(len(m.Buckets))
		m.Buckets = append(m.Buckets, bucketModel{Entity: "sim-probe", Resource: "probe", Limits: w.probeLimits, Parent: -1})
	}
	m.nres, m.picked = nr, len(w.Resources)
	m.TailStart = int64(w.Duration)
	m.CacheTTL = int64(orDefault(w.CacheTTL, time.Minute))
	// After the tail starts: in-flight requests end within a timeout, and
	// the clocks have slewed back (twice the skew), so no refill timestamp is
	// in the future.
	m.TailSettle = s.timeout + max(int64(time.Second), 2*int64(w.Skew))
	m.CheckDoublingCause = true
	return m
}

// calendarOf returns the windows of a quota limit as its fields describe
// them, computed here rather than by the limiter (nil for a rate). l is
// valid: its time zone loads.
func calendarOf(l limiter.Limit) *bucket.Calendar {
	if l.Window == "" || l.Window == "concurrent" {
		return nil
	}
	c := &bucket.Calendar{WeekStart: l.WeekStart, MonthDay: l.MonthDay}
	switch l.Window {
	case "day":
		c.Window = bucket.Day
	case "week":
		c.Window = bucket.Week
	case "month":
		c.Window = bucket.Month
	}
	if l.TimeZone != "" {
		c.Loc, _ = time.LoadLocation(l.TimeZone)
	}
	return c
}

// pick chooses the bucket of the next request (z: the client's Zipf
// generator, or nil).
func (w *Workload) pick(m *model, r *rand.Rand, z *rand.Zipf) int32 {
	var e int
	if z != nil {
		e = m.traffic[z.Uint64()]
	} else {
		e = m.traffic[r.IntN(len(m.traffic))]
	}
	res := 0
	if m.picked > 1 {
		res = r.IntN(m.picked)
	}
	return m.index[e*m.nres+res]
}

// amounts draws the tokens of one acquire.
func (w *Workload) amounts(r *rand.Rand) (a [MaxLimits]int64) {
	for i, c := range w.Consume {
		switch {
		case c.Max == 0:
		case c.Max == c.Min:
			a[i] = c.Min
		default:
			a[i] = c.Min + r.Int64N(c.Max-c.Min+1)
		}
	}
	return a
}

// meanArrivalOf is writer i's mean time between arrivals (ns), with Uneven.
func (w *Workload) meanArrivalOf(i int) float64 {
	if w.Uneven <= 0 {
		return float64(w.Writers) / w.Rate * 1e9
	}
	var sum float64
	for j := 0; j < w.Writers; j++ {
		sum += 1 / math.Pow(float64(j+1), w.Uneven)
	}
	share := 1 / math.Pow(float64(i+1), w.Uneven) / sum
	return 1e9 / (w.Rate * share)
}

// nextArrival moves an arrival time into the next active window of the
// duty cycle, if it falls outside one.
func (w *Workload) nextArrival(t int64, r *rand.Rand) int64 {
	if w.DutyPeriod <= 0 {
		return t
	}
	p, on := int64(w.DutyPeriod), int64(w.DutyOn)
	if pos := t % p; pos >= on {
		t += p - pos + r.Int64N(max(on/100, 1))
	}
	return t
}
