package limiter

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/shardlimit/limiter/internal/items"
	"golang.org/x/sync/singleflight"

	"github.com/shardlimit/limiter/internal/keys"
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
	entity items.Entity // as stored (parent, cascade); ID alone when not stored
	// buckets are the limits of each resource charged: the request's (or
	// DefaultResource), then each of Request.Also.
	buckets []resourceLimits
}

// resourceLimits are the limits an acquire charges on one resource.
type resourceLimits struct {
	resource string
	limits   []Limit // the limits of the entity's bucket, per name
	parent   []Limit // those of the parent's bucket, when the entity cascades
	// mode is the entity's scopes' mode on the resource ("": enforcing;
	// items.ModeAdmit, items.ModeRefuse (parent then not read),
	// items.ModeShadow: limits and parent are then all shadow) and modeOf
	// the scope that set it.
	mode, modeOf string
	// skip and skipParent name the shadow limits an earlier try of this
	// acquire found would refuse on this resource, in the entity's bucket
	// and the parent's: the charge skips them (Plan.Skipping).
	skip, skipParent []string
}

// config reads the stored configuration that applies to req, which
// checkRequest accepted (from the cache when it can), and checks the
// request's Consume against the limits that result on every resource. It
// is the acquire path's one entry into configuration.
func (l *Limiter) config(ctx context.Context, tr *trace, req Request) (settings, error) {
	var s settings
	resource := req.Resource
	if resource == "" {
		resource = DefaultResource
		tr.ev.Resource = resource
	}
	s.buckets = make([]resourceLimits, 0, 1+len(req.Also))
	for i := 0; i <= len(req.Also); i++ {
		r, on := resource, ""
		if i > 0 {
			r = req.Also[i-1]
			on = " on resource " + r
		}
		c, err := l.limitsFor(ctx, tr, req.Entity, r, req.Limits)
		if err != nil {
			return s, err
		}
		s.entity = c.entity
		if err := checkConsume(c.limits, req.Consume, on); err != nil {
			return s, err
		}
		b := resourceLimits{resource: r, limits: c.limits, mode: c.mode, modeOf: c.modeOf}
		if b.mode == items.ModeShadow {
			b.limits = shadowed(b.limits)
		}
		if s.entity.Cascade && b.mode != items.ModeAdmit && b.mode != items.ModeRefuse {
			p, err := l.limitsFor(ctx, tr, s.entity.Parent, r, req.Limits)
			if err != nil {
				return s, err
			}
			b.parent = p.limits
			if b.mode == items.ModeShadow {
				b.parent = shadowed(b.parent)
			}
			if err := checkConsume(b.parent, req.Consume, " for the parent "+s.entity.Parent+on); err != nil {
				return s, err
			}
		}
		s.buckets = append(s.buckets, b)
	}
	return s, nil
}

// conf is the configuration of an entity's bucket on a resource.
type conf struct {
	entity       items.Entity // as stored
	limits       []Limit
	mode, modeOf string // see resourceLimits
}

// limitsFor returns the entity as stored, the limits of its bucket on
// resource and its mode: per limit name, the most specific of the limits
// stored for {entity, resource}, for {entity, ""}, for {"", resource}, and
// the caller's (the request's, or the limiter's defaults when the request
// has none). Names any of them defines apply; a name defined nowhere does
// not. The mode is the most specific of the three stored scopes' that has
// one.
func (l *Limiter) limitsFor(ctx context.Context, tr *trace, entity, resource string, caller []Limit) (conf, error) {
	if len(caller) == 0 {
		caller = l.cfg.defaults
	}
	ec, rc, _, err := l.stored(ctx, tr, entity, resource)
	if err != nil {
		return conf{}, err
	}
	c := conf{entity: ec.entity, limits: mergeLimits(ec.own, ec.all, rc.limits, caller)}
	if len(c.limits) > maxLimits {
		return conf{}, invalid("limits", "%d limits apply to entity %q on resource %q (the caller's and the stored ones); at most %d",
			len(c.limits), entity, resource, maxLimits)
	}
	switch {
	case ec.ownMode != "":
		c.mode, c.modeOf = ec.ownMode, "entity "+strconv.Quote(entity)+" on resource "+strconv.Quote(resource)
	case ec.allMode != "":
		c.mode, c.modeOf = ec.allMode, "entity "+strconv.Quote(entity)
	case rc.mode != "":
		c.mode, c.modeOf = rc.mode, "resource "+strconv.Quote(resource)
	}
	return c, nil
}

