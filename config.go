package limiter

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/internal/lru"
	"github.com/shardlimit/limiter/store"
)

// Configuration reading: which limits an acquire of (entity, resource) runs
// with, from the request, the limiter's defaults and the stored limits, and
// the caches that keep those reads off the hot path.

// DefaultResource is the resource of a request that names none: plain
// per-key limiting needs no resource, and its buckets, stored limits and
// usage are those of the resource "default".
const DefaultResource = "default"

// settings is what one acquire runs with.
type settings struct {
	entity   Entity  // as stored (parent, cascade); ID alone when not stored
	resource string  // the request's, or DefaultResource
	limits   []Limit // the limits of the entity's bucket, per name
	parent   []Limit // those of the parent's bucket, when entity.Cascade
	// cached says until when (exclusive) the configuration cache keeps
	// what these settings came from, read in cache generation gen: a
	// repeat memo may serve them until then (zero: not cached).
	cached time.Time
	gen    uint64
}

// config reads the stored configuration that applies to req, which
// checkRequest accepted (from the cache when it can), and checks the
// request's Consume against the limits that result. It is the acquire
// path's one entry into configuration.
func (l *Limiter) config(ctx context.Context, tr *trace, req Request) (settings, error) {
	s := settings{resource: req.Resource}
	if s.resource == "" {
		s.resource = DefaultResource
		tr.ev.Resource = s.resource
	}
	var err error
	s.entity, s.limits, s.cached, s.gen, err = l.limitsFor(ctx, tr, req.Entity, s.resource, req.Limits)
	if err != nil {
		return s, err
	}
	if err := checkConsume(s.limits, req.Consume, ""); err != nil {
		return s, err
	}
	if !s.entity.Cascade {
		return s, nil
	}
	_, s.parent, _, _, err = l.limitsFor(ctx, tr, s.entity.Parent, s.resource, req.Limits)
	if err != nil {
		return s, err
	}
	if err := checkConsume(s.parent, req.Consume, " for the parent "+s.entity.Parent); err != nil {
		return s, err
	}
	return s, nil
}

// limitsFor returns the entity as stored and the limits of its bucket on
// resource: per limit name, the most specific of the limits stored for
// {entity, resource}, for {entity, ""}, for {"", resource}, and the
// caller's (the request's, or the limiter's defaults when the request has
// none). Names any of them defines apply; a name defined nowhere does not.
// cached and gen are those of the stored configuration (see settings).
func (l *Limiter) limitsFor(ctx context.Context, tr *trace, entity, resource string, caller []Limit) (_ Entity, _ []Limit, cached time.Time, gen uint64, _ error) {
	if len(caller) == 0 {
		caller = l.cfg.defaults
	}
	ec, rc, gen, err := l.stored(ctx, tr, entity, resource)
	if err != nil {
		return Entity{}, nil, time.Time{}, 0, err
	}
	limits := mergeLimits(ec.own, ec.all, rc.limits, caller)
	if len(limits) > maxLimits {
		return Entity{}, nil, time.Time{}, 0, invalid("limits", "%d limits apply to entity %q on resource %q (the caller's and the stored ones); at most %d",
			len(limits), entity, resource, maxLimits)
	}
	cached = ec.cached
	if rc.cached.Before(cached) {
		cached = rc.cached
	}
	return ec.entity, limits, cached, gen, nil
}

// mergeLimits combines scopes, most specific first: per limit name, the
// first scope that defines it wins. With nothing stored it returns the
// caller's slice itself (no copy on the hot path).
func mergeLimits(own, all, res, caller []Limit) []Limit {
	if own == nil && all == nil && res == nil {
		return caller
	}
	out := make([]Limit, 0, len(own)+len(all)+len(res)+len(caller))
	for _, scope := range [...][]Limit{own, all, res, caller} {
	next:
		for _, x := range scope {
			for _, y := range out {
				if y.Name == x.Name {
					continue next
				}
			}
			out = append(out, x)
		}
	}
	return out
}

// entityConf is what is stored on an entity's partition for one resource.
type entityConf struct {
	entity Entity
	own    []Limit   // stored for {entity, resource}; nil when none
	all    []Limit   // stored for {entity, ""}; nil when none
	cached time.Time // until when the cache keeps it (exclusive; zero: not cached)
}

// resourceConf is what is stored for every entity on a resource.
type resourceConf struct {
	limits []Limit   // nil when none
	cached time.Time // as entityConf's
}

