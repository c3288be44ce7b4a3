package memsim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
)

// Store is DynamoDB in memory: one table with its secondary indexes,
// implementing [store.Store]. It is safe for concurrent use and
// deterministic: given the same requests in the same order, with the same
// clock readings and fault plan, it gives the same answers, stream and
// counters. The zero Store is not usable: create one with New (the
// requests of a nil or zero Store answer a ValidationError).
type Store struct {
	schema       schema.Schema
	isKey        func(string) bool
	clock        Clock
	wcuRate      int64 // milli-units per second per partition; 0: unlimited
	rcuRate      int64
	throttleCode string
	faults       Injector
	hook         Hook
	sleeper      func(context.Context, time.Duration) error
	stream       bool
	shared       bool // WithSharedResults
	intercept    bool // faults != nil || hook != nil

	mu      sync.Mutex
	items   map[store.Key]entry
	byPK    map[string]map[string]struct{} // table partition key -> sort keys
	indexes []indexState                   // parallel to schema.Indexes
	parts   map[partKey]*partition
	records []Record
	lastSeq uint64
	tokens  map[string]tokenEntry
	totals  Totals
	tokenGC int
}

// entry is a stored item and its size. The item is never modified after
// it is stored (copy on write), so it can be shared with stream records; a
// write stores a new entry.
type entry struct {
	item store.Item
	size int
}

type indexState struct {
	ix schema.Index
	// members maps an index partition key value to the table keys of the
	// items in that index partition.
	members map[string]map[store.Key]struct{}
}

// Hook is called once per request before it is evaluated, outside every
// lock of the store, so that a test can act first: for instance perform a
// competing write that makes this request lose an optimistic-lock race.
// Requests the hook makes with the context it was given do not call the
// hook again.
type Hook func(ctx context.Context, op Op)

// Option configures a [Store].
type Option func(*Store)

// withSchema sets the table's key attributes and indexes (default
// schema.Default(), the limiter's layout), for the tests of other layouts.
// The schema must name both a partition key and a sort key.
func withSchema(sc schema.Schema) Option {
	return func(s *Store) {
		sc.Indexes = slices.Clone(sc.Indexes)
		s.schema = sc
	}
}

// WithClock sets the store's clock (default: the wall clock, as a limiter
// made without a clock reads it, so that partitions refill as time
// passes). memsim reads time from nothing else. Tests and simulations
// that need time to move only when told pass a [ManualClock], shared with
// the limiter: one clock for both. A nil c is the wall clock.
func WithClock(c Clock) Option { return func(s *Store) { s.clock = c } }

// WithPartitionLimits sets the ceiling of every partition (default 1000
// write units and 3000 read units per second); 0 makes that kind unlimited.
// Rates above 1,000,000 units per second are not supported: New panics on
// a rate that is negative, NaN or above.
func WithPartitionLimits(wcuPerSec, rcuPerSec float64) Option {
	return func(s *Store) {
		s.wcuRate = rateOf("write", wcuPerSec)
		s.rcuRate = rateOf("read", rcuPerSec)
	}
}

func rateOf(what string, perSec float64) int64 {
	if math.IsNaN(perSec) || perSec < 0 || perSec > maxRate {
		panic(fmt.Sprintf("memsim: %s limit %v per second out of range [0, %d]", what, perSec, maxRate))
	}
	return int64(math.Round(perSec * 1000))
}

// WithThrottleCode sets the exception a throttled request carries: one of
// store.ThrottleProvisionedThroughputExceeded (default),
// store.ThrottleThrottling or store.ThrottleRequestLimitExceeded. Inside a
// transaction the cancellation reason is ProvisionedThroughputExceeded for
// the first and ThrottlingError for the others. New panics on any other
// code.
func WithThrottleCode(code string) Option {
	return func(s *Store) {
		switch code {
		case store.ThrottleProvisionedThroughputExceeded, store.ThrottleThrottling, store.ThrottleRequestLimitExceeded:
			s.throttleCode = code
		default:
			panic("memsim: unknown throttle code " + code)
		}
	}
}

// WithFaults sets the fault plan, consulted once per request before it is
// applied (default, and a nil inj: none).
func WithFaults(inj Injector) Option { return func(s *Store) { s.faults = inj } }

// WithStream turns the change stream on (the default) or off.
func WithStream(on bool) Option { return func(s *Store) { s.stream = on } }

// WithSharedResults makes the items a write hands back (Attributes,
// ConditionFailedError.Item, CancellationReason.Item) and the images of
// [Store.Stream] the store's own immutable maps instead of copies. It saves
// a copy of the item per write (the ALL_NEW of every acquire); the caller
// must then never modify them. Off by default. Get, BatchGet, Query, Items
// and Peek always return copies.
func WithSharedResults(on bool) Option { return func(s *Store) { s.shared = on } }

// WithHook sets a [Hook] called before every request (default, and a nil
// h: none).
func WithHook(h Hook) Option { return func(s *Store) { s.hook = h } }