// shadowed returns a copy of limits, every one of them shadow.
func shadowed(limits []Limit) []Limit {
	out := make([]Limit, len(limits))
	for i, x := range limits {
		x.Shadow = true
		out[i] = x
	}
	return out
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
	entity           items.Entity
	own              []Limit   // stored for {entity, resource}; nil when none
	all              []Limit   // stored for {entity, ""}; nil when none
	ownMode, allMode string    // the modes of those scopes ("": none)
	cached           time.Time // until when the cache keeps it (exclusive; zero: not cached)
}

// resourceConf is what is stored for every entity on a resource.
type resourceConf struct {
	limits []Limit   // nil when none
	mode   string    // the resource's mode ("": none)
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
// At most one read per key runs at a time: callers that need a key being
// read wait for that read and share its result (a singleflight.Group,
// whose Do runs the read in its caller's goroutine). No goroutine is
// started, and a caller waits only for a read of another caller of the
// same limiter, so a simulator running each limiter as one coroutine sees
// every read. A waiter waits for the read to end (the reader's context and
// the store's timeouts bound it), then reads again itself if that read
// ended with the reader's context.
type metaCache struct {
	ttl       time.Duration
	mu        sync.Mutex
	entities  *simplelru.LRU[configKey, entityConf]
	resources *simplelru.LRU[string, resourceConf]
	// flights are the reads under way, keyed by flightKey; invalidate
	// starts a new group, so that new callers read again.
	flights *singleflight.Group
	// gen is bumped by invalidate: reads begun before are not cached, and
	// repeat memos made before serve no settings. Written under mu.
	gen      atomic.Uint64
	schemaOK bool   // this process has checked the table's schema version
	onRead   func() // tests: called before a caller joins or starts a read
}

// maxCachedConfigs bounds each configuration cache: beyond it the least
// recently used entries are dropped (and read again when next needed).
const maxCachedConfigs = 1 << 16

func (c *metaCache) init(ttl time.Duration) {
	c.ttl = ttl
	c.entities, _ = simplelru.NewLRU[configKey, entityConf](maxCachedConfigs, nil)
	c.resources, _ = simplelru.NewLRU[string, resourceConf](maxCachedConfigs, nil)
	c.flights = new(singleflight.Group)
}

// Invalidate drops every cached entity and stored limit, so the next
// acquire reads them again. Changes made through an admin.Admin given this
// limiter (admin.WithLimiter) invalidate its cache by themselves; call
// Invalidate when another process changed them and waiting for the cache
// TTL (WithCacheTTL) is too slow. It does nothing on a nil or zero Limiter.
func (l *Limiter) Invalidate() {
	if l != nil && l.st != nil {
		l.meta.invalidate()
	}
}

// ForgetBucket drops what this limiter remembers of the (entity,
// resource) bucket (its shard count, the last item of each shard; resource
// "" is DefaultResource), so that its next acquire of the bucket starts
// from the store. An
// admin.Admin given this limiter (admin.WithLimiter) calls it when it
// resets the bucket; a limiter that was not told learns of a reset from
// its next write. It does nothing on a nil or zero Limiter.
func (l *Limiter) ForgetBucket(entity, resource string) {
	if l == nil || l.st == nil {
		return
	}
	if resource == "" {
		resource = DefaultResource
	}
	l.mem.ForgetBucket(keys.Bucket{Namespace: l.cfg.namespace, Entity: entity, Resource: resource})
}

func (c *metaCache) invalidate() {
	c.mu.Lock()
	c.entities.Purge()
	c.resources.Purge()
	c.flights = new(singleflight.Group) // reads in progress may predate the change: new callers read again
	c.gen.Add(1)
	c.mu.Unlock()
}

// configKey names an entity's configuration for a resource in the cache
// (a struct, so that a lookup builds no string).
type configKey struct{ entity, resource string }

// flightKey names the read of an entity's configuration for a resource,
// or (entity "") of a resource's limits. Identifiers hold no NUL byte.
func flightKey(entity, resource string) string { return entity + "\x00" + resource }

// fresh returns what an LRU holds for key if it is still fresh at now
// (cached is its expiry, exclusive); an expired entry is removed.
func fresh[K comparable, V any](c *simplelru.LRU[K, V], key K, now time.Time, cached func(V) time.Time) (V, bool) {
	v, ok := c.Get(key)
	if ok && !now.Before(cached(v)) {
		c.Remove(key)
		var zero V
		return zero, false
	}
	return v, ok
}

func (ec entityConf) expiry() time.Time   { return ec.cached }
func (rc resourceConf) expiry() time.Time { return rc.cached }

// stored returns what is stored for (entity, resource) and for resource,
// and the cache generation it was found or read in.
func (l *Limiter) stored(ctx context.Context, tr *trace, entity, resource string) (entityConf, resourceConf, uint64, error) {
	ec, res, gen, err := l.storedOnce(ctx, tr, entity, resource)
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// A read of another caller ended with that caller's context.
		ec, res, gen, err = l.storedOnce(ctx, tr, entity, resource)
	}
	return ec, res, gen, err
}

