package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// The audit trail. Every configuration change made through an Admin
// (PutEntity, DeleteEntity, PutLimits, DeleteLimits, SetMode, ResetBucket) writes
// an audit record in the same transaction as the change: both happen or
// neither (a top-up writes its record first: see TopUp). A call that
// would change nothing (the same entity or limits again, deleting what
// does not exist) writes nothing and records nothing.

// AuditAction names the kind of a configuration change.
type AuditAction string

// Audit actions, one per Admin method that changes configuration.
const (
	AuditPutEntity    AuditAction = "entity.put"    // Admin.PutEntity
	AuditDeleteEntity AuditAction = "entity.delete" // Admin.DeleteEntity
	AuditPutLimits    AuditAction = "limits.put"    // Admin.PutLimits
	AuditDeleteLimits AuditAction = "limits.delete" // Admin.DeleteLimits
	AuditResetBucket  AuditAction = "bucket.reset"  // Admin.ResetBucket
	AuditTopUp        AuditAction = "bucket.top-up" // Admin.TopUp
	AuditSetMode      AuditAction = "scope.mode"    // Admin.SetMode
)

// AuditRecord is one configuration change.
type AuditRecord struct {
	// At is when the change was written (the limiter's clock), to the
	// millisecond.
	At time.Time
	// Principal is who made it: see ContextWithPrincipal.
	Principal string
	// Action is the kind of change; it tells which fields of Before and
	// After are set (see AuditState).
	Action AuditAction
	// Scope is what the change addressed: the entity (entity changes), the
	// entity and resource (bucket resets, an entity's limits on a
	// resource), the entity alone (its limits on every resource), or the
	// resource alone (a resource's limits for every entity).
	Scope Scope
	// Before and After are the state the change found and left; nil when
	// there was nothing (a creation, a deletion).
	Before, After *AuditState
	// Pending and Missed are a top-up's shards, in order, still to get
	// their share (ResumeTopUps grants them) and those that could not (the
	// shard item or one of the limits was gone). The others have theirs.
	Pending, Missed []int
}

// AuditState is the configuration one side of an [AuditRecord] describes.
// Which fields are set depends on the action: Parent and Cascade for
// entity changes, Limits and Mode for changes to a scope's limits or mode
// (they share an item: each record shows both), Shards for a bucket
// reset, Tokens and Shards for a top-up.
type AuditState struct {
	// Parent and Cascade are the entity's (see Entity).
	Parent  string
	Cascade bool
	// Limits are the scope's stored limits; nil when it stored none.
	Limits []limiter.Limit
	// Mode is the scope's mode; ModeEnforce when it had none.
	Mode Mode
	// Shards is the shard count of a bucket that was reset, or the number
	// of shard items a top-up is spread over.
	Shards int
	// Tokens is a top-up's grant: whole tokens per limit name.
	Tokens map[string]int64
	// Malformed is set, with the reason, when the stored item could not be
	// read (a change may overwrite such an item).
	Malformed string
}

// PrincipalEnv is the environment variable an Admin takes the principal of
// its audit records from when neither the context nor WithDefaultPrincipal
// names one. Without it, USER is used, and then "unknown".
const PrincipalEnv = "LIMITER_PRINCIPAL"

// DefaultAuditRetention is how long audit records are kept by default: 90
// days after the change. DynamoDB deletes them after that (time to live,
// usually within a few days of expiry).
const DefaultAuditRetention = 90 * 24 * time.Hour

type principalKey struct{}

// ContextWithPrincipal returns a context whose configuration changes are
// recorded as made by principal (a user name, a service, a ticket): 1 to
// 256 bytes of UTF-8 without control characters. It wins over
// WithDefaultPrincipal and the environment. A nil ctx gives a nil context,
// which the limiter's methods refuse with a ValidationError naming ctx.
func ContextWithPrincipal(ctx context.Context, principal string) context.Context {
	if ctx == nil {
		return nil // refused, naming ctx, by the call it is passed to
	}
	return context.WithValue(ctx, principalKey{}, principal)
}

// WithDefaultPrincipal sets the principal of the audit records of changes
// whose context names none (see ContextWithPrincipal). The default is the
// environment: $LIMITER_PRINCIPAL, else $USER, else "unknown".
func WithDefaultPrincipal(p string) Option { return func(a *Admin) { a.principal = p } }

// WithAuditRetention sets how long audit records are kept (default
// DefaultAuditRetention, 90 days): their time to live is the change time
// plus d, so the table must have time to live enabled (dynamo.CreateTable
// does it). 0 keeps them forever; New refuses a negative d.
func WithAuditRetention(d time.Duration) Option { return func(a *Admin) { a.retention = d } }

