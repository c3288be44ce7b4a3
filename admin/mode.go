package admin

import (
	"context"

	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/store"
)

// Mode is what a scope does with the acquires it governs, beside its
// limits. The zero value, ModeEnforce, applies the limits; the other modes
// disable the scope:
//
//   - ModeAdmit admits every acquire without a write: nothing is charged,
//     the lease's Adjust and Rollback do nothing (an incident's bypass, an
//     internal caller that must not be limited);
//   - ModeRefuse refuses every acquire without a write, with an error
//     matching limiter.ErrDisabled and the Outcome limiter.Disabled: not a
//     rate limit, so there is no retry-after (a revoked key, a model taken
//     out of service); httplimit answers 403 Forbidden.
//
// ModeShadow enforces nothing but disables nothing either: every limit of
// the scope's acquires (the cascade parent's included) is a shadow limit
// (limiter.Limit.Shadow): charged and reported, never refusing.
//
// An acquire of (entity, resource) takes the mode of the most specific of
// its scopes that has one: {Entity, Resource}, then {Entity, ""}, then
// {"", Resource}, as limits are chosen by name. So a key set to admit on
// a resource whose mode is refuse is admitted, and a resource's refuse
// applies to every entity that does not set a mode of its own. A cascade
// parent's mode applies to the parent's own acquires, not to its
// children's: an acquire of a child in a disabled scope writes nothing,
// to the parent either.
//
// A mode is stored in its scope's limits item (a scope may have a mode and
// no limits), so acquires read it with the limits at no extra cost and
// see a change within the limiter's cache TTL (limiter.WithCacheTTL;
// at once in a limiter given to the Admin with WithLimiter).
type Mode string

// Modes (see Mode). Any other value is refused by SetMode.
const (
	ModeEnforce Mode = ""               // apply the limits (the zero Mode)
	ModeAdmit   Mode = items.ModeAdmit  // admit every acquire, charging nothing
	ModeRefuse  Mode = items.ModeRefuse // refuse every acquire (limiter.ErrDisabled)
	ModeShadow  Mode = items.ModeShadow // charge and report, never refuse
)

// SetMode sets a scope's mode (ModeEnforce clears it); the scope's limits
// stay as they are. The change and its audit record (AuditSetMode) are one
// transaction; setting the mode a scope already has writes nothing. An
// unknown mode is refused, naming the field, and nothing is written.
func (a *Admin) SetMode(ctx context.Context, s Scope, m Mode) error {
	k, err := a.scopeKey(ctx, s)
	if err != nil {
		return err
	}
	var v *store.Value
	switch m {
	case ModeEnforce:
	case ModeAdmit, ModeRefuse, ModeShadow:
		x := store.Str(string(m))
		v = &x
	default:
		return invalid("mode", "%q is not a mode: want %q, %q, %q or %q (enforce, the default)", m, ModeAdmit, ModeRefuse, ModeShadow, ModeEnforce)
	}
	err = a.applyChange(ctx, configChange{op: "set mode", action: AuditSetMode, scope: s, key: k, state: limitsState,
		edit: func(old store.Item) store.Item { return a.scopeItem(k, s, old, items.AttrMode, v) }})
	a.lim.Invalidate()
	return err
}

// GetMode reads the mode of exactly this scope (consistently, bypassing
// the cache): ModeEnforce when it has none.
func (a *Admin) GetMode(ctx context.Context, s Scope) (Mode, error) {
	k, err := a.scopeKey(ctx, s)
	if err != nil {
		return "", err
	}
	out, err := a.st.Get(ctx, store.GetInput{Key: k, ConsistentRead: true})
	if err != nil {
		return "", storeErr(ctx, "get mode", err)
	}
	m, err := items.DecodeMode(out.Item)
	return Mode(m), err
}

// scopeItem is the item of scope s at k after a change to one of its
// attributes (items.AttrLimits or items.AttrMode) to v (nil removes it),
// keeping the other as old has it; nil when it is left with neither.
func (a *Admin) scopeItem(k store.Key, s Scope, old store.Item, attr string, v *store.Value) store.Item {
	it := items.ScopeItem(a.ns, k, s.Entity, s.Resource)
	for _, name := range []string{items.AttrLimits, items.AttrMode} {
		if x, ok := old[name]; ok {
			it[name] = x
		}
	}
	delete(it, attr)
	if v != nil {
		it[attr] = *v
	}
	_, hasLimits := it[items.AttrLimits]
	_, hasMode := it[items.AttrMode]
	if !hasLimits && !hasMode {
		return nil
	}
	return it
}