// confRead is the result of a read of an entity's configuration: the
// entity's, and the resource's (read in the same batch, or found).
type confRead struct {
	ec  entityConf
	res resourceConf
}

// storedOnce serves (entity, resource) from the cache, or reads what is
// missing in one batch (with the schema item while this process has not
// checked it), or waits for a read of the same key already under way.
func (l *Limiter) storedOnce(ctx context.Context, tr *trace, entity, resource string) (entityConf, resourceConf, uint64, error) {
	c := &l.meta
	now := l.cfg.clock.Now()
	c.mu.Lock()
	gen := c.gen.Load()
	ec, eok := fresh(c.entities, configKey{entity, resource}, now, entityConf.expiry)
	res, rok := fresh(c.resources, resource, now, resourceConf.expiry)
	flights := c.flights
	c.mu.Unlock()
	if eok && rok {
		return ec, res, gen, nil
	}
	if c.onRead != nil {
		c.onRead()
	}
	if eok { // the resource's limits alone
		v, err, _ := flights.Do(flightKey("", resource), func() (any, error) {
			_, res, err := l.read(ctx, tr, gen, entity, resource, false, true)
			return res, err
		})
		if err != nil {
			return entityConf{}, resourceConf{}, 0, err
		}
		return ec, v.(resourceConf), gen, nil
	}
	v, err, _ := flights.Do(flightKey(entity, resource), func() (any, error) {
		if rok {
			ec, _, err := l.read(ctx, tr, gen, entity, resource, true, false)
			return confRead{ec, res}, err
		}
		// Both are missing: lead the resource's read with the entity's
		// items in its batch, or wait for the resource's read under way
		// and then read the entity's items alone.
		var r confRead
		led := false
		v, err, _ := flights.Do(flightKey("", resource), func() (any, error) {
			var err error
			led = true
			r.ec, r.res, err = l.read(ctx, tr, gen, entity, resource, true, true)
			return r.res, err
		})
		if err != nil || led {
			return r, err
		}
		r.res = v.(resourceConf)
		r.ec, _, err = l.read(ctx, tr, gen, entity, resource, true, false)
		return r, err
	})
	if err != nil {
		return entityConf{}, resourceConf{}, 0, err
	}
	r := v.(confRead)
	return r.ec, r.res, gen, nil
}

