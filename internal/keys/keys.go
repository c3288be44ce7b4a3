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
// Bucket items also carry the keys of the keys-only index GSI3
// ({ns}/ENTITY#{entity}, BUCKET#{resource}#{shard}) for discovering an
// entity's buckets and shards. They carry no GSI2 keys: the table keeps its
// GSI2 definition, which no item of the limiter enters.
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

// IndexAttrs returns the GSI3 key attributes of b: partition key, then
// sort key.
func (b Bucket) IndexAttrs() [2]struct{ Name, Value string } {
	return [2]struct{ Name, Value string }{
		{store.AttrGSI3PK, EntityPK(b.Namespace, b.Entity)},
		{store.AttrGSI3SK, "BUCKET#" + b.Resource + "#" + strconv.Itoa(b.Shard)},
	}
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
