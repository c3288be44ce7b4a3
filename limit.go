package limiter

import (
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/keys"
)

// Limit is one named token bucket: it holds up to Burst tokens and gains
// Refill tokens every Period, credited continuously. A new bucket starts
// full.
//
// With Window set, the limit is a calendar quota instead: Capacity tokens
// per day, week or month in a time zone, all of them back at each window's
// start (no refill in between; Refill and Period stay 0). A quota lives in
// the bucket beside its rates and is charged by the same write, all or
// nothing; docs/limiter.md says how a quota behaves.
//
// With Window "concurrent" and a TTL, the limit is a concurrency cap: at
// most Capacity leases in flight across all servers, each holding the
// slots its request's Consume names until Commit or Rollback gives them
// back, or until TTL has passed (a holder that died). It is charged by the
// acquire's write too.
//
// Amounts are whole tokens; inside, the limiter keeps millitokens (1/1000 of
// a token) so that refill at any rate is exact to the millitoken. The zero
// Limit is not valid: build limits with [PerSecond], [PerMinute], [PerHour],
// [PerDay] or by hand.
type Limit struct {
	// Name identifies the limit within a request, such as "rpm" or "tpm":
	// a letter, then up to 63 letters, digits, '_', '.' or '-'. "wcu" is
	// reserved.
	Name string
	// Capacity is the nominal size of the bucket, in tokens (at least 1);
	// for a quota, what each window holds.
	Capacity int64
	// Burst is the most tokens the bucket ever holds; 0 means Capacity.
	// It may not be below Capacity (a quota's is 0 or Capacity).
	Burst int64
	// Refill is the number of tokens credited per Period (at least 1; 0
	// for a quota).
	Refill int64
	// Period is the refill period: a whole number of milliseconds, at least
	// 1 ms and at most 366 days (0 for a quota).
	Period time.Duration

	// Window makes the limit a calendar quota: "day", "week" or "month";
	// or a concurrency cap: "concurrent" (with TTL). "" (the zero value)
	// is a rate.
	Window string
	// TimeZone is the IANA name of a quota's time zone, such as
	// "Europe/Paris", whose local midnights are its boundaries; "" is UTC.
	TimeZone string
	// WeekStart is the day a "week" quota's windows start (the zero value
	// is Sunday).
	WeekStart time.Weekday
	// MonthDay anchors a "month" quota's windows, a billing cycle: they
	// start at midnight of that day of each month, 1 to 31 (0 is 1), or
	// of the month's last day when it is shorter.
	MonthDay int
	// Shadow makes the limit watch without enforcing: an acquire it would
	// refuse is admitted, and the limit is not charged by it (its bucket
	// stays as enforcing would have left it); Event.WouldRefuse names it.
	// An acquire it admits charges it like any limit, and leases, Status
	// and usage report it. Operators set it on stored limits (admin) to try
	// a new limit on real traffic before enforcing it.
	Shadow bool
	// TTL is a concurrency cap's lease time to live, 1 s to 24 h: a
	// lease older than TTL no longer counts as in flight, and its slot
	// comes back on its own within TTL and a quarter more if no Commit or
	// Rollback gave it back (its holder died). 0 for every other limit.
	TTL time.Duration
}

// quota reports whether l is a calendar quota.
func (l Limit) quota() bool { return l.Window != "" && l.Window != concurrent }

// windows are the Window names, in bucket.Window order.
var windows = [...]string{bucket.Day: "day", bucket.Week: "week", bucket.Month: "month"}

// calendar returns a quota's windows, loading its time zone (an error
// names what does not load).
func (l Limit) calendar() (bucket.Calendar, error) {
	c := bucket.Calendar{WeekStart: l.WeekStart, MonthDay: l.MonthDay}
	for w, name := range windows {
		if name != "" && name == l.Window {
			c.Window = bucket.Window(w)
		}
	}
	if l.TimeZone != "" && l.TimeZone != "UTC" {
		loc, err := time.LoadLocation(l.TimeZone)
		if err != nil {
			return c, err
		}
		c.Loc = loc
	}
	return c, nil
}

// PerSecond returns a limit of n tokens a second, starting full.
func PerSecond(name string, n int64) Limit { return per(name, n, time.Second) }

// PerMinute returns a limit of n tokens a minute, starting full.
func PerMinute(name string, n int64) Limit { return per(name, n, time.Minute) }

// PerHour returns a limit of n tokens an hour, starting full.
func PerHour(name string, n int64) Limit { return per(name, n, time.Hour) }

// PerDay returns a limit of n tokens a day, starting full.
func PerDay(name string, n int64) Limit { return per(name, n, 24*time.Hour) }

func per(name string, n int64, d time.Duration) Limit {
	return Limit{Name: name, Capacity: n, Burst: n, Refill: n, Period: d}
}

// WithBurst returns l with its burst set to b tokens: the bucket may hold
// up to b tokens although it refills at l's rate.
func (l Limit) WithBurst(b int64) Limit {
	l.Burst = b
	return l
}

// EffectiveBurst returns the most tokens the bucket holds: Burst, or
// Capacity when Burst is 0.
func (l Limit) EffectiveBurst() int64 {
	if l.Burst == 0 {
		return l.Capacity
	}
	return l.Burst
}

// MaxTokens is the largest amount, in tokens, of any limit field or charge:
// 10^12 tokens. Beyond it the millitoken arithmetic could overflow.
const MaxTokens = bucket.MaxTokens / bucket.MilliPerToken

// engineLimit converts l to the engine's limit, in millitokens, with a
// quota's windows. l must be valid (its time zone loads).
func (l Limit) engineLimit() (engine.Limit, error) {
	if l.concurrency() {
		return l.capEngineLimit(), nil
	}
	if !l.quota() {
		return engine.Limit{Name: l.Name, Limit: l.bucketLimit(), Shadow: l.Shadow}, nil
	}
	cal, err := l.calendar()
	n := l.Capacity * bucket.MilliPerToken
	return engine.Limit{Name: l.Name, Limit: bucket.Limit{Capacity: n, Burst: n}, Calendar: cal, Shadow: l.Shadow}, err
}

// bucketLimit converts a rate l to millitokens. l must be valid.
func (l Limit) bucketLimit() bucket.Limit {
	return bucket.Limit{
		Capacity:     l.Capacity * bucket.MilliPerToken,
		Burst:        l.EffectiveBurst() * bucket.MilliPerToken,
		RefillAmount: l.Refill * bucket.MilliPerToken,
		RefillPeriod: l.Period.Milliseconds(),
	}
}

// wcuName is the hidden per-shard limit on write units (the write ceiling
// of one DynamoDB partition); no user limit may take its name.
const wcuName = keys.HiddenLimit