// principalOf returns who the changes made with ctx are recorded as.
func (a *Admin) principalOf(ctx context.Context) (string, error) {
	p, _ := ctx.Value(principalKey{}).(string)
	p = cmp.Or(p, a.principal, os.Getenv(PrincipalEnv), os.Getenv("USER"), "unknown")
	if len(p) > 256 || !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return "", invalid("principal", "%q must be 1 to 256 bytes of UTF-8 without control characters", p)
	}
	return p, nil
}

// Audit item attributes (the keys are in internal/keys).
const (
	attrAuditAt        = "at"
	attrAuditPrincipal = "principal"
	attrAuditAction    = "action"
	attrAuditBefore    = "before"
	attrAuditAfter     = "after"
)

// configChange is one audited configuration write: the item at key
// becomes next (nil deletes it).
type configChange struct {
	op     string // for errors: "put entity", ...
	action AuditAction
	scope  Scope
	key    store.Key
	next   store.Item
	// edit, when set, makes next from the item as it stands (a scope's
	// limits and mode share an item: each change keeps the other).
	edit func(old store.Item) store.Item
	// state describes an item of this kind (nil: none) for the record.
	state func(store.Item) *AuditState
}

// maxChangeAttempts bounds the optimistic retries of a configuration write
// whose item another writer changed between the read and the write.
const maxChangeAttempts = 8

// applyChange reads the item as it stands, then writes the change and its
// audit record in one transaction, conditional on the item being still as
// read, so the record's Before is exact. It retries (with the item the
// failed condition returned) when another writer got there first.
func (a *Admin) applyChange(ctx context.Context, c configChange) error {
	who, err := a.principalOf(ctx)
	if err != nil {
		return err
	}
	out, err := a.st.Get(ctx, store.GetInput{Key: c.key, ConsistentRead: true})
	if err != nil {
		return storeErr(ctx, c.op, err)
	}
	old := out.Item
	for attempt := 0; attempt < maxChangeAttempts; attempt++ {
		if c.edit != nil {
			c.next = c.edit(old)
		}
		if sameItem(old, c.next) {
			return nil // nothing to change, nothing to record
		}
		act := store.Write{}
		cond, err := unchanged(old, c.next)
		if err != nil {
			return err
		}
		if c.next == nil {
			act.Delete = &store.DeleteInput{Key: c.key, Expr: cond, ReturnOldOnConditionFailure: true}
		} else {
			act.Put = &store.PutInput{Item: c.next, Expr: cond, ReturnOldOnConditionFailure: true}
		}
		rec := a.auditItem(who, c.action, c.scope, c.state(old), c.state(c.next), attempt)
		_, err = a.st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{act, rec}})
		if err == nil {
			return nil
		}
		var tc *store.TransactionCanceledError
		if !errors.As(err, &tc) || len(tc.Reasons) != 2 || !retryable(tc) {
			return storeErr(ctx, c.op, err)
		}
		if tc.Reasons[0].Code == store.ReasonConditionalCheckFailed {
			old = tc.Reasons[0].Item // changed meanwhile: record against what is there now
		}
	}
	return storeErr(ctx, c.op, fmt.Errorf("limiter: %s: the item changed under every one of %d attempts: %w",
		c.op, maxChangeAttempts, store.ErrTransactionConflict))
}

// retryable reports whether a cancelled change may succeed when tried
// again: a lost race (a failed condition, a conflict), nothing else.
func retryable(tc *store.TransactionCanceledError) bool {
	for _, r := range tc.Reasons {
		switch r.Code {
		case store.ReasonNone, store.ReasonConditionalCheckFailed, store.ReasonTransactionConflict:
		default:
			return false
		}
	}
	return true
}

// sameItem reports whether a and b hold the same attributes (nil: no item).
func sameItem(a, b store.Item) bool {
	return (a == nil) == (b == nil) && maps.EqualFunc(a, b, store.Value.Equal)
}

