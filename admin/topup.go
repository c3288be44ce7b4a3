package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Marks of a top-up record's shards, in its attributes "shard_{s}".
const (
	markPending = iota
	markGranted
	markMissed
	attrShardMark = "shard_"
)

// TopUp grants tokens to the bucket of (entity, resource) now: tokens maps
// 1 to 16 of the bucket's limits to whole tokens, each from 1 to
// limiter.MaxTokens. Each shard item gets tokens/items (in millitokens,
// rounded down), as sharding divides a limit. A bucket never holds more
// than its burst (each shard its share of it): a top-up fills it up to the
// burst and no further, as a refill does, since every server and the
// admission bound rely on the burst; raise its stored limits to let a
// tenant through beyond it.
//
// The audit record (AuditTopUp) is written first, listing the shard items
// as pending; then each gets its share in one transaction: ADD to the
// limits' tokens (their full-at guards reset, so the shard's next acquire
// makes a normal write, as after a doubling) and its mark set to granted if
// still pending. So no shard gets its share twice, and the bucket never
// more than the record says. A shard item gone meanwhile, or without one of
// the limits, gets nothing (AuditRecord.Missed). After an error the
// returned record says which shards are pending: ResumeTopUps grants them,
// and TopUp refuses the bucket until then.
//
// Servers that refused the bucket a moment before keep refusing locally
// until the retry-after they gave; the limiter of WithLimiter forgets the
// bucket. Bad input, or a bucket that does not exist (it is full), is a
// *limiter.ValidationError and writes nothing. It reads the entity's audit
// records and the bucket's shards, then writes a Put and a transaction per
// shard item.
func (a *Admin) TopUp(ctx context.Context, entity, resource string, tokens map[string]int64) (AuditRecord, error) {
	if err := a.begin(ctx); err != nil {
		return AuditRecord{}, err
	}
	if tokens == nil {
		tokens = map[string]int64{} // nil is for ResumeTopUps
	}
	if err := checkTopUp(entity, resource, tokens); err != nil {
		return AuditRecord{}, err
	}
	who, err := a.principalOf(ctx)
	if err != nil {
		return AuditRecord{}, err
	}
	if pending, err := a.pendingTopUps(ctx, entity, resource); err != nil || len(pending) > 0 {
		if err == nil {
			r := pending[0].rec
			err = fmt.Errorf("limiter: top-up of %v: the top-up of %s by %s has %d shard(s) pending; grant them first with "+
				"ResumeTopUps (limiterctl bucket top-up --resume)", r.Scope, r.At.Format("2006-01-02 15:04:05.000"), r.Principal, len(r.Pending))
		}
		return AuditRecord{}, err
	}
	ref := keys.Bucket{Namespace: a.ns, Entity: entity, Resource: resource}
	zero, err := a.st.Get(ctx, store.GetInput{Key: ref.Key(), ConsistentRead: true})
	if err != nil {
		return AuditRecord{}, storeErr(ctx, "top-up", err)
	}
	ks := make([]store.Key, min(keys.ShardCount(zero.Item), keys.MaxShards))
	for s := range ks {
		ks[s] = ref.WithShard(s).Key()
	}
	its, err := a.batchGet(ctx, ks)
	if err != nil {
		return AuditRecord{}, err
	}
	if its[0] == nil {
		return AuditRecord{}, invalid("resource", "no bucket of entity %q on resource %q in namespace %q (never charged, expired or reset): it is full",
			entity, resource, a.ns)
	}
	held := keys.LimitsOf(its[0]).Names
	for _, name := range slices.Sorted(maps.Keys(tokens)) {
		if !slices.Contains(held, name) {
			return AuditRecord{}, invalid("tokens["+name+"]", "the bucket of entity %q on resource %q holds no limit %q (it holds %s)",
				entity, resource, name, strings.Join(held, ", "))
		}
	}
	marks := store.Item{}
	for s, it := range its {
		if it != nil {
			marks[attrShardMark+strconv.Itoa(s)] = store.Int(markPending)
		}
	}
	for attempt := 0; ; attempt++ { // a record of the same millisecond and grant takes the next key
		w := a.auditItem(who, AuditTopUp, Scope{Entity: entity, Resource: resource}, nil, &AuditState{Tokens: tokens, Shards: len(marks)}, attempt)
		maps.Copy(w.Put.Item, marks)
		if _, err := a.st.Put(ctx, *w.Put); err == nil {
			r, err := decodeAudit(w.Put.Item)
			if err != nil {
				return r, err
			}
			k, _ := w.Put.Item.Key()
			return a.grant(ctx, topUp{k, r})
		} else if !errors.Is(err, store.ErrConditionFailed) || attempt == maxChangeAttempts {
			return AuditRecord{}, storeErr(ctx, "top-up", err)
		}
	}
}

// ResumeTopUps grants what the bucket's unfinished top-ups (see TopUp)
// have not granted yet, each pending shard once, and returns their records
// as they then stand, newest first (none when nothing was unfinished).
// Running it again, or while another runs, grants nothing twice.
func (a *Admin) ResumeTopUps(ctx context.Context, entity, resource string) ([]AuditRecord, error) {
	if err := cmp.Or(a.begin(ctx), checkTopUp(entity, resource, nil)); err != nil {
		return nil, err
	}
	pending, err := a.pendingTopUps(ctx, entity, resource)
	var done []AuditRecord
	for _, t := range pending {
		r, err := a.grant(ctx, t)
		if done = append(done, r); err != nil {
			return done, err
		}
	}
	return done, err
}

