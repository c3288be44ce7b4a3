package sim

import (
	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
)

// MaxLimits is the most limits a workload may configure per bucket.
const MaxLimits = 4

// MaxAlso is the most resources a workload's acquires charge besides the
// one picked (Workload.Also).
const MaxAlso = 3

// maxRoles is the most buckets one operation writes: its bucket, each of
// its Also buckets, and the cascade parent of each.
const maxRoles = 2 * (1 + MaxAlso)

// opKind is the kind of a recorded client operation.
type opKind uint8

// Recorded operations: the three calls of the limiter that change buckets.
const (
	opAcquire  opKind = iota + 1 // Limiter.Acquire
	opAdjust                     // Lease.Adjust
	opRollback                   // Lease.Rollback
)

var opKindNames = [...]string{"", "acquire", "adjust", "rollback"}

// String returns the operation's name.
func (k opKind) String() string {
	if int(k) < len(opKindNames) {
		return opKindNames[k]
	}
	return "op?"
}

// outcome is how a recorded operation ended, as its client saw it.
type outcome uint8

// Outcomes. outCut marks an operation still running when the simulation
// ended: like outUnavailable, its writes may or may not have applied.
const (
	outAdmitted    outcome = iota + 1 // acquire admitted; adjust or rollback succeeded
	outRejected                       // *limiter.RateLimitedError
	outUnavailable                    // *limiter.UnavailableError (or any other store failure)
	outInvalid                        // *limiter.ValidationError: a workload bug
	outCut                            // the simulation ended first
	outDisabled                       // limiter.ErrDisabled: the scope's mode is refuse
)

var outcomeNames = [...]string{"", "admitted", "rejected", "unavailable", "invalid", "cut", "disabled"}

// String returns the outcome's name.
func (o outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome?"
}

// operation is one finished client operation of the history, as the client saw
// it. Times are virtual nanoseconds since the simulation's epoch (true
// time, not the client's skewed clock). Amounts are whole tokens, indexed
// like [model.LimitNames].
type operation struct {
	// ID numbers the operations of a run from 1, in the order they
	// started.
	ID uint64
	// Client is the index of the client that ran it, from 0 (writers,
	// then the probe and actors).
	Client int32
	// Kind is the call, Outcome how it ended.
	Kind    opKind
	Outcome outcome
	// Bucket is the (entity, resource) bucket the operation addressed, an
	// index into Model.Buckets; a cascade also touches that bucket's Parent.
	Bucket int32
	// Start and End are when the call began and returned (virtual ns).
	Start, End int64
	// Amount is, for an acquire, the tokens asked for; for an adjust, the
	// delta; for a rollback, the refund the client expects (what the
	// acquire charged plus the adjusts that succeeded).
	Amount [MaxLimits]int64
	// UnkPos and UnkNeg bound what failed adjusts of the lease may have
	// added (UnkPos >= 0) or removed (UnkNeg <= 0): a rollback refunds them
	// too if they applied, and the client cannot know whether they did.
	UnkPos, UnkNeg [MaxLimits]int64
	// RetryAfter is the RateLimitedError's RetryAfter (ns) of a rejection,
	// and ByParent its Parent flag (the cascade parent's limits refused).
	RetryAfter int64
	ByParent   bool
	// Local is the rejection's Local flag: answered from the limiter's
	// last item of the bucket, without a store call.
	Local bool
	// Pooled: the operation was answered from (or into) the limiter's
	// reservation pool, without a store call for it. Reserved and Returned
	// are the tokens per limit its writes moved into a pool beyond its
	// charge, and back from an expired pool to the store.
	Pooled             bool
	Reserved, Returned [MaxLimits]int64
	// Unsettled is what a write of the operation whose outcome is unknown
	// may have moved between a pool and the store (+ taken, - returned).
	Unsettled [MaxLimits]int64
	// Shard is the shard of Bucket that the lease charged (an admitted
	// acquire and the adjusts and rollback of its lease), or -1.
	Shard int32
	// Retry describes the rejection this acquire retries after waiting its
	// RetryAfter, for the liveness check; nil for a first attempt.
	Retry *retryInfo
	// Cancelled: the acquire's caller cancelled its context, and the
	// limiter had to notice (before the call, or a store call met it).
	// FailedOpen: the acquire returned a fail-open lease (a store failure;
	// the outcome is then Unavailable). CtxErr: its error wraps
	// context.Canceled. UndoCancelled: a cascade's compensation write met
	// the caller's cancelled context (it must run on a context of its own).
	Cancelled, FailedOpen, CtxErr, UndoCancelled bool
	// Mode is the mode of the scope that governed an acquire
	// (limiter.Event.Mode): "admit" and "refuse" decide without a write,
	// "shadow" makes every limit shadow, "" for none; an adjust or rollback
	// of a lease admit mode gave has "admit".
	Mode string
	// Skipped marks, per role (see effects) and limit,
	// the shadow limits that would have refused an admitted acquire
	// (limiter.Event.WouldRefuse): the acquire did not charge them, and
	// its lease's adjusts and rollback carry the marks. ShadowRefused: a
	// refusal whose exceeded limits are all shadow (which must not happen).
	Skipped [maxRoles][MaxLimits]bool
	// ShadowRefused: see Skipped.
	ShadowRefused bool
	// Stray: an admitted acquire whose earlier try, refused by shadow
	// limits alone, could not refund another bucket it charged
	// (limiter.Event.Err): its buckets may keep that charge too.
	Stray bool
	// LeftOut marks the roles (see effects) of the resources an admit mode
	// left out of an acquire that charged the others
	// (limiter.Event.LeftOut), a resource's and its cascade parent's: the
	// acquire wrote neither, and its lease's adjusts and rollback carry
	// the marks.
	LeftOut [maxRoles]bool
}