// unchanged is the condition that the item is still old: absent when old
// is nil, else every attribute of old equal and every other attribute next
// writes absent. Names are sorted, so the expression is deterministic.
// It fails, with a *store.ValidationError, only on an item with an empty
// attribute name.
func unchanged(old, next store.Item) (store.Expr, error) {
	if old == nil {
		return keys.IfAbsent(), nil
	}
	both := maps.Clone(old) // old's names and next's: only the names are used
	maps.Copy(both, next)
	var conds []store.Condition
	for _, k := range slices.Sorted(maps.Keys(both)) {
		if k == store.AttrPK || k == store.AttrSK {
			continue
		}
		if v, ok := old[k]; ok {
			conds = append(conds, store.Name(k).Equal(v))
		} else {
			conds = append(conds, store.Name(k).NotExists())
		}
	}
	if len(conds) == 0 {
		conds = append(conds, store.Name(store.AttrPK).Exists())
	}
	return store.Build(store.Update{}, store.And(conds...))
}

// auditItem is the Put of one audit record. Its sort key holds the time
// and a hash of the record (attempt included), so records of one
// millisecond do not collide; the Put is conditional on the key being
// new all the same.
func (a *Admin) auditItem(who string, action AuditAction, s Scope, before, after *AuditState, attempt int) store.Write {
	now := a.clock.Now()
	b, af := encodeState(before), encodeState(after)
	h := fnv.New64a()
	for _, part := range []string{who, string(action), s.Entity, s.Resource, b, af, strconv.Itoa(attempt)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	it := store.Item{
		store.AttrPK:       store.Str(keys.AuditPK(a.ns, s.Entity, s.Resource)),
		store.AttrSK:       store.Str(keys.AuditSK(now, h.Sum64())),
		attrAuditAt:        store.Int(now.UnixMilli()),
		attrAuditPrincipal: store.Str(who),
		attrAuditAction:    store.Str(string(action)),
	}
	if s.Entity != "" {
		it[keys.AttrEntity] = store.Str(s.Entity)
	}
	if s.Resource != "" {
		it[keys.AttrResource] = store.Str(s.Resource)
	}
	if b != "" {
		it[attrAuditBefore] = store.Str(b)
	}
	if af != "" {
		it[attrAuditAfter] = store.Str(af)
	}
	if r := a.retention; r > 0 {
		it[store.AttrTTL] = store.Int(now.Add(r).Unix())
	}
	return store.Write{Put: &store.PutInput{Item: it, Expr: keys.IfAbsent()}}
}

// stateJSON is the stored form of an AuditState: JSON, so that tools
// reading the table directly can use it too.
type stateJSON struct {
	Parent    string            `json:"parent,omitempty"`
	Cascade   bool              `json:"cascade,omitempty"`
	Limits    []storedLimitJSON `json:"limits,omitempty"`
	Shards    int               `json:"shards,omitempty"`
	Tokens    map[string]int64  `json:"tokens,omitempty"`
	Mode      string            `json:"mode,omitempty"`
	Malformed string            `json:"malformed,omitempty"`
}

type storedLimitJSON struct {
	Name     string `json:"name"`
	Capacity int64  `json:"capacity"`
	Burst    int64  `json:"burst"`
	Refill   int64  `json:"refill"`
	PeriodMs int64  `json:"period_ms"`
	// A calendar quota's (see limiter.Limit).
	Window    string `json:"window,omitempty"`
	TimeZone  string `json:"time_zone,omitempty"`
	WeekStart int    `json:"week_start,omitempty"`
	MonthDay  int    `json:"month_day,omitempty"`
	Shadow    bool   `json:"shadow,omitempty"`
	// A concurrency cap's time to live (ms).
	TTLMs int64 `json:"ttl_ms,omitempty"`
}

func encodeState(s *AuditState) string {
	if s == nil {
		return ""
	}
	j := stateJSON{Parent: s.Parent, Cascade: s.Cascade, Shards: s.Shards, Tokens: s.Tokens, Mode: string(s.Mode), Malformed: s.Malformed}
	for _, x := range s.Limits {
		j.Limits = append(j.Limits, storedLimitJSON{x.Name, x.Capacity, x.EffectiveBurst(), x.Refill, x.Period.Milliseconds(),
			x.Window, x.TimeZone, int(x.WeekStart), x.MonthDay, x.Shadow, x.TTL.Milliseconds()})
	}
	b, _ := json.Marshal(j) // plain strings, numbers and bools: cannot fail
	return string(b)
}

func decodeState(s string, ok bool) (*AuditState, error) {
	if !ok {
		return nil, nil
	}
	var j stateJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return nil, err
	}
	st := &AuditState{Parent: j.Parent, Cascade: j.Cascade, Shards: j.Shards, Tokens: j.Tokens, Mode: Mode(j.Mode), Malformed: j.Malformed}
	for _, x := range j.Limits {
		st.Limits = append(st.Limits, limiter.Limit{Name: x.Name, Capacity: x.Capacity, Burst: x.Burst, Refill: x.Refill,
			Period: time.Duration(x.PeriodMs) * time.Millisecond,
			Window: x.Window, TimeZone: x.TimeZone, WeekStart: time.Weekday(x.WeekStart), MonthDay: x.MonthDay, Shadow: x.Shadow,
			TTL: time.Duration(x.TTLMs) * time.Millisecond})
	}
	return st, nil
}