// metaCache caches stored configuration per process: per (entity,
// resource) what the entity's partition holds, and per resource the limits
// stored for every entity on it, each for the TTL, in size-bounded LRUs.
// A resource's item is shared by every entity of the resource, so it is
// read once per TTL per process, not once per entity; the table's schema
// item is read once per process. A cold start of many processes on many
// entities would otherwise read those two keys thousands of times a
// second, past the 3,000 reads a second one DynamoDB partition serves.
//
// At most one read per key runs at a time (flights). No goroutine is
// started, and a caller waits only for a read of another caller of the
// same limiter, so a simulator running each limiter as one coroutine sees
// every read.
type metaCache struct {
	ttl       time.Duration
	mu        sync.Mutex
	entities  *lru.Cache[configKey, entityConf]
	resources *lru.Cache[string, resourceConf]
	flights   map[configKey]*flight // reads under way (see resourceFlightKey)
	// gen is bumped by invalidate: reads begun before are not cached, and
	// repeat memos made before serve no settings. Written under mu.
	gen      atomic.Uint64
	schemaOK bool   // this process has checked the table's schema version
	onWait   func() // tests: called when a caller starts waiting for a flight
}

// maxCachedConfigs bounds each configuration cache: beyond it the least
// recently used entries are dropped (and read again when next needed).
const maxCachedConfigs = 1 << 16

// flight is a read in progress; callers that need the same key wait for
// it and share its result.
type flight struct {
	// done is closed when the read ends. Made by the first caller that
	// joins the flight (under metaCache.mu): most reads have none, and
	// their leader needs no channel to know its own read ended.
	done chan struct{}
	ec   entityConf   // of an entity flight
	res  resourceConf // of a resource flight
	err  error
	// keys: the leader's batch of keys (a store keeps nothing of its
	// input, so the batch can live in the flight it fills).
	keys [5]store.Key
}

func (c *metaCache) init(ttl time.Duration) {
	c.ttl = ttl
	c.entities = lru.New[configKey, entityConf](maxCachedConfigs)
	c.resources = lru.New[string, resourceConf](maxCachedConfigs)
	c.flights = make(map[configKey]*flight)
}

func (c *metaCache) invalidate() {
	c.mu.Lock()
	c.entities.Purge()
	c.resources.Purge()
	clear(c.flights) // reads in progress may predate the change: new callers read again
	c.gen.Add(1)
	c.mu.Unlock()
}

// configKey names an entity's configuration for a resource in the cache
// (a struct, so that a lookup builds no string).
type configKey struct{ entity, resource string }

// Flight keys: an entity's is its configKey, a resource's the configKey
// of no entity (entity ids are never empty), so that finding a flight
// builds no string.
func resourceFlightKey(resource string) configKey { return configKey{resource: resource} }

// stored returns what is stored for (entity, resource) and for resource,
// and the cache generation it was found or read in.
func (l *Limiter) stored(ctx context.Context, tr *trace, entity, resource string) (entityConf, resourceConf, uint64, error) {
	ec, res, gen, err := l.storedOnce(ctx, tr, entity, resource)
	if err != nil && ctx.Err() == nil && isContextErr(err) {
		// A read of another caller ended with that caller's context.
		ec, res, gen, err = l.storedOnce(ctx, tr, entity, resource)
	}
	return ec, res, gen, err
}

// storedOnce serves (entity, resource) from the cache, or reads what is
// missing in one batch (with the schema item while this process has not
// checked it), or waits for a read of the same key already under way.
func (l *Limiter) storedOnce(ctx context.Context, tr *trace, entity, resource string) (entityConf, resourceConf, uint64, error) {
	c := &l.meta
	now := l.cfg.clock.Now()
	c.mu.Lock()
	gen := c.gen.Load()
	ec, eok := c.entities.Get(configKey{entity, resource}, now)
	res, rok := c.resources.Get(resource, now)
	if eok && rok {
		c.mu.Unlock()
		return ec, res, gen, nil
	}
	ek := configKey{entity, resource}
	rk := resourceFlightKey(resource)
	var ef, rf *flight       // the flights whose results this caller takes
	var eRead, rRead *flight // those of them it reads itself
	if !eok {
		if ef = c.join(ek); ef == nil {
			ef = c.begin(ek)
			eRead = ef
		}
	}
	if !rok {
		if rf = c.join(rk); rf == nil {
			rf = c.begin(rk)
			rRead = rf
		}
	}
	schema := !c.schemaOK
	c.mu.Unlock()

	if eRead != nil || rRead != nil {
		l.read(ctx, tr, entity, resource, eRead, rRead, schema)
		l.publish(gen, entity, eRead, resource, rRead)
	}
	if ef != nil {
		if err := c.wait(ctx, ef, ef == eRead); err != nil {
			return entityConf{}, resourceConf{}, 0, err
		}
		ec = ef.ec
	}
	if rf != nil {
		if err := c.wait(ctx, rf, rf == rRead); err != nil {
			return entityConf{}, resourceConf{}, 0, err
		}
		res = rf.res
	}
	return ec, res, gen, nil
}

