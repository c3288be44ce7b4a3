package admin

import (
	"cmp"
	"context"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// SchemaVersion is the version of the table layout this library writes. It
// is stored once per table (PK "#SCHEMA", SK "#VERSION", attribute
// "version"); a limiter that finds another version refuses to write
// (limiter.ErrSchemaVersion).
const SchemaVersion = items.SchemaVersion

// Entity is a rate-limited principal (an API key, a user, a project) and
// its place in the hierarchy. Its JSON form is {"id", "parent",
// "cascade"}, the last two left out when empty.
type Entity struct {
	// ID identifies the entity in its namespace: 1 to 256 characters
	// matching ^[a-zA-Z0-9][a-zA-Z0-9_.\-:@]{0,255}$ (the Entity of a
	// limiter.Request).
	ID string `json:"id"`
	// Parent is the entity whose buckets a cascade also charges; "" for
	// none.
	Parent string `json:"parent,omitempty"`
	// Cascade makes every acquire of this entity also charge its parent's
	// bucket for the same resource, all or nothing.
	Cascade bool `json:"cascade,omitempty"`
}

// Scope addresses stored limits. The limits of an acquire of (entity,
// resource) combine four scopes per limit name, most specific first:
//
//  1. {Entity, Resource}: this entity on this resource;
//  2. {Entity, ""}: this entity on every resource;
//  3. {"", Resource}: every entity on this resource;
//  4. the caller's: limiter.Request.Limits, or the limiter's default
//     limits (limiter.WithDefaultLimits) when the request has none.
//
// For each name, the first scope that defines it wins; every name some
// scope defines applies. So a stored override of "rpm" leaves the caller's
// "tpm" in force, and a name stored only for the entity (say a daily cap)
// is added to the caller's. A stored scope cannot remove a caller's limit;
// store a larger one instead.
//
// Its JSON form is {"entity", "resource"}, each left out when empty.
type Scope struct {
	// Entity is an entity id; "" addresses every entity (Resource must
	// then be set).
	Entity string `json:"entity,omitempty"`
	// Resource is a resource name; "" addresses every resource of Entity
	// (not limiter.DefaultResource). The zero Scope is refused.
	Resource string `json:"resource,omitempty"`
}

// scopeKey checks the call (see begin) and returns the key of s's stored
// limits and mode.
func (a *Admin) scopeKey(ctx context.Context, s Scope) (store.Key, error) {
	if err := a.begin(ctx); err != nil {
		return store.Key{}, err
	}
	switch {
	case s.Entity == "" && s.Resource == "":
		return store.Key{}, invalid("Scope", "needs an Entity, a Resource or both")
	case s.Entity == "":
		if err := checkResource("Scope.Resource", s.Resource); err != nil {
			return store.Key{}, err
		}
		return keys.ResourceLimits(a.ns, s.Resource), nil
	}
	if err := checkEntity("Scope.Entity", s.Entity); err != nil {
		return store.Key{}, err
	}
	if s.Resource == "" {
		return keys.EntityLimits(a.ns, s.Entity, keys.AnyResource), nil
	}
	if err := checkResource("Scope.Resource", s.Resource); err != nil {
		return store.Key{}, err
	}
	return keys.EntityLimits(a.ns, s.Entity, s.Resource), nil
}

// PutEntity creates or replaces an entity. An entity may not be its own
// parent, and a parent chain may not loop back to it. The change and its
// audit record are one transaction (see Audit); putting an entity as it
// already is writes nothing.
func (a *Admin) PutEntity(ctx context.Context, e Entity) error {
	if err := cmp.Or(a.begin(ctx), checkEntity("Entity.ID", e.ID)); err != nil {
		return err
	}
	if e.Parent != "" {
		if err := checkEntity("Entity.Parent", e.Parent); err != nil {
			return err
		}
		if e.Parent == e.ID {
			return invalid("Entity.Parent", "%q names the entity itself", e.Parent)
		}
		// Walk up from the parent: reaching e.ID would close a cycle.
		at := e.Parent
		for depth := 0; depth < 64 && at != ""; depth++ {
			p, ok, err := a.GetEntity(ctx, at)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if p.Parent == e.ID {
				return invalid("Entity.Parent", "%q would make a cycle (%s is an ancestor of %s)", e.Parent, e.ID, e.Parent)
			}
			at = p.Parent
		}
	} else if e.Cascade {
		return invalid("Entity.Cascade", "needs a Parent")
	}
	err := a.applyChange(ctx, configChange{op: "put entity", action: AuditPutEntity, scope: Scope{Entity: e.ID},
		key: keys.Entity(a.ns, e.ID), next: items.EntityItem(a.ns, items.Entity(e)), state: entityState})
	a.lim.Invalidate()
	return err
}

// GetEntity reads an entity (consistently, bypassing the cache).
func (a *Admin) GetEntity(ctx context.Context, id string) (Entity, bool, error) {
	if err := cmp.Or(a.begin(ctx), checkEntity("entity", id)); err != nil {
		return Entity{}, false, err
	}
	out, err := a.st.Get(ctx, store.GetInput{Key: keys.Entity(a.ns, id), ConsistentRead: true})
	if err != nil {
		return Entity{}, false, storeErr(ctx, "get entity", err)
	}
	if out.Item == nil {
		return Entity{}, false, nil
	}
	return Entity(items.DecodeEntity(id, out.Item)), true, nil
}

// DeleteEntity deletes an entity's metadata, with an audit record. Its
// buckets and stored limits stay (buckets expire on their own; delete
// limits with DeleteLimits). Deleting a missing entity writes nothing.
func (a *Admin) DeleteEntity(ctx context.Context, id string) error {
	if err := cmp.Or(a.begin(ctx), checkEntity("entity", id)); err != nil {
		return err
	}
	err := a.applyChange(ctx, configChange{op: "delete entity", action: AuditDeleteEntity, scope: Scope{Entity: id},
		key: keys.Entity(a.ns, id), state: entityState})
	a.lim.Invalidate()
	return err
}

// PutLimits stores limits for a scope, overriding the callers' defaults;
// the scope's mode stays as it is (see SetMode). The change and its audit
// record are one transaction; storing the limits already stored writes
// nothing.
func (a *Admin) PutLimits(ctx context.Context, s Scope, limits []limiter.Limit) error {
	k, err := a.scopeKey(ctx, s)
	if err != nil {
		return err
	}
	if len(limits) == 0 {
		return invalid("limits", "must not be empty (use DeleteLimits)")
	}
	if err := checkLimits(limits); err != nil {
		return err
	}
	encoded := items.LimitsItem(a.ns, k, s.Entity, s.Resource, limits, "")[items.AttrLimits]
	err = a.applyChange(ctx, configChange{op: "put limits", action: AuditPutLimits, scope: s, key: k, state: limitsState,
		edit: func(old store.Item) store.Item { return a.scopeItem(k, s, old, items.AttrLimits, &encoded) }})
	a.lim.Invalidate()
	return err
}

// GetLimits reads the limits stored for exactly this scope (consistently,
// bypassing the cache).
func (a *Admin) GetLimits(ctx context.Context, s Scope) ([]limiter.Limit, bool, error) {
	k, err := a.scopeKey(ctx, s)
	if err != nil {
		return nil, false, err
	}
	out, err := a.st.Get(ctx, store.GetInput{Key: k, ConsistentRead: true})
	if err != nil {
		return nil, false, storeErr(ctx, "get limits", err)
	}
	return limitsOf(out.Item)
}

// DeleteLimits deletes the limits stored for a scope, with an audit
// record; the scope's mode stays (SetMode changes it). Deleting limits
// that are not stored writes nothing.
func (a *Admin) DeleteLimits(ctx context.Context, s Scope) error {
	k, err := a.scopeKey(ctx, s)
	if err != nil {
		return err
	}
	err = a.applyChange(ctx, configChange{op: "delete limits", action: AuditDeleteLimits, scope: s, key: k, state: limitsState,
		edit: func(old store.Item) store.Item { return a.scopeItem(k, s, old, items.AttrLimits, nil) }})
	a.lim.Invalidate()
	return err
}
