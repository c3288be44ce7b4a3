package keys

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Configuration index entries. Entity items and stored-limits items carry
// GSI3 keys under one partition per namespace, so that an operator can
// list them with a Query (the store has no Scan):
//
//	GSI3PK {ns}/CONFIG
//	GSI3SK ENTITY#{entity}                        an entity item
//	       LIMITS#ENTITY#{entity}#{resource}      limits stored for an entity ("*": every resource)
//	       LIMITS#RESOURCE#{resource}             limits stored for a resource, any entity
//
// GSI3 is keys-only, so an entry is written only when its item is created
// or deleted; configuration writes are rare, so one partition key per
// namespace is not a hot key. The partition key cannot meet a bucket's
// GSI3PK ({ns}/ENTITY#{entity}): it has no '#'.
const (
	ConfigEntityPrefix = "ENTITY#"
	ConfigLimitsPrefix = "LIMITS#"
	configEntityLimits = ConfigLimitsPrefix + "ENTITY#"
	configResLimits    = ConfigLimitsPrefix + "RESOURCE#"
)

// ConfigIndexPK returns the GSI3 partition key of a namespace's
// configuration items.
func ConfigIndexPK(ns string) string { return ns + "/CONFIG" }

// EntityIndexSK returns the GSI3 sort key of an entity item.
func EntityIndexSK(entity string) string { return ConfigEntityPrefix + entity }

// LimitsIndexSK returns the GSI3 sort key of a stored-limits item: of an
// entity on a resource (AnyResource for every resource) when entity is set,
// of a resource for every entity when entity is "".
func LimitsIndexSK(entity, resource string) string {
	if entity == "" {
		return configResLimits + resource
	}
	return configEntityLimits + entity + "#" + resource
}

// ParseConfigIndexSK parses a configuration index sort key. For an entity
// item, limits is false and entity is set; for stored limits, limits is
// true and entity ("" for a resource's limits) and resource (AnyResource
// for an entity's default) are set. ok is false for any other key.
func ParseConfigIndexSK(sk string) (entity, resource string, limits, ok bool) {
	switch {
	case strings.HasPrefix(sk, configEntityLimits):
		e, r, found := strings.Cut(sk[len(configEntityLimits):], "#")
		if !found || e == "" || r == "" || strings.Contains(r, "#") {
			return "", "", false, false
		}
		return e, r, true, true
	case strings.HasPrefix(sk, configResLimits):
		r := sk[len(configResLimits):]
		if r == "" || strings.Contains(r, "#") {
			return "", "", false, false
		}
		return "", r, true, true
	case strings.HasPrefix(sk, ConfigEntityPrefix):
		e := sk[len(ConfigEntityPrefix):]
		if e == "" || strings.Contains(e, "#") {
			return "", "", false, false
		}
		return e, "", false, true
	}
	return "", "", false, false
}

// BucketIndexPrefix is the prefix of a bucket's GSI3 sort keys: the GSI3
// partition of an entity ({ns}/ENTITY#{entity}) holds one entry per shard
// item of each of its buckets, BUCKET#{resource}#{shard}. With resource ""
// it selects every bucket of the entity.
func BucketIndexPrefix(resource string) string {
	if resource == "" {
		return "BUCKET#"
	}
	return "BUCKET#" + resource + "#"
}

// ParseBucketIndexSK parses a bucket's GSI3 sort key.
func ParseBucketIndexSK(sk string) (resource string, shard int, ok bool) {
	rest, found := strings.CutPrefix(sk, "BUCKET#")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '#')
	if i <= 0 || strings.Contains(rest[:i], "#") {
		return "", 0, false
	}
	shard, err := strconv.Atoi(rest[i+1:])
	if err != nil || shard < 0 || strconv.Itoa(shard) != rest[i+1:] {
		return "", 0, false
	}
	return rest[:i], shard, true
}

// Audit records. Every configuration change the limiter makes (entities,
// stored limits, bucket resets) writes one, in the same transaction:
//
//	audit record  PK {ns}/AUDIT#ENTITY#{entity}     SK {inverted ms}#{seq}   changes to an entity, its limits, its buckets
//	              PK {ns}/AUDIT#RESOURCE#{resource} SK {inverted ms}#{seq}   changes to the limits of a resource
//
// The inverted time (MaxAuditMs minus Unix ms, 13 digits) makes a Query in
// ascending sort-key order return the newest record first. seq tells apart
// records of one millisecond.
const MaxAuditMs = 9_999_999_999_999 // Unix ms of the year 2286

// AuditPK returns the partition key of the audit records of an entity
// (entity set) or of a resource's limits (entity "").
func AuditPK(ns, entity, resource string) string {
	if entity == "" {
		return ns + "/AUDIT#RESOURCE#" + resource
	}
	return ns + "/AUDIT#ENTITY#" + entity
}

// AuditSK returns the sort key of an audit record made at t.
func AuditSK(t time.Time, seq uint64) string {
	ms := min(max(t.UnixMilli(), 0), MaxAuditMs)
	return fmt.Sprintf("%013d#%x", MaxAuditMs-ms, seq)
}
