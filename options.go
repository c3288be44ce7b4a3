package limiter

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/shardlimit/limiter/internal/engine"
)

// Clock is where the limiter reads time. benbjohnson/clock's Clock
// satisfies it; the simulator passes its own virtual clock.
type Clock interface {
	// Now is the current time, read to the millisecond. The limiter calls
	// it from the goroutines of its callers, so it must be safe for
	// concurrent use.
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Policy says what Acquire does when the store fails (throttled past its
// retries, a server error, a timeout).
type Policy uint8

const (
	// PolicyDefault, in a Request, means "the limiter's policy".
	PolicyDefault Policy = iota
	// FailClosed returns an *UnavailableError. It is the limiter's default.
	FailClosed
	// FailOpen admits the request with a no-op lease (Lease.FailedOpen
	// reports true) and tells the observer. Rate-limit and validation errors
	// are never turned into a fail-open admission.
	FailOpen
)

// Option configures a Limiter.
type Option func(*config)

type config struct {
	namespace  string
	clock      Clock
	rand       *rand.Rand
	cacheTTL   time.Duration
	policy     Policy
	observer   Observer
	logger     *slog.Logger
	defaults   []Limit
	memorySize int
	engine     engine.Options
	noBreaker  bool
	// reserve: reservations on (nil: off); names empty: every limit
	reserve *reservations
}

// WithNamespace sets the namespace every key is prefixed with (default
// "default"): a letter or digit, then up to 63 letters, digits, '_', '.' or
// '-'. Limiters in different namespaces share nothing.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithClock sets the clock (default: the system clock).
func WithClock(c Clock) Option { return func(cfg *config) { cfg.clock = c } }

// WithRand sets the random source used to pick shards (default: a source
// seeded from the runtime). Simulations pass a seeded one.
func WithRand(r *rand.Rand) Option { return func(c *config) { c.rand = r } }

// WithCacheTTL sets how long entity configuration and stored limits are
// cached (default 60 s; 0 disables the cache).
func WithCacheTTL(d time.Duration) Option { return func(c *config) { c.cacheTTL = d } }

// WithDefaultLimits sets the limits of requests that carry none
// (Request.Limits empty): with them, callers name only what to consume.
// Limits stored for an entity or a resource override them by name, as they
// do a request's. New refuses invalid limits (see Limit.Validate), a name
// given twice, or more than 16.
func WithDefaultLimits(limits ...Limit) Option {
	return func(c *config) { c.defaults = append([]Limit(nil), limits...) }
}

// WithPolicy sets the unavailability policy (default FailClosed).
func WithPolicy(p Policy) Option { return func(c *config) { c.policy = p } }

// WithObserver sets the observer told of every acquire, adjust, rollback,
// status read, Commit that gives a concurrency cap's slots back, and Close
// (default: none; see Event).
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithLocalRefusals turns refusals answered locally on (the default) or
// off. On, a limiter that has just seen a bucket's item lacking the tokens
// a request needs (a refusal, or an admission that drained it) refuses
// the next requests that cannot fit yet without a store call, from that
// item refilled to now, for up to a second after it saw the item. The
// answer is the store's answer unless another process returned tokens
// (Rollback, a negative Adjust) in that second: those are missed until
// the item is read again. At a limit shared by other processes (they
// consume at least 90 % of its refill), the limiter counts on its share of
// the tokens it sees and of the refill, and refuses until that pays: a
// few tokens can then sit unused in the bucket while every process waits
// its turn (see docs/write-paths.md, "Local refusals"). Off, every
// request makes its write.
func WithLocalRefusals(on bool) Option {
	return func(c *config) { c.engine.NoLocalRefusals = !on }
}

// WithReservations turns reservations on, for the named limits (every
// limit when none is named). A process that acquires often from a bucket
// then takes, with one of its writes, about the next 100 ms of its own
// demand (at most an eighth of a shard's burst) and answers the acquires
// that follow from that pool in memory, without a store call: at a high
// rate, about a tenth of a write per acquire or less. A request is served
// from the pool only when every limit it consumes is one of the named ones
// (cascading entities never are). What the pool holds is consumed, as far
// as other processes can tell, until it goes back: its unused rest is
// returned when the pool's life (1 s) ends, at the process's next acquire
// of the bucket or at Close. The admission bound stays burst + rate ×
// window: the bucket does not refill over what pools hold (its cap is its
// burst less the hold), so while pools hold tokens the other processes see
// the burst lower by them (about 100 ms of the holders' demand). A process
// that crashes strands at most its pool; its hold lowers the cap until its
// generation (10 minutes) is reclaimed. See docs/reservations.md.
func WithReservations(limits ...string) Option {
	return func(c *config) {
		c.reserve = &reservations{names: append([]string(nil), limits...)}
	}
}

// reservations is the WithReservations setting.
type reservations struct{ names []string }

// covers reports whether every limit the plan consumes may be served from
// a pool.
func (r *reservations) covers(consume map[string]int64) bool {
	if r == nil {
		return false
	}
	if len(r.names) == 0 {
		return true
	}
	for name := range consume {
		found := false
		for _, n := range r.names {
			if n == name {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// WithMemorySize bounds how many buckets the limiter remembers (shard
// counts and the last item of each shard; default 65,536). Past it, the
// bucket least recently used is forgotten, which costs it one write that
// may fail, never a wrong answer.
func WithMemorySize(n int) Option { return func(c *config) { c.memorySize = n } }

// WithBreaker turns the circuit breaker on (the default) or off. On,
// after 5 store failures in a row (unavailable: a server
// error, a timeout, a refused connection; not throttling), the limiter
// stops calling the store for about a second (jittered) and answers every
// call as unavailable at once, without waiting out a deadline; then one
// call probes the store again. The unavailability policy applies to those
// answers as to any store failure: under fail-open they admit.
func WithBreaker(on bool) Option { return func(c *config) { c.noBreaker = !on } }

// WithLogger sets the logger (default: slog.Default()). The limiter logs
// at Debug per call (its path, round trips and units), at Info per shard
// doubling and at Warn per store failure.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Path names the write path an acquire took.
type Path = engine.Path

// Write paths, in the order an acquire may try them.
const (
	PathNone        = engine.PathNone
	PathSpeculative = engine.PathSpeculative // one conditional ADD, no read: the hot path
	PathFull        = engine.PathFull        // one blind write that resets a full bucket
	PathCreate      = engine.PathCreate      // the bucket did not exist
	PathNormal      = engine.PathNormal      // refill and consume under the rf lock
	PathRetry       = engine.PathRetry       // consume only, after losing the rf race
	PathReject      = engine.PathReject      // refused from the returned item, no further I/O
	PathFailOpen    = engine.PathFailOpen    // the store failed and the policy admitted anyway
	PathLocal       = engine.PathLocal       // refused from the limiter's last item of the bucket, no I/O at all
	PathPool        = engine.PathPool        // admitted from this process's reservation, no I/O at all
	// PathDouble is the doubling of the bucket's shard count (one
	// conditional write on shard 0, docs/sharding.md). An acquire reports
	// it when that write was its last: the store refused it (throttled, or
	// failed), so the acquire ended there, charging nothing. A doubling
	// that lands is followed by the acquire's charge write, whose path is
	// reported; Event.ShardDoublings counts it.
	PathDouble = engine.PathDouble
)

// Outcome is what a call ended with.
type Outcome uint8

// Outcomes of a call. An acquire ends Admitted, Rejected, Disabled,
// Unavailable or Invalid; an adjust, a rollback, a commit, a status read or
// a Close ends Succeeded, Unavailable or Invalid (they never reject). A call whose
// context ended counts as Unavailable.
const (
	Admitted Outcome = iota + 1
	Rejected
	Unavailable
	Invalid
	Succeeded
	// Disabled: refused because the scope's mode is refuse (ErrDisabled).
	Disabled
)

var outcomeNames = [...]string{"", "admitted", "rejected", "unavailable", "invalid", "succeeded", "disabled"}

// String returns the outcome's name.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Event describes one finished acquire, adjust, rollback, status read,
// Commit that gave a concurrency cap's slots back, or Close for an
// [Observer].
type Event struct {
	// Op is "acquire", "adjust", "rollback", "commit" (a Commit that gave
	// a concurrency cap's slots back with its one write; a Commit without
	// a cap makes no call and no event), "status" or "close".
	Op string
	// Entity is the request's entity; for an adjust, a rollback or a
	// commit, the lease's entity (not a cascade parent's); empty for Close.
	Entity string
	// Resource is the request's Resource, DefaultResource when it named
	// none (a request refused as invalid before its configuration was read
	// reports it as given); for an adjust, a rollback or a commit, the
	// lease's first resource (Request.Resource, not one of Also); empty
	// for Close.
	Resource string
	// Outcome is how the call ended (see Outcome for which outcomes each
	// Op can have).
	Outcome Outcome
	// Path is the path of the call's last store write, the one it
	// attempted last even when the store refused it (a throttle, a
	// failure): PathDouble when that was the doubling of the bucket's
	// shard count, which an acquire may make first, before any charge,
	// when its process's earlier doubling was throttled. Calls answered
	// without a write report how: PathReject, PathLocal, PathPool,
	// PathFailOpen (after the write that failed). PathNone when the call
	// made no write (a read that failed, an invalid request).
	Path Path
	// RoundTrips counts store calls; concurrent writes count once.
	RoundTrips int
	// Throttled counts store calls answered with a throttling error.
	Throttled int
	// ReadUnits and WriteUnits are the capacity the call's store requests
	// consumed, in DynamoDB's read and write capacity units (RCU, WCU; see
	// store.Capacity), index writes included, as the store reports them.
	ReadUnits, WriteUnits float64
	// ShardDoublings counts shard-count doublings this call performed.
	ShardDoublings int
	// Duration is how long the call took, by the limiter's clock (under a
	// simulated clock, simulated time).
	Duration time.Duration
	// Err is the error returned, if any. Under fail-open, when the store
	// failed and the call was admitted anyway, it is the store's error (the
	// cause), although the caller got no error. So is the failed
	// compensation of a try that shadow limits alone refused, when the
	// acquire was admitted on the next try: the charge it names may stand
	// besides the lease's (see UnavailableError.Refusal).
	Err error
	// Reserved is, per limit, the tokens this call's write took into the
	// limiter's reservation pool besides its charge, and Returned those it
	// gave back to the store from a pool whose life ended (see
	// WithReservations); both nil otherwise. Unsettled holds what a write
	// whose outcome is unknown may have moved (positive: taken into a
	// pool, negative: given back).
	Reserved, Returned, Unsettled map[string]int64
	// Mode is the mode of the scope that governed an acquire: "admit"
	// (admitted without a write: Outcome Admitted, Path PathNone, no store
	// call but the configuration's read), "refuse" (refused without a
	// write: Outcome Disabled) or "shadow" (every limit shadow); ""
	// otherwise. With Request.Also: "refuse" when any resource's mode
	// refused it, "admit" when every resource's admitted it, else
	// "shadow" when a resource charged is in shadow mode.
	Mode string
	// LeftOut names the resources of an acquire (Request.Resource, then
	// those of Request.Also in their order) that their scopes' admit mode
	// left out of the charge: an acquire charged on the others (Mode "" or
	// "shadow") leaves them untouched, one whose every resource is left out
	// has Mode "admit". nil when none.
	LeftOut []string
	// WouldRefuse names the shadow limits (see Limit.Shadow) that would
	// have refused an admitted acquire, the cascade parent's prefixed with
	// "parent:", those of a resource of Request.Also written
	// "RESOURCE/NAME" ("parent:all-models/rpm"); they were not charged by
	// it. nil when none.
	WouldRefuse []string
	// BreakerOpen is true when the call was answered as unavailable
	// without a store call because the circuit breaker is open (see
	// WithBreaker).
	BreakerOpen bool
}

// Observer is told of every finished call. It must be fast and safe for
// concurrent use; it is called on the caller's goroutine.
type Observer interface {
	// Observe is called once per finished call, after its last store
	// call and before the call returns.
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e); a nil f observes nothing.
func (f ObserverFunc) Observe(e Event) {
	if f != nil {
		f(e)
	}
}