// retryInfo links a retry to the rejection it follows.
type retryInfo struct {
	Rejection  uint64 // the rejected op's ID
	Start, End int64  // the rejection's start and end
	RetryAfter int64  // what it told the client to wait (ns)
	ByParent   bool   // the cascade parent refused
	// Local: the rejection was answered from the limiter's last item of the
	// bucket, which may be up to engine.LocalRefusalAge (a second) older than the rejection.
	Local bool
	// Snapshot holds the change counters of the op's buckets (its roles,
	// see effects) when the rejection started, and Own the changes the
	// rejection itself made (a cascade may charge and compensate): any
	// other change before the retry means someone else consumed.
	Snapshot, Own [maxRoles]uint64
	// Heard is when the client last heard of each of those buckets
	// before the rejection (checker.Heard; 0: never): a local
	// rejection judged them from images no newer.
	Heard [maxRoles]int64
}

// effects is what the change stream shows one operation did, accumulated
// by the scheduler, which applies requests one at a time and so knows
// which operation caused each stream record. Role 0 is the operation's
// bucket, role 1 its cascade parent, roles 2 and 3 its first Also bucket
// and that bucket's parent, and so on (see Model.roles).
type effects struct {
	// Net is the change of each limit's tc counter (millitokens), summed
	// over the bucket's shards.
	Net [maxRoles][MaxLimits]int64
	// LastApply is the virtual time of the last record on the bucket (0
	// when there was none).
	LastApply [maxRoles]int64
	// Changes counts the records on the bucket.
	Changes [maxRoles]uint64
}

// cause identifies the client operation whose request produced stream
// records.
type cause struct {
	// Op, Client, Kind and Bucket are the operation's (see the Op fields
	// of the same names; Op is Op.ID).
	Op     uint64
	Client int32
	Kind   opKind
	Bucket int32
	// Amount is the operation's Amount (for an acquire, the charge per
	// limit, which lets a checker tell a charge from a compensation).
	Amount [MaxLimits]int64
	// Start is when the operation started (virtual ns): what its writes
	// did, they did knowing the store as it was since then.
	Start int64
	// effects accumulates the operation's effects while it runs; nil once
	// it has ended (a request applied after its client gave up on it).
	Effects *effects
}

// model is what the checkers know of a workload: the buckets, their
// configured limits and cascade parents, and the clock skew, all taken from
// the workload's definition and never from the limiter.
type model struct {
	// Namespace is the workload's namespace.
	Namespace string
	// LimitNames are the workload's limit names; Op amounts are indexed
	// like them.
	LimitNames []string
	// Quotas are the calendars of the limits that are calendar quotas,
	// indexed like LimitNames (nil for a rate).
	Quotas []*bucket.Calendar
	// Buckets are every (entity, resource) bucket of the workload; Op.Bucket
	// and cause.Bucket index it.
	Buckets []bucketModel
	// SkewSpread is the largest difference between two clients' clocks
	// (ns): refill computed on a fast clock may credit that much early.
	SkewSpread int64
	// TailStart is the virtual time (ns) from which no fault is injected
	// and the clocks agree; liveness is judged only for rejections that
	// start at least TailSettle later.
	TailStart, TailSettle int64
	// Reservations: the limiters answer some acquires from reservation
	// pools (Op.Pooled) and move tokens between pools and the store
	// (Op.Reserved, Op.Returned).
	Reservations bool
	// CheckDoublingCause makes invariant 6 also require that a doubling
	// happened while one of the bucket's shards was really at its write
	// ceiling (see checker.checkDoublingCause).
	CheckDoublingCause bool
	// CacheTTL is the limiters' configuration cache TTL (ns): an acquire
	// may act on a mode that changed up to that long before it.
	CacheTTL int64

	// for the simulator: the bucket of each (entity, resource), the
	// entities with traffic, the probe's bucket
	index       []int32
	nres        int // resources per entity in index: Resources, then Also
	picked      int // the resources requests pick (Resources)
	traffic     []int
	probeBucket int32
}

// bucketModel is one (entity, resource) bucket of a workload.
type bucketModel struct {
	// Entity and Resource identify the bucket (Workload entity id and
	// resource name).
	Entity, Resource string
	// Limits are the limits in force for the bucket (per name, the
	// entity's stored limits, else the resource's, else the request's, as
	// the limiter combines them), with Shadow set on those that are shadow
	// at some time of the run.
	Limits []limiter.Limit
	// Parent is the index of the cascade parent's bucket for the same
	// resource, or -1.
	Parent int32
	// Also are the buckets of the entity on the resources every acquire of
	// this bucket also charges (Workload.Also).
	Also []int32
	// Modes are the bucket's modes over the run, in time order (nil: it
	// enforces throughout).
	Modes []modeSpan
}

// modeSpan is a bucket's mode from From until the next span.
type modeSpan struct {
	From int64  // virtual ns
	Mode string // "admit", "refuse", "shadow" or "" (enforce)
}

// roles returns the buckets an operation on bucket b writes, by role (see
// effects); -1 for a role it has not.
func (m *model) roles(b int32) (r [maxRoles]int32) {
	for i := range r {
		r[i] = -1
	}
	bm := &m.Buckets[b]
	r[0], r[1] = b, bm.Parent
	for j, a := range bm.Also {
		r[2+2*j], r[3+2*j] = a, m.Buckets[a].Parent
	}
	return r
}