// WithSleeper sets the function memsim hands injected latency
// ([Decision.Delay]) to, before it serves the request. A simulator passes
// one that advances virtual time; an error (a cancelled context) fails the
// request with a *store.UnavailableError without applying it. By default
// there is none and injected latency is ignored: memsim never sleeps on its
// own.
func WithSleeper(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Store) { s.sleeper = sleep }
}

// New returns an empty store. A nil option is skipped. New panics on an
// option out of range (WithPartitionLimits, WithThrottleCode): a test's
// configuration error, found when the test starts.
func New(opts ...Option) *Store {
	s := &Store{
		schema:       schema.Default(),
		wcuRate:      1000 * 1000,
		rcuRate:      3000 * 1000,
		throttleCode: store.ThrottleProvisionedThroughputExceeded,
		stream:       true,
		items:        make(map[store.Key]entry),
		byPK:         make(map[string]map[string]struct{}),
		parts:        make(map[partKey]*partition),
		tokens:       make(map[string]tokenEntry),
	}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	if s.schema.PartitionKey == "" || s.schema.SortKey == "" || s.schema.PartitionKey == s.schema.SortKey {
		panic("memsim: the schema needs distinct partition and sort key attributes")
	}
	for i, ix := range s.schema.Indexes {
		if ix.Name == "" || ix.PartitionKey == "" || ix.SortKey == "" {
			panic(fmt.Sprintf("memsim: index %d needs a name, a partition key and a sort key", i))
		}
		for _, prev := range s.schema.Indexes[:i] {
			if prev.Name == ix.Name {
				panic("memsim: duplicate index " + ix.Name)
			}
		}
		s.indexes = append(s.indexes, indexState{ix: ix, members: make(map[string]map[store.Key]struct{})})
	}
	s.isKey = s.schema.IsKeyAttribute
	s.intercept = s.faults != nil || s.hook != nil
	return s
}

var _ store.Store = (*Store)(nil)

// Clock returns the store's clock.
func (s *Store) Clock() Clock {
	if s == nil {
		return nil
	}
	return s.clock
}

// Items returns a copy of every item, sorted by key (partition key, then
// sort key). It consumes nothing and is not seen by injectors or the hook.
func (s *Store) Items() []store.Item {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	keys := slices.SortedFunc(maps.Keys(s.items), compareKeys)
	out := make([]store.Item, len(keys))
	for i, k := range keys {
		out[i] = maps.Clone(s.items[k].item)
	}
	s.mu.Unlock()
	return out
}

// Peek returns a copy of the item at key, or nil. It consumes nothing and
// is not seen by injectors or the hook.
func (s *Store) Peek(key store.Key) store.Item {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.items[key].item)
}

// Len returns the number of items.
func (s *Store) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

func compareKeys(a, b store.Key) int { return cmp.Or(cmp.Compare(a.PK, b.PK), cmp.Compare(a.SK, b.SK)) }

// Totals counts what the store has served since it was created.
type Totals struct {
	// Requests counts every call (each write of WriteConcurrently is one).
	Requests uint64
	// Throttles counts requests throttled by a partition ceiling or by an
	// injected throttle.
	Throttles uint64
	// Faults counts injected faults other than throttles (5xx, lost
	// responses, conflicts).
	Faults uint64
	// ConditionFailures counts failed conditions, including transactions
	// cancelled by one.
	ConditionFailures uint64
	// ValidationErrors counts rejected malformed requests.
	ValidationErrors uint64
	// Consumed is all capacity consumed: reads, writes, index writes
	// (including requests whose answer was then lost to an injected
	// fault: the server did the work).
	Consumed store.Capacity
	// StreamRecords counts change stream records emitted.
	StreamRecords uint64
	// InjectedDelay sums the latency injected by the fault plan.
	InjectedDelay time.Duration
	// Ops breaks the request counters down by kind.
	Ops [NumOpKinds]OpTotals
}

// OpTotals counts the requests of one kind; each field counts as the
// field of the same name of Totals does.
type OpTotals struct {
	Requests, Throttles, Faults, ConditionFailures, ValidationErrors uint64
	// Consumed is the capacity the kind's requests consumed.
	Consumed store.Capacity
}

