package memsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardlimit/limiter/store"
)

// OpKind is the kind of a store request.
type OpKind uint8

// The kinds of request memsim serves. The writes of
// [Store.WriteConcurrently] are requests of their own kinds (Put, Update,
// Delete).
const (
	OpGet           OpKind = iota // Store.Get
	OpBatchGet                    // Store.BatchGet
	OpPut                         // Store.Put, or a Put of WriteConcurrently
	OpUpdate                      // Store.Update, or an Update of WriteConcurrently
	OpDelete                      // Store.Delete, or a Delete of WriteConcurrently
	OpTransactWrite               // Store.TransactWrite
	OpQuery                       // Store.Query (Scan is never an Op)
	// NumOpKinds is the number of kinds, for arrays indexed by OpKind.
	NumOpKinds
)

var opKindNames = [NumOpKinds]string{"Get", "BatchGet", "Put", "Update", "Delete", "TransactWrite", "Query"}

// String returns the name of k, such as "Update".
func (k OpKind) String() string {
	if k < NumOpKinds {
		return opKindNames[k]
	}
	return "OpKind(" + strconv.Itoa(int(k)) + ")"
}

// IsWrite reports whether k changes items (Put, Update, Delete,
// TransactWrite).
func (k OpKind) IsWrite() bool {
	return k == OpPut || k == OpUpdate || k == OpDelete || k == OpTransactWrite
}

// Op describes one request, for [Injector]s and the [Hook].
type Op struct {
	// Kind is the request's kind.
	Kind OpKind
	// Keys are the table keys the request names, in request order: one for
	// Get, Put, Update and Delete, one per key for BatchGet, one per action
	// for TransactWrite. For a Query, Keys holds one Key whose PK is the
	// queried partition key value (of the table or of Index) and whose SK is
	// empty.
	Keys []store.Key
	// Index is the queried index of a Query ("" for the table).
	Index string
	// Time is the store clock's time when the request arrived.
	Time time.Time
}

// Fault is what an [Injector] does to a request.
type Fault uint8

// Faults. A fault that is applied "after apply" first lets the request run
// exactly as it would have (it may succeed, fail its condition, be
// throttled...), then replaces the answer with an error: the caller cannot
// tell whether the write happened.
const (
	// FaultNone lets the request through.
	FaultNone Fault = iota
	// FaultThrottle rejects the request with a *store.ThrottledError (the
	// store's throttle code) or, for a transaction, a
	// *store.TransactionCanceledError whose every reason is a throttle.
	// Nothing changes; nothing is consumed.
	FaultThrottle
	// Fault5xxBeforeApply answers with an InternalServerError without
	// applying: *store.UnavailableError with OutcomeUnknown true for writes
	// (a client cannot know a 5xx did not apply) and false for reads.
	Fault5xxBeforeApply
	// Fault5xxAfterApply applies the request, then answers with an
	// InternalServerError (as Fault5xxBeforeApply).
	Fault5xxAfterApply
	// FaultLostResponse applies the request, then loses the answer: the
	// caller gets a timeout, *store.UnavailableError wrapping
	// context.DeadlineExceeded, OutcomeUnknown true for writes.
	FaultLostResponse
	// FaultConflict rejects a single-item write with
	// store.ErrTransactionConflict (wrapped with the item's key), and a
	// transaction with a *store.TransactionCanceledError whose every reason
	// is TransactionConflict, as if another transaction held the items.
	// Reads are not affected (DynamoDB's reads do not conflict).
	FaultConflict
	numFaults
)

var faultNames = [numFaults]string{"none", "throttle", "5xx-before-apply", "5xx-after-apply", "lost-response", "conflict"}