// read reads an entity's configuration for resource (withEntity), the
// resource's limits (withResource) or both in one consistent batch, with
// the schema item too while this process has not checked it, and caches
// what it read (unless the cache was invalidated since generation gen).
func (l *Limiter) read(ctx context.Context, tr *trace, gen uint64, entity, resource string, withEntity, withResource bool) (ec entityConf, res resourceConf, err error) {
	ns := l.cfg.namespace
	l.meta.mu.Lock()
	schema := !l.meta.schemaOK
	l.meta.mu.Unlock()
	ks := make([]store.Key, 0, 5)
	if withEntity {
		meta, own, all := keys.EntityConfig(ns, entity, resource)
		ks = append(ks, meta, own, all)
	}
	if withResource {
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
	if err != nil {
		return entityConf{}, resourceConf{}, err
	}
	got := out.Items
	if len(got) != len(ks) {
		return entityConf{}, resourceConf{}, errors.New("limiter: configuration read: the store answered " +
			strconv.Itoa(len(got)) + " items for " + strconv.Itoa(len(ks)) + " keys")
	}
	if schema {
		if err := items.CheckSchema(ctx, l.st, got[len(got)-1], tr.add); err != nil {
			return entityConf{}, resourceConf{}, err
		}
	}
	if withEntity {
		if ec, err = decodeEntityConf(entity, got[0], got[1], got[2]); err != nil {
			return entityConf{}, resourceConf{}, err
		}
		got = got[3:]
	}
	if withResource {
		if res.limits, res.mode, err = scopeOf(got[0]); err != nil {
			return entityConf{}, resourceConf{}, err
		}
	}

	// Cache what was read. Callers take the results as cached (or not): a
	// memo of them lasts no longer than the cache's entries.
	c := &l.meta
	expires := l.cfg.clock.Now().Add(c.ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if schema {
		c.schemaOK = true
	}
	if c.ttl <= 0 || c.gen.Load() != gen {
		return ec, res, nil
	}
	if withEntity {
		ec.cached = expires
		c.entities.Add(configKey{entity, resource}, ec)
	}
	if withResource {
		res.cached = expires
		c.resources.Add(resource, res)
	}
	return ec, res, nil
}

func decodeEntityConf(id string, meta, own, all store.Item) (entityConf, error) {
	ec := entityConf{entity: items.Entity{ID: id}}
	if meta != nil {
		ec.entity = items.DecodeEntity(id, meta)
	}
	var err error
	if ec.own, ec.ownMode, err = scopeOf(own); err != nil {
		return entityConf{}, err
	}
	if ec.all, ec.allMode, err = scopeOf(all); err != nil {
		return entityConf{}, err
	}
	return ec, nil
}

// scopeOf decodes a stored limits item: its limits and its mode (nil and
// "" for no item).
func scopeOf(it store.Item) ([]Limit, string, error) {
	ls, _, err := items.DecodeLimits(it, Limit.Validate)
	if err != nil {
		return nil, "", err
	}
	mode, err := items.DecodeMode(it)
	return ls, mode, err
}

// storeErr turns a store error into the caller's: the context's error
// when ctx is done (see ctxDone), an *UnavailableError when the store
// could not answer, else err as it is.
func (l *Limiter) storeErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if derr := ctxDone(ctx, err); derr != nil {
		return derr
	}
	if !storeDown(err) {
		return err
	}
	return &UnavailableError{Op: op, Err: err}
}

// ctxDone returns, when ctx is done, the error of a call that failed with
// err: the context's error (errors.Is(e, context.Canceled) or
// context.DeadlineExceeded), joined with err when err is the store's,
// which says whether a write may have applied (store.OutcomeUnknown). It
// is never an *UnavailableError: the caller gave up, the store did not
// fail. nil when ctx is not done.
func ctxDone(ctx context.Context, err error) error {
	cerr := ctx.Err()
	switch {
	case cerr == nil:
		return nil
	case errors.Is(err, cerr):
		return err
	}
	return errors.Join(cerr, err)
}
