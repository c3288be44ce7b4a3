package limiter

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// SchemaVersion is the version of the table layout this limiter writes. It
// is stored once per table (PK "#SCHEMA", SK "#VERSION", attribute
// "version"); a limiter that finds another version refuses to write.
const SchemaVersion = 1

// Entity is a rate-limited principal (an API key, a user, a project) and
// its place in the hierarchy.
type Entity struct {
	ID string
	// Parent is the entity whose buckets a cascade also charges; "" for
	// none.
	Parent string
	// Cascade makes every acquire of this entity also charge its parent's
	// bucket for the same resource, all or nothing.
	Cascade bool
}

// Scope addresses stored limits. Resolution for an acquire of (entity,
// resource), most specific first:
//
//  1. {Entity, Resource}: this entity on this resource;
//  2. {Entity, ""}: this entity on every resource;
//  3. {"", Resource}: every entity on this resource;
//  4. the limits in the Request.
//
// The first that exists is used whole; limits are not merged across levels.
type Scope struct {
	Entity   string
	Resource string
}

func (s Scope) key(ns string) (store.Key, error) {
	switch {
	case s.Entity == "" && s.Resource == "":
		return store.Key{}, invalid("Scope", "needs an Entity, a Resource or both")
	case s.Entity == "":
		if err := checkResource("Scope.Resource", s.Resource); err != nil {
			return store.Key{}, err
		}
		return keys.ResourceLimits(ns, s.Resource), nil
	}
	if err := checkEntity("Scope.Entity", s.Entity); err != nil {
		return store.Key{}, err
	}
	if s.Resource == "" {
		return keys.EntityLimits(ns, s.Entity, keys.AnyResource), nil
	}
	if err := checkResource("Scope.Resource", s.Resource); err != nil {
		return store.Key{}, err
	}
	return keys.EntityLimits(ns, s.Entity, s.Resource), nil
}

const (
	attrParent  = "parent_id"
	attrCascade = "cascade"
	attrLimits  = "limits"
	attrVersion = "version"
)