// checkTopUp checks a top-up's bucket and, unless resuming (tokens nil),
// its grant.
func checkTopUp(entity, resource string, tokens map[string]int64) error {
	if err := cmp.Or(checkEntity("entity", entity), checkResource("resource", resource)); err != nil || tokens == nil {
		return err
	}
	if len(tokens) == 0 || len(tokens) > 16 {
		return invalid("tokens", "%d limits; name 1 to 16", len(tokens))
	}
	for _, name := range slices.Sorted(maps.Keys(tokens)) {
		switch n := tokens[name]; {
		case !keys.ValidLimitName(name) || name == keys.HiddenLimit:
			return invalid("tokens["+name+"]", "limit name %q %s, not %q", name, keys.RuleLimitName, keys.HiddenLimit)
		case n < 1 || n > limiter.MaxTokens:
			return invalid("tokens["+name+"]", "%d must be between 1 and %d tokens", n, limiter.MaxTokens)
		}
	}
	return nil
}

// topUp is a top-up's record and its key.
type topUp struct {
	key store.Key
	rec AuditRecord
}

// pendingTopUps returns the bucket's top-ups with shards pending, newest
// first.
func (a *Admin) pendingTopUps(ctx context.Context, entity, resource string) ([]topUp, error) {
	out, err := a.st.Query(ctx, store.QueryInput{PartitionKey: keys.AuditPK(a.ns, entity, ""), ConsistentRead: true})
	if err != nil {
		return nil, storeErr(ctx, "top-up", err)
	}
	var ts []topUp
	for _, it := range out.Items {
		r, err := decodeAudit(it)
		if k, _ := it.Key(); err == nil && r.Action == AuditTopUp && r.Scope.Resource == resource && len(r.Pending) > 0 &&
			r.After != nil && r.After.Shards > 0 {
			ts = append(ts, topUp{k, r})
		}
	}
	return ts, nil
}

// grant gives each pending shard of a top-up its share and returns the
// record as it then stands.
func (a *Admin) grant(ctx context.Context, t topUp) (AuditRecord, error) {
	r := t.rec
	defer a.lim.ForgetBucket(r.Scope.Entity, r.Scope.Resource)
	u, conds := store.Update{}, []store.Condition{}
	for _, name := range slices.Sorted(maps.Keys(r.After.Tokens)) {
		tk := bucket.AttrName(name, bucket.FieldTokens)
		u = u.Add(tk, store.Int(r.After.Tokens[name]*bucket.MilliPerToken/int64(r.After.Shards))).
			Set(bucket.AttrName(name, keys.FieldFullLo), store.Int(0)).Set(bucket.AttrName(name, keys.FieldFullHi), store.Int(math.MaxInt64))
		conds = append(conds, store.Name(tk).Exists())
	}
	shardExpr, err := store.Build(u, store.And(conds...))
	for err == nil && len(r.Pending) > 0 {
		s := r.Pending[0]
		var mark int64
		ref := keys.Bucket{Namespace: a.ns, Entity: r.Scope.Entity, Resource: r.Scope.Resource, Shard: s}
		if mark, err = a.grantShard(ctx, ref.Key(), shardExpr, t.key, attrShardMark+strconv.Itoa(s)); err == nil {
			r.Pending = r.Pending[1:]
			if mark == markMissed {
				r.Missed = append(r.Missed, s)
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("limiter: top-up of %v: %d of %d shard(s) pending; grant them with ResumeTopUps "+
			"(limiterctl bucket top-up --resume), which grants each once: %w", r.Scope, len(r.Pending), r.After.Shards, err)
	}
	return r, err
}

// grantShard writes one shard's share with its mark, and returns the mark
// the shard ends with.
func (a *Admin) grantShard(ctx context.Context, shard store.Key, shardExpr store.Expr, rec store.Key, mark string) (int64, error) {
	markAs := func(m int64) *store.UpdateInput {
		e, _ := store.Build(store.Update{}.Set(mark, store.Int(m)), store.Name(mark).Equal(store.Int(markPending)))
		return &store.UpdateInput{Key: rec, Expr: e, ReturnOldOnConditionFailure: true}
	}
	var err error
	for attempt := 0; attempt < maxChangeAttempts; attempt++ {
		_, err = a.st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
			{Update: &store.UpdateInput{Key: shard, Expr: shardExpr}}, {Update: markAs(markGranted)}}})
		var tc *store.TransactionCanceledError
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			return markGranted, nil
		case !errors.As(err, &tc) || len(tc.Reasons) != 2 || !retryable(tc):
			return 0, storeErr(ctx, "top-up", err)
		case tc.Reasons[1].Code == store.ReasonConditionalCheckFailed: // marked by another run
			m, _ := tc.Reasons[1].Item.Int(mark)
			return m, nil
		case tc.Reasons[0].Code != store.ReasonConditionalCheckFailed: // a conflict: again
			continue
		}
		_, err = a.st.Update(ctx, *markAs(markMissed)) // the shard or a limit is gone
		if errors.As(err, &cf) {
			m, _ := cf.Item.Int(mark)
			return m, nil
		}
		return markMissed, storeErr(ctx, "top-up", err)
	}
	return 0, storeErr(ctx, "top-up", err)
}