// String returns the name of f, as fault plans print it.
func (f Fault) String() string {
	if f < numFaults {
		return faultNames[f]
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Decision is an injector's verdict on one request.
type Decision struct {
	// Fault is the fault to inject; FaultNone (the zero Fault) for none.
	Fault Fault
	// Delay is latency to add before the request is served. memsim never
	// sleeps by itself: it hands Delay to the sleeper set with
	// [WithSleeper], or ignores it when there is none.
	Delay time.Duration
	// By names the injector that decided (its String), for logs; set by
	// the combinators when empty.
	By string
}

// IsNone reports whether d neither injects a fault nor adds latency.
func (d Decision) IsNone() bool { return d.Fault == FaultNone && d.Delay == 0 }

// Injector decides, once per request and before the request is applied,
// whether memsim injects a fault. Implementations must be safe for
// concurrent use and deterministic: the same sequence of Ops must give the
// same sequence of Decisions. String describes the injector's configuration
// (a fault plan prints itself).
//
// The constructors below compose: [Chain], [OnOps], [OnKey], [During],
// [Probability], [ThrottleStorm], [Nth], [Always], [Latency]; a nil
// Injector given to one of them injects nothing.
type Injector interface {
	// Inject returns the decision on op; the zero Decision lets it
	// through untouched.
	Inject(op Op) Decision
	// String describes the injector's configuration, as a fault plan
	// prints it.
	fmt.Stringer
}

// Func adapts f into an Injector described as name; a nil f injects
// nothing.
func Func(name string, f func(Op) Decision) Injector { return funcInjector{name, f} }

type funcInjector struct {
	name string
	f    func(Op) Decision
}

func (f funcInjector) Inject(op Op) Decision {
	if f.f == nil {
		return Decision{}
	}
	return f.f(op)
}
func (f funcInjector) String() string { return f.name }

// Chain consults injs in order and returns the first decision with a fault.
// Latency (Decision.Delay) of the injectors consulted on the way adds up, so
// Chain(Latency(5*time.Millisecond), Probability(...)) delays every request
// and faults some. Injectors after the deciding one are not consulted for
// that request (their random streams do not advance).
func Chain(injs ...Injector) Injector {
	c := make(chain, len(injs))
	for i, inj := range injs {
		c[i] = orNone(inj)
	}
	return c
}

// orNone returns inj, or for a nil inj an injector that injects nothing:
// a nil Injector given to a constructor injects nothing.
func orNone(inj Injector) Injector {
	if inj == nil {
		return chain(nil)
	}
	return inj
}

type chain []Injector

func (c chain) Inject(op Op) Decision {
	var delay time.Duration
	for _, inj := range c {
		d := inj.Inject(op)
		delay += d.Delay
		if d.Fault != FaultNone {
			if d.By == "" {
				d.By = inj.String()
			}
			d.Delay = delay
			return d
		}
	}
	return Decision{Delay: delay}
}

func (c chain) String() string {
	parts := make([]string, len(c))
	for i, inj := range c {
		parts[i] = inj.String()
	}
	return "chain(" + strings.Join(parts, ", ") + ")"
}

// OnOps applies inj only to requests of the given kinds; other requests are
// not shown to inj.
func OnOps(kinds []OpKind, inj Injector) Injector {
	return onOps{kinds: slices.Clone(kinds), inj: orNone(inj)}
}

type onOps struct {
	kinds []OpKind
	inj   Injector
}

func (o onOps) Inject(op Op) Decision {
	if op.Kind >= NumOpKinds || !slices.Contains(o.kinds, op.Kind) {
		return Decision{}
	}
	return o.inj.Inject(op)
}

func (o onOps) String() string {
	names := make([]string, len(o.kinds))
	for i, k := range o.kinds {
		names[i] = k.String()
	}
	return "on[" + strings.Join(names, ",") + "](" + o.inj.String() + ")"
}

// OnKey applies inj only to requests that name an item of partition key pk
// (for a Query: that query the partition pk); other requests are not shown
// to inj.
func OnKey(pk string, inj Injector) Injector { return onKey{pk, orNone(inj)} }

type onKey struct {
	pk  string
	inj Injector
}

func (o onKey) Inject(op Op) Decision {
	for _, k := range op.Keys {
		if k.PK == o.pk {
			return o.inj.Inject(op)
		}
	}
	return Decision{}
}

func (o onKey) String() string { return "key[" + strconv.Quote(o.pk) + "](" + o.inj.String() + ")" }

// During applies inj only to requests that arrive in [from, to) by the
// store's clock; other requests are not shown to inj. String prints the
// window as offsets from [Epoch] when it starts at or after it.
func During(from, to time.Time, inj Injector) Injector { return during{from, to, orNone(inj)} }

type during struct {
	from, to time.Time
	inj      Injector
}

func (d during) Inject(op Op) Decision {
	if op.Time.Before(d.from) || !op.Time.Before(d.to) {
		return Decision{}
	}
	return d.inj.Inject(op)
}

func (d during) String() string {
	return "during[" + fmtInstant(d.from) + "," + fmtInstant(d.to) + "](" + d.inj.String() + ")"
}

func fmtInstant(t time.Time) string {
	if e := Epoch(); !t.Before(e) {
		return t.Sub(e).String()
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Probability injects fault into each request it sees with probability p,
// drawing from its own PCG source seeded with seed (never the global
// source): the same seed and the same requests give the same faults. A p of
// 0 or less injects nothing; 1 or more, every request.
func Probability(p float64, seed uint64, fault Fault) Injector {
	return &probability{p: p, seed: seed, fault: fault, rng: rand.New(rand.NewPCG(seed, seed^pcgStream))}
}

// pcgStream is the second PCG seed word derived from the user's seed.
const pcgStream = 0x9e3779b97f4a7c15

type probability struct {
	p     float64
	seed  uint64
	fault Fault
	mu    sync.Mutex
	rng   *rand.Rand
}

func (p *probability) Inject(Op) Decision {
	p.mu.Lock()
	x := p.rng.Float64()
	p.mu.Unlock()
	if x < p.p {
		return Decision{Fault: p.fault}
	}
	return Decision{}
}

func (p *probability) String() string {
	return "p=" + strconv.FormatFloat(p.p, 'g', -1, 64) + " seed=" + strconv.FormatUint(p.seed, 10) + " -> " + p.fault.String()
}

// ThrottleStorm throttles requests with probability p (seeded as in
// [Probability]) during storms of length `length` that start at start and
// recur every `every` (every <= 0: a single storm). Requests outside a storm
// are not shown to the random source.
func ThrottleStorm(start time.Time, every, length time.Duration, p float64, seed uint64) Injector {
	return &storm{start: start, every: every, length: length, prob: Probability(p, seed, FaultThrottle).(*probability)}
}

type storm struct {
	start         time.Time
	every, length time.Duration
	prob          *probability
}

func (s *storm) in(t time.Time) bool {
	if t.Before(s.start) {
		return false
	}
	off := t.Sub(s.start)
	if s.every > 0 {
		off %= s.every
	}
	return off < s.length
}

func (s *storm) Inject(op Op) Decision {
	if !s.in(op.Time) {
		return Decision{}
	}
	return s.prob.Inject(op)
}

func (s *storm) String() string {
	every := "once"
	if s.every > 0 {
		every = "every=" + s.every.String()
	}
	return "throttle-storm[start=" + fmtInstant(s.start) + " " + every + " for=" + s.length.String() +
		"](p=" + strconv.FormatFloat(s.prob.p, 'g', -1, 64) + " seed=" + strconv.FormatUint(s.prob.seed, 10) + ")"
}

// Nth injects fault into the n-th request it sees (counting from 1), and
// into no other (n 0: none). Combine with [OnOps] or [OnKey] to aim it: OnOps(
// []OpKind{OpUpdate}, Nth(3, FaultLostResponse)) loses the answer of the
// third Update.
func Nth(n uint64, fault Fault) Injector { return &nth{n: n, fault: fault} }

type nth struct {
	n     uint64
	fault Fault
	mu    sync.Mutex
	seen  uint64
}

func (x *nth) Inject(Op) Decision {
	x.mu.Lock()
	x.seen++
	hit := x.seen == x.n
	x.mu.Unlock()
	if hit {
		return Decision{Fault: x.fault}
	}
	return Decision{}
}

func (x *nth) String() string {
	return "nth(" + strconv.FormatUint(x.n, 10) + " -> " + x.fault.String() + ")"
}

// Always injects fault into every request it sees.
func Always(fault Fault) Injector { return always(fault) }

type always Fault

func (a always) Inject(Op) Decision { return Decision{Fault: Fault(a)} }
func (a always) String() string     { return "always(" + Fault(a).String() + ")" }

// Latency adds d to every request it sees, with no fault.
func Latency(d time.Duration) Injector { return latency(d) }

type latency time.Duration

func (l latency) Inject(Op) Decision { return Decision{Delay: time.Duration(l)} }
func (l latency) String() string     { return "latency(" + time.Duration(l).String() + ")" }