// PutEntity creates or replaces an entity. An entity may not be its own
// parent, and a parent chain may not loop back to it. The change and its
// audit record are one transaction (see Audit); putting an entity as it
// already is writes nothing.
func (l *Limiter) PutEntity(ctx context.Context, e Entity) error {
	if err := checkEntity("Entity.ID", e.ID); err != nil {
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
			p, ok, err := l.GetEntity(ctx, at)
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
	err := l.applyChange(ctx, configChange{op: "put entity", action: AuditPutEntity, scope: Scope{Entity: e.ID},
		key: keys.Entity(l.cfg.namespace, e.ID), next: l.entityItem(e), state: entityState})
	l.meta.invalidate()
	return err
}

// GetEntity reads an entity (consistently, bypassing the cache).
func (l *Limiter) GetEntity(ctx context.Context, id string) (Entity, bool, error) {
	if err := checkEntity("entity", id); err != nil {
		return Entity{}, false, err
	}
	out, err := l.st.Get(ctx, store.GetInput{Key: keys.Entity(l.cfg.namespace, id), ConsistentRead: true})
	if err != nil {
		return Entity{}, false, l.storeErr("get entity", err)
	}
	if out.Item == nil {
		return Entity{}, false, nil
	}
	return decodeEntity(id, out.Item), true, nil
}

// DeleteEntity deletes an entity's metadata, with an audit record. Its
// buckets and stored limits stay (buckets expire on their own; delete
// limits with DeleteLimits). Deleting a missing entity writes nothing.
func (l *Limiter) DeleteEntity(ctx context.Context, id string) error {
	if err := checkEntity("entity", id); err != nil {
		return err
	}
	err := l.applyChange(ctx, configChange{op: "delete entity", action: AuditDeleteEntity, scope: Scope{Entity: id},
		key: keys.Entity(l.cfg.namespace, id), state: entityState})
	l.meta.invalidate()
	return err
}

func decodeEntity(id string, it store.Item) Entity {
	e := Entity{ID: id}
	e.Parent, _ = it.Str(attrParent)
	c, _ := it.Int(attrCascade)
	e.Cascade = c != 0 && e.Parent != ""
	return e
}

// PutLimits stores limits for a scope, overriding the callers' defaults.
// The change and its audit record are one transaction; storing the limits
// already stored writes nothing.
func (l *Limiter) PutLimits(ctx context.Context, s Scope, limits []Limit) error {
	k, err := s.key(l.cfg.namespace)
	if err != nil {
		return err
	}
	if len(limits) == 0 {
		return invalid("limits", "must not be empty (use DeleteLimits)")
	}
	if err := checkLimits("limits", limits); err != nil {
		return err
	}
	err = l.applyChange(ctx, configChange{op: "put limits", action: AuditPutLimits, scope: s,
		key: k, next: l.limitsItem(k, s, limits), state: limitsState})
	l.meta.invalidate()
	return err
}

// GetLimits reads the limits stored for exactly this scope (consistently,
// bypassing the cache).
func (l *Limiter) GetLimits(ctx context.Context, s Scope) ([]Limit, bool, error) {
	k, err := s.key(l.cfg.namespace)
	if err != nil {
		return nil, false, err
	}
	out, err := l.st.Get(ctx, store.GetInput{Key: k, ConsistentRead: true})
	if err != nil {
		return nil, false, l.storeErr("get limits", err)
	}
	ls, ok, err := limitsOf(out.Item)
	return ls, ok, err
}

// DeleteLimits deletes the limits stored for a scope, with an audit
// record. Deleting limits that are not stored writes nothing.
func (l *Limiter) DeleteLimits(ctx context.Context, s Scope) error {
	k, err := s.key(l.cfg.namespace)
	if err != nil {
		return err
	}
	err = l.applyChange(ctx, configChange{op: "delete limits", action: AuditDeleteLimits, scope: s,
		key: k, state: limitsState})
	l.meta.invalidate()
	return err
}

// Invalidate drops every cached entity and stored limit, so the next
// acquire reads them again. Changes made through this Limiter invalidate
// its cache by themselves; call Invalidate when another process changed
// them and waiting for the cache TTL is too slow.
func (l *Limiter) Invalidate() { l.meta.invalidate() }

// encodeLimits is the stored form: "name=capacity/burst/refill/periodMs;..."
// in tokens and milliseconds.
func encodeLimits(ls []Limit) string {
	var b strings.Builder
	for i, x := range ls {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(x.Name + "=" + strconv.FormatInt(x.Capacity, 10) + "/" + strconv.FormatInt(x.burst(), 10) +
			"/" + strconv.FormatInt(x.Refill, 10) + "/" + strconv.FormatInt(x.Period.Milliseconds(), 10))
	}
	return b.String()
}

func limitsOf(it store.Item) ([]Limit, bool, error) {
	if it == nil {
		return nil, false, nil
	}
	s, ok := it.Str(attrLimits)
	if !ok {
		return nil, false, errors.New("limiter: stored limits item has no limits attribute")
	}
	var ls []Limit
	for _, part := range strings.Split(s, ";") {
		name, rest, ok := strings.Cut(part, "=")
		f := strings.Split(rest, "/")
		if !ok || len(f) != 4 {
			return nil, false, errors.New("limiter: malformed stored limits " + strconv.Quote(s))
		}
		var v [4]int64
		for i := range f {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return nil, false, errors.New("limiter: malformed stored limits " + strconv.Quote(s))
			}
			v[i] = n
		}
		x := Limit{Name: name, Capacity: v[0], Burst: v[1], Refill: v[2], Period: time.Duration(v[3]) * time.Millisecond}
		if err := x.Validate(); err != nil {
			return nil, false, errors.New("limiter: stored limits: " + err.Error())
		}
		ls = append(ls, x)
	}
	return ls, true, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// resolved is the configuration an acquire of (entity, resource) runs
// with.
type resolved struct {
	entity  Entity
	limits  []Limit // stored limits, or nil for the caller's
	expires time.Time
}

// metaCache caches resolved configuration with a TTL. At most one store
// read per key runs at a time (singleflight); it spawns no goroutine, so a
// simulator scheduling each client as a coroutine sees every read.
type metaCache struct {
	ttl   time.Duration
	mu    sync.Mutex
	items map[string]resolved
	gen   uint64
	sf    singleflight.Group
}

func (c *metaCache) init(ttl time.Duration) {
	c.ttl = ttl
	c.items = make(map[string]resolved)
}

func (c *metaCache) invalidate() {
	c.mu.Lock()
	c.items = make(map[string]resolved)
	c.gen++
	c.mu.Unlock()
}

// resolve returns the configuration of (entity, resource), from the cache
// or with one batch read (which also checks the schema version, once).
func (l *Limiter) resolve(ctx context.Context, tr *trace, entity, resource string) (resolved, error) {
	now := l.cfg.clock.Now()
	ck := entity + "\x00" + resource
	c := &l.meta
	c.mu.Lock()
	r, ok := c.items[ck]
	gen := c.gen
	c.mu.Unlock()
	if ok && now.Before(r.expires) {
		return r, nil
	}
	v, err, _ := c.sf.Do(ck, func() (any, error) {
		r, err := l.load(ctx, tr, entity, resource)
		if err != nil {
			return resolved{}, err
		}
		r.expires = now.Add(c.ttl)
		c.mu.Lock()
		if c.ttl > 0 && c.gen == gen {
			if len(c.items) >= maxCachedBuckets {
				clear(c.items) // bounded: the next reads refill it
			}
			c.items[ck] = r
		}
		c.mu.Unlock()
		return r, nil
	})
	if err != nil {
		return resolved{}, err
	}
	return v.(resolved), nil
}

func (l *Limiter) load(ctx context.Context, tr *trace, entity, resource string) (resolved, error) {
	ns := l.cfg.namespace
	ks := []store.Key{
		keys.Schema(),
		keys.Entity(ns, entity),
		keys.EntityLimits(ns, entity, resource),
		keys.EntityLimits(ns, entity, keys.AnyResource),
		keys.ResourceLimits(ns, resource),
	}
	// Consistent: limits stored a moment ago must apply at once. It is
	// read once per cache TTL per key, so the extra half RCU is nothing.
	out, err := l.st.BatchGet(ctx, store.BatchGetInput{Keys: ks, ConsistentRead: true})
	tr.add(out.Consumed, err)
	if err != nil {
		return resolved{}, err
	}
	if err := l.checkSchema(ctx, tr, out.Items[0]); err != nil {
		return resolved{}, err
	}
	r := resolved{entity: Entity{ID: entity}}
	if out.Items[1] != nil {
		r.entity = decodeEntity(entity, out.Items[1])
	}
	for _, it := range out.Items[2:] {
		ls, ok, err := limitsOf(it)
		if err != nil {
			return resolved{}, err
		}
		if ok {
			r.limits = ls
			break
		}
	}
	return r, nil
}

// checkSchema verifies the table's schema version, writing it when the
// table is new.
func (l *Limiter) checkSchema(ctx context.Context, tr *trace, it store.Item) error {
	if it == nil {
		k := keys.Schema()
		put := store.PutInput{
			Item: store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK), attrVersion: store.Int(SchemaVersion)},
			Expr: store.MustBuild(store.Update{}, store.Name(store.AttrPK).NotExists()), ReturnOldOnConditionFailure: true,
		}
		out, err := l.st.Put(ctx, put)
		tr.add(out.Consumed, err)
		var cf *store.ConditionFailedError
		if errors.As(err, &cf) {
			return l.checkSchema(ctx, tr, cf.Item)
		}
		return err
	}
	if v, _ := it.Int(attrVersion); v != SchemaVersion {
		return errors.Join(ErrSchemaVersion, errors.New("limiter: table has schema version "+strconv.FormatInt(v, 10)+
			", this limiter writes version "+strconv.Itoa(SchemaVersion)+"; upgrade the library"))
	}
	return nil
}

// storeErr wraps a store failure for the caller.
func (l *Limiter) storeErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if !storeDown(err) {
		return err
	}
	return &UnavailableError{Op: op, Err: err}
}