// Totals returns the store's counters.
func (s *Store) Totals() Totals {
	if s == nil {
		return Totals{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals
}

type outcome uint8

const (
	outOK outcome = iota
	outThrottle
	outFault
	outCondition
	outValidation
	outOther
)

// count records one finished request. Call with s.mu held.
func (s *Store) count(kind OpKind, out outcome, c store.Capacity) {
	t := &s.totals
	o := &t.Ops[kind]
	t.Requests++
	o.Requests++
	switch out {
	case outThrottle:
		t.Throttles++
		o.Throttles++
	case outFault:
		t.Faults++
		o.Faults++
	case outCondition:
		t.ConditionFailures++
		o.ConditionFailures++
	case outValidation:
		t.ValidationErrors++
		o.ValidationErrors++
	}
	if c != (store.Capacity{}) {
		t.Consumed = t.Consumed.Add(c)
		o.Consumed = o.Consumed.Add(c)
	}
}

func (s *Store) countLocked(kind OpKind, out outcome, c store.Capacity) {
	s.mu.Lock()
	s.count(kind, out, c)
	s.mu.Unlock()
}

// Errors memsim's injected faults carry in *store.UnavailableError.Err.
var (
	// ErrInternalServerError is the cause of an injected 5xx.
	ErrInternalServerError = errors.New("InternalServerError: internal server error (injected by memsim)")
	// ErrResponseLost is the cause of an injected lost response; it wraps
	// context.DeadlineExceeded.
	ErrResponseLost = fmt.Errorf("memsim: response lost (injected timeout): %w", context.DeadlineExceeded)
)

type hookKey struct{}

// begin runs the hook and the fault plan for a request, outside the lock.
// keys is called only when there is a hook or a fault plan.
func (s *Store) begin(ctx context.Context, kind OpKind, index string, keys func() []store.Key) (Decision, error) {
	op := Op{Kind: kind, Keys: keys(), Index: index, Time: s.clock.Now()}
	if s.hook != nil && ctx.Value(hookKey{}) == nil {
		s.hook(context.WithValue(ctx, hookKey{}, true), op)
	}
	if s.faults == nil {
		return Decision{}, nil
	}
	d := s.faults.Inject(op)
	if d.Delay > 0 {
		s.mu.Lock()
		s.totals.InjectedDelay += d.Delay
		s.mu.Unlock()
		if s.sleeper != nil {
			if err := s.sleeper(ctx, d.Delay); err != nil {
				s.countLocked(kind, outFault, store.Capacity{})
				return d, &store.UnavailableError{Op: kind.String(), OutcomeUnknown: kind.IsWrite(), Err: err}
			}
		}
	}
	return d, nil
}

// start is begin then early, for a single-item request (key is the one a
// throttle or conflict names), when there is a hook or a fault plan.
func (s *Store) start(ctx context.Context, kind OpKind, index string, key store.Key, keys func() []store.Key) (Decision, error) {
	if !s.intercept {
		return Decision{}, nil
	}
	d, err := s.begin(ctx, kind, index, keys)
	if err == nil {
		err = s.early(kind, d, key)
	}
	return d, err
}

// early answers the faults that stop a request before it is applied, and
// returns nil for the others.
func (s *Store) early(kind OpKind, d Decision, key store.Key) error {
	switch d.Fault {
	case FaultThrottle:
		s.countLocked(kind, outThrottle, store.Capacity{})
		return &store.ThrottledError{Code: s.throttleCode, Reason: tableReason(kind.IsWrite()), Key: key}
	case Fault5xxBeforeApply:
		s.countLocked(kind, outFault, store.Capacity{})
		return &store.UnavailableError{Op: kind.String(), OutcomeUnknown: kind.IsWrite(), Err: ErrInternalServerError}
	case FaultConflict:
		if kind == OpPut || kind == OpUpdate || kind == OpDelete {
			s.countLocked(kind, outFault, store.Capacity{})
			return fmt.Errorf("%w on %s", store.ErrTransactionConflict, key)
		}
	}
	return nil
}

// late replaces the answer of an applied request for the faults that strike
// after apply. Call without s.mu.
func (s *Store) late(kind OpKind, d Decision) error {
	var cause error
	switch d.Fault {
	case Fault5xxAfterApply:
		cause = ErrInternalServerError
	case FaultLostResponse:
		cause = ErrResponseLost
	default:
		return nil
	}
	s.mu.Lock()
	s.totals.Faults++
	s.totals.Ops[kind].Faults++
	s.mu.Unlock()
	return &store.UnavailableError{Op: kind.String(), OutcomeUnknown: kind.IsWrite(), Err: cause}
}

func tableReason(write bool) string {
	if write {
		return "TableWriteKeyRangeThroughputExceeded"
	}
	return "TableReadKeyRangeThroughputExceeded"
}

func indexReason(write bool) string {
	if write {
		return "IndexWriteKeyRangeThroughputExceeded"
	}
	return "IndexReadKeyRangeThroughputExceeded"
}

// usable returns a ValidationError for a nil or zero Store (not made by
// New) or a nil ctx.
func (s *Store) usable(ctx context.Context) error {
	switch {
	case s.zero():
		return verr("memsim: the Store is nil or zero: create one with New")
	case ctx == nil:
		return verr("memsim: ctx is nil: pass a context (context.Background() when there is none)")
	}
	return nil
}

// zero reports whether s is nil or the zero Store.
func (s *Store) zero() bool { return s == nil || s.items == nil }

// enter is what every request of kind checks first: a usable Store and
// ctx (see usable), and a context not done, else the error of a request
// whose context is done before it is sent: nothing was applied, and the
// caller knows it.
func (s *Store) enter(ctx context.Context, kind OpKind) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		s.countLocked(kind, outOther, store.Capacity{})
		return &store.UnavailableError{Op: kind.String(), Err: err}
	}
	return nil
}
