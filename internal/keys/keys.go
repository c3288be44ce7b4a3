// Package keys is the one place that knows how the limiter lays out its
// items in the table. The limiter and the aggregator both import it, so the
// layout cannot drift between them.
//
// Every key starts with the namespace and a slash, so nothing in one
// namespace can address an item of another:
//
//	bucket          PK {ns}/BUCKET#{entity}#{resource}#{shard}   SK #STATE
//	entity          PK {ns}/ENTITY#{entity}                      SK #META
//	stored limits   PK {ns}/ENTITY#{entity}  SK #LIMITS#{resource}  (resource "*" for the entity's default)
//	                PK {ns}/RESOURCE#{resource}  SK #LIMITS         (per resource, any entity)
//	schema version  PK #SCHEMA               SK #VERSION          (one per table, outside every namespace)
//	audit record    PK {ns}/AUDIT#ENTITY#{entity} or {ns}/AUDIT#RESOURCE#{resource}  SK {inverted ms}#{seq}
//
// Entity and stored-limits items carry GSI3 keys under {ns}/CONFIG so
// that they can be listed (see admin.go).
//
// Bucket items also carry the keys of two keys-only indexes: GSI2
// ({ns}/RESOURCE#{resource}#{p}, BUCKET#{entity}#{shard}) for per-resource
// aggregation and GSI3 ({ns}/ENTITY#{entity}, BUCKET#{resource}#{shard}) for
// discovering an entity's buckets and shards. p spreads one resource over
// ResourceIndexFanOut index partitions (see ResourceIndexPK).
//
// Entity ids, resources and namespaces never contain '#', entity ids and
// namespaces never contain '/', so every key parses back unambiguously.
package keys