// entityState and limitsState describe a stored entity or limits item for
// an audit record.
func entityState(it store.Item) *AuditState {
	if it == nil {
		return nil
	}
	e := items.DecodeEntity("", it)
	return &AuditState{Parent: e.Parent, Cascade: e.Cascade}
}

func limitsState(it store.Item) *AuditState {
	if it == nil {
		return nil
	}
	ls, _, err := limitsOf(it)
	mode, merr := items.DecodeMode(it)
	if err = errors.Join(err, merr); err != nil {
		return &AuditState{Malformed: err.Error()}
	}
	return &AuditState{Limits: ls, Mode: Mode(mode)}
}

// AuditQuery selects audit records.
type AuditQuery struct {
	// Entity selects the records of an entity: changes to it, to its
	// stored limits (on every resource and per resource) and resets of its
	// buckets. With Resource also set, only those about that resource.
	Entity string
	// Resource, with Entity "", selects the changes to the limits stored
	// for the resource (Scope{Resource: r}).
	Resource string
	// Limit caps the records returned, newest first: 0 means 100; at most
	// 1000.
	Limit int
}

// Audit returns audit records, newest first (records of one millisecond in
// no particular order; see AuditQuery). It issues
// one strongly consistent Query; with both Entity and Resource set it
// reads the entity's records up to the retention and keeps those of the
// resource.
func (a *Admin) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	if err := a.begin(ctx); err != nil {
		return nil, err
	}
	limit := q.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > 1000:
		return nil, invalid("AuditQuery.Limit", "%d must be between 0 (100) and 1000", q.Limit)
	}
	if q.Entity == "" && q.Resource == "" {
		return nil, invalid("AuditQuery", "needs an Entity, a Resource or both")
	}
	if q.Entity != "" {
		if err := checkEntity("AuditQuery.Entity", q.Entity); err != nil {
			return nil, err
		}
	}
	if q.Resource != "" {
		if err := checkResource("AuditQuery.Resource", q.Resource); err != nil {
			return nil, err
		}
	}
	in := store.QueryInput{PartitionKey: keys.AuditPK(a.ns, q.Entity, q.Resource), ConsistentRead: true}
	filter := q.Entity != "" && q.Resource != ""
	if !filter {
		in.Limit = limit
	}
	out, err := a.st.Query(ctx, in)
	if err != nil {
		return nil, storeErr(ctx, "audit", err)
	}
	var recs []AuditRecord
	for _, it := range out.Items {
		r, err := decodeAudit(it)
		if err != nil {
			return nil, err
		}
		if filter && r.Scope.Resource != q.Resource {
			continue
		}
		if recs = append(recs, r); len(recs) == limit {
			break
		}
	}
	return recs, nil
}

func decodeAudit(it store.Item) (AuditRecord, error) {
	var r AuditRecord
	at, _ := it.Int(attrAuditAt)
	r.At = time.UnixMilli(at).UTC()
	r.Principal, _ = it.Str(attrAuditPrincipal)
	a, _ := it.Str(attrAuditAction)
	r.Action = AuditAction(a)
	r.Scope.Entity, _ = it.Str(keys.AttrEntity)
	r.Scope.Resource, _ = it.Str(keys.AttrResource)
	var err1, err2 error
	r.Before, err1 = decodeState(it.Str(attrAuditBefore))
	r.After, err2 = decodeState(it.Str(attrAuditAfter))
	if err := errors.Join(err1, err2); err != nil {
		sk, _ := it.Str(store.AttrSK)
		return AuditRecord{}, fmt.Errorf("limiter: malformed audit record %s: %w", sk, err)
	}
	for name, m := range it.Numbers() {
		if s, ok := strings.CutPrefix(name, attrShardMark); ok {
			shard, _ := strconv.Atoi(s)
			switch m {
			case markPending:
				r.Pending = append(r.Pending, shard)
			case markMissed:
				r.Missed = append(r.Missed, shard)
			}
		}
	}
	slices.Sort(r.Pending) // map order must not show
	slices.Sort(r.Missed)
	return r, nil
}