// read fills the flights this caller leads (ef, rf; either may be nil)
// with one consistent batch read, checking the schema version too when
// schema is set.
func (l *Limiter) read(ctx context.Context, tr *trace, entity, resource string, ef, rf *flight, schema bool) {
	ns := l.cfg.namespace
	lead := ef
	if lead == nil {
		lead = rf
	}
	ks := lead.keys[:0]
	if ef != nil {
		meta, own, all := keys.EntityConfig(ns, entity, resource)
		ks = append(ks, meta, own, all)
	}
	if rf != nil {
		ks = append(ks, keys.ResourceLimits(ns, resource))
	}
	if schema {
		ks = append(ks, keys.Schema())
	}
	// Consistent: limits stored a moment ago must apply at once. Each key
	// is read once per cache TTL per process, so the extra half RCU is
	// nothing.
	out, err := l.st.BatchGet(ctx, store.BatchGetInput{Keys: ks, ConsistentRead: true})
	tr.add(out.Consumed, err)
	items := out.Items
	if err == nil && schema {
		if err = l.checkSchema(ctx, tr, items[len(items)-1]); err == nil {
			l.meta.mu.Lock()
			l.meta.schemaOK = true
			l.meta.mu.Unlock()
		}
	}
	if ef != nil {
		ef.err = err
		if err == nil {
			ef.ec, ef.err = decodeEntityConf(entity, items[0], items[1], items[2])
		}
		items = items[min(3, len(items)):]
	}
	if rf != nil {
		rf.err = err
		if err == nil {
			rf.res.limits, _, rf.err = limitsOf(items[0])
		}
	}
}

func decodeEntityConf(id string, meta, own, all store.Item) (entityConf, error) {
	ec := entityConf{entity: Entity{ID: id}}
	if meta != nil {
		ec.entity = decodeEntity(id, meta)
	}
	var err error
	if ec.own, _, err = limitsOf(own); err != nil {
		return entityConf{}, err
	}
	if ec.all, _, err = limitsOf(all); err != nil {
		return entityConf{}, err
	}
	return ec, nil
}

// publish caches the results of the flights this caller led (unless the
// cache was invalidated since the read began) and wakes their waiters.
func (l *Limiter) publish(gen uint64, entity string, ef *flight, resource string, rf *flight) {
	c := &l.meta
	expires := l.cfg.clock.Now().Add(c.ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := c.ttl > 0 && c.gen.Load() == gen
	// The waiters take the results as cached (or not): a memo of them
	// lasts no longer than the cache's entries.
	var cached time.Time
	if keep {
		cached = expires
	}
	if ef != nil {
		if ef.err == nil {
			ef.ec.cached = cached
			if keep {
				c.entities.Add(configKey{entity, resource}, ef.ec, expires)
			}
		}
		c.end(configKey{entity, resource}, ef)
	}
	if rf != nil {
		if rf.err == nil {
			rf.res.cached = cached
			if keep {
				c.resources.Add(resource, rf.res, expires)
			}
		}
		c.end(resourceFlightKey(resource), rf)
	}
}

// begin registers a flight for key. c.mu must be held.
func (c *metaCache) begin(key configKey) *flight {
	f := &flight{}
	c.flights[key] = f
	return f
}

// join returns the flight of key under way (nil for none), ready to be
// waited for. c.mu must be held.
func (c *metaCache) join(key configKey) *flight {
	f := c.flights[key]
	if f != nil && f.done == nil {
		f.done = make(chan struct{})
	}
	return f
}

// end removes a flight (unless invalidate did) and wakes its waiters. c.mu
// must be held.
func (c *metaCache) end(key configKey, f *flight) {
	if c.flights[key] == f {
		delete(c.flights, key)
	}
	if f.done != nil {
		close(f.done)
	}
}

// wait returns the result of a flight once it is done, or ctx's error. A
// flight the caller led (mine) is done.
func (c *metaCache) wait(ctx context.Context, f *flight, mine bool) error {
	if mine {
		return f.err
	}
	select {
	case <-f.done:
		return f.err
	default:
	}
	if c.onWait != nil {
		c.onWait()
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
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

func decodeEntity(id string, it store.Item) Entity {
	e := Entity{ID: id}
	e.Parent, _ = it.Str(attrParent)
	c, _ := it.Int(attrCascade)
	e.Cascade = c != 0 && e.Parent != ""
	return e
}

// limitsOf decodes a stored limits item (see encodeLimits); ok is false
// for no item.
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