import (
	"strconv"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Sort keys and fixed keys.
const (
	SKBucket  = "#STATE"
	SKEntity  = "#META"
	SKLimits  = "#LIMITS"
	PKSchema  = "#SCHEMA"
	SKVersion = "#VERSION"
	// AnyResource is the resource of an entity's default stored limits.
	AnyResource = "*"
)

// Bucket is the address of one shard of one bucket.
type Bucket struct {
	Namespace string
	Entity    string
	Resource  string
	Shard     int
}

// Key returns the table key of b.
func (b Bucket) Key() store.Key {
	return store.Key{PK: b.PK(), SK: SKBucket}
}

// PK returns the partition key of b.
func (b Bucket) PK() string {
	var sb strings.Builder
	sb.Grow(len(b.Namespace) + len(b.Entity) + len(b.Resource) + 16)
	sb.WriteString(b.Namespace)
	sb.WriteString("/BUCKET#")
	sb.WriteString(b.Entity)
	sb.WriteByte('#')
	sb.WriteString(b.Resource)
	sb.WriteByte('#')
	sb.WriteString(strconv.Itoa(b.Shard))
	return sb.String()
}

// WithShard returns b for another shard.
func (b Bucket) WithShard(shard int) Bucket {
	b.Shard = shard
	return b
}

// IndexAttrs returns the GSI2 and GSI3 key attributes of b.
func (b Bucket) IndexAttrs() [4]struct{ Name, Value string } {
	shard := strconv.Itoa(b.Shard)
	return [4]struct{ Name, Value string }{
		{store.AttrGSI2PK, ResourceIndexPK(b.Namespace, b.Resource, b.Entity)},
		{store.AttrGSI2SK, "BUCKET#" + b.Entity + "#" + shard},
		{store.AttrGSI3PK, EntityPK(b.Namespace, b.Entity)},
		{store.AttrGSI3SK, "BUCKET#" + b.Resource + "#" + shard},
	}
}

// ResourceIndexFanOut is the number of GSI2 partition keys one resource's
// buckets are spread over. Index entries are written when a bucket shard
// is created, and one index partition key takes about 1,000 writes a
// second (DynamoDB then throttles the index, and through it the table):
// with one key per resource, a resource could gain at most ~1,000 buckets
// a second, a rate a quiet hour (every bucket expires) followed by a busy
// minute reaches. Sixteen keys raise that to ~16,000 a second, and a
// resource's buckets are listed with sixteen queries. Changing it moves
// index entries: it is part of the layout.
const ResourceIndexFanOut = 16

// ResourceIndexPK returns the GSI2 partition key of an entity's buckets on
// a resource: {ns}/RESOURCE#{resource}#{p}, where p, in [0,
// ResourceIndexFanOut), is the 32-bit FNV-1a hash of the entity id modulo
// the fan-out. All shards of one bucket share it.
func ResourceIndexPK(ns, resource, entity string) string {
	h := uint32(2166136261)
	for i := 0; i < len(entity); i++ {
		h = (h ^ uint32(entity[i])) * 16777619
	}
	return resourcePK(ns, resource) + "#" + strconv.Itoa(int(h%ResourceIndexFanOut))
}

// ResourceIndexPKs returns every GSI2 partition key that can hold a
// resource's buckets: the ResourceIndexFanOut keys of ResourceIndexPK, then
// the single key {ns}/RESOURCE#{resource} that buckets created before the
// fan-out carry (until they expire). A query for a resource's buckets
// queries each.
func ResourceIndexPKs(ns, resource string) []string {
	prefix := resourcePK(ns, resource)
	pks := make([]string, 0, ResourceIndexFanOut+1)
	for p := range ResourceIndexFanOut {
		pks = append(pks, prefix+"#"+strconv.Itoa(p))
	}
	return append(pks, prefix)
}

func resourcePK(ns, resource string) string { return ns + "/RESOURCE#" + resource }

// ParseBucketPK parses a bucket partition key. ok is false for any other
// key.
func ParseBucketPK(pk string) (b Bucket, ok bool) {
	ns, rest, found := strings.Cut(pk, "/BUCKET#")
	if !found || ns == "" || strings.ContainsAny(ns, "/#") {
		return Bucket{}, false
	}
	parts := strings.Split(rest, "#")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return Bucket{}, false
	}
	shard, err := strconv.Atoi(parts[2])
	if err != nil || shard < 0 || strconv.Itoa(shard) != parts[2] {
		return Bucket{}, false
	}
	return Bucket{Namespace: ns, Entity: parts[0], Resource: parts[1], Shard: shard}, true
}

// EntityPK returns the partition key of an entity's items.
func EntityPK(ns, entity string) string { return ns + "/ENTITY#" + entity }

// Entity returns the key of an entity's metadata item.
func Entity(ns, entity string) store.Key {
	return store.Key{PK: EntityPK(ns, entity), SK: SKEntity}
}

// EntityLimits returns the key of the limits stored for an entity on one
// resource, or on every resource when resource is AnyResource.
func EntityLimits(ns, entity, resource string) store.Key {
	return store.Key{PK: EntityPK(ns, entity), SK: SKLimits + "#" + resource}
}

// EntityConfig returns the keys of what an entity's partition holds for
// one resource, as Entity, EntityLimits(ns, entity, resource) and
// EntityLimits(ns, entity, AnyResource) do, built with one partition key
// string (a configuration read names all three).
func EntityConfig(ns, entity, resource string) (meta, own, all store.Key) {
	pk := EntityPK(ns, entity)
	return store.Key{PK: pk, SK: SKEntity}, store.Key{PK: pk, SK: SKLimits + "#" + resource},
		store.Key{PK: pk, SK: SKLimits + "#" + AnyResource}
}

// ResourceLimits returns the key of the limits stored for a resource, for
// every entity.
func ResourceLimits(ns, resource string) store.Key {
	return store.Key{PK: resourcePK(ns, resource), SK: SKLimits}
}

// Schema returns the key of the table's schema-version item.
func Schema() store.Key { return store.Key{PK: PKSchema, SK: SKVersion} }
