package aggregator

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Delta is the consumption one stream record shows for one limit of one
// bucket shard.
type Delta struct {
	// Namespace, Entity, Resource and Shard identify the bucket shard
	// (from the item's key).
	Namespace string
	Entity    string
	Resource  string
	Shard     int
	// Limit is the limit's name (never the hidden "wcu").
	Limit string
	// Amount is the change of the limit's tc, in millitokens: positive for
	// a charge, negative for a refund (Adjust down, Rollback).
	Amount int64
	// At is when the change was made: the record's time, or the new
	// image's rf when the record has none. (rf is not the time of the
	// write: the hot path charges without moving it.)
	At time.Time
}

// ExtractDeltas returns the consumption deltas of one record, one per limit
// whose total-consumed counter b_{limit}_tc changed, in limit-name order:
//
//   - MODIFY: new tc minus old tc (a limit new to the item counts from 0;
//     a limit removed from the item yields nothing);
//   - INSERT: the whole tc (a new bucket's tc is its first charge);
//   - REMOVE (a deleted or expired bucket): nothing.
//
// The hidden wcu limit never yields a delta. Records of other items
// (entities, stored limits, the schema version, usage snapshots) yield
// nothing and no error. A record that cannot be interpreted (an unknown
// event name, a missing image, a bucket attribute that is not a number, a
// time out of range) yields a *MalformedError naming the field.
func ExtractDeltas(r Record) ([]Delta, error) {
	b, ok, err := checkRecord(r)
	if err != nil || !ok || r.EventName == EventRemove {
		return nil, err
	}
	at, err := recordTime(r)
	if err != nil {
		return nil, err
	}
	return extractDeltas(r, b, at)
}

// extractDeltas is ExtractDeltas for a record checkRecord accepted.
func extractDeltas(r Record, b keys.Bucket, at time.Time) ([]Delta, error) {
	var ds []Delta
	var bad *MalformedError
	for name, v := range r.New {
		limit, field, ok := bucket.ParseAttrName(name)
		if rest, quota := strings.CutPrefix(name, "q_"); !ok && quota {
			// A calendar quota's total consumed, q_{limit}_tc, is usage too.
			limit, ok = strings.CutSuffix(rest, "_"+bucket.FieldTotalConsumed)
			field = bucket.FieldTotalConsumed
		}
		if !ok || limit == "" || field != bucket.FieldTotalConsumed || limit == keys.HiddenLimit {
			continue
		}
		nv, _ := v.AsInt()       // checkRecord made sure it is a number
		ov, _ := r.Old.Int(name) // 0 when absent (INSERT, or a limit new to the item)
		d := nv - ov
		if (d < nv) != (ov > 0) { // the subtraction overflowed
			if bad == nil || "NewImage."+name < bad.Field {
				bad = malformed("NewImage."+name, "change of "+strconv.FormatInt(nv, 10)+" - "+
					strconv.FormatInt(ov, 10)+" overflows an int64")
			}
			continue
		}
		if d != 0 {
			ds = append(ds, Delta{Namespace: b.Namespace, Entity: b.Entity, Resource: b.Resource, Shard: b.Shard,
				Limit: limit, Amount: d, At: at})
		}
	}
	if bad != nil {
		return nil, bad
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Limit < ds[j].Limit })
	return ds, nil
}

// checkRecord validates what the aggregator reads from a record and
// returns the bucket shard it concerns; ok is false for other items.
func checkRecord(r Record) (b keys.Bucket, ok bool, err error) {
	switch r.EventName {
	case EventInsert, EventModify, EventRemove:
	case "":
		return b, false, malformed("EventName", "missing")
	default:
		return b, false, malformed("EventName", strconv.Quote(r.EventName)+" is not INSERT, MODIFY or REMOVE")
	}
	if r.Keys.PK == "" {
		return b, false, malformed("Keys.PK", "missing")
	}
	if b, ok = bucketOf(r.Keys); !ok {
		return b, false, nil
	}
	switch r.EventName {
	case EventInsert:
		if r.New == nil {
			return b, true, malformed("NewImage", "missing from an INSERT record")
		}
	case EventModify:
		if r.New == nil {
			return b, true, malformed("NewImage", "missing from a MODIFY record")
		}
		if r.Old == nil {
			return b, true, malformed("OldImage", "missing from a MODIFY record (the stream must be NEW_AND_OLD_IMAGES)")
		}
	}
	if err := checkImage("OldImage", r.Keys, r.Old); err != nil {
		return b, true, err
	}
	return b, true, checkImage("NewImage", r.Keys, r.New)
}

// checkImage checks that the attributes the aggregator reads from a bucket
// image have the right types: numbers for rf, shard_count and every
// b_{limit}_{field}, and the record's key for PK and SK when present. Of
// several bad attributes it reports the first by name, whatever the map
// order.
func checkImage(field string, k store.Key, it store.Item) error {
	var bad *MalformedError
	for name, v := range it {
		if bad != nil && field+"."+name >= bad.Field {
			continue
		}
		switch name {
		case store.AttrPK, store.AttrSK:
			want := k.PK
			if name == store.AttrSK {
				want = k.SK
			}
			if s, ok := v.AsString(); !ok || s != want {
				bad = malformed(field+"."+name, "is "+v.String()+", not the record's key "+strconv.Quote(want))
			}
			continue
		case bucket.AttrRefill, keys.AttrShardCount:
		default:
			if _, _, ok := bucket.ParseAttrName(name); !ok {
				continue
			}
		}
		if v.Kind() != "N" {
			bad = malformed(field+"."+name, "is "+v.String()+", want a number")
		}
	}
	if bad != nil {
		return bad
	}
	return nil
}

// recordTime returns the time of a bucket record: At, or the new image's
// rf when At is zero.
func recordTime(r Record) (time.Time, error) {
	at, field := r.At.UTC(), "At"
	if r.At.IsZero() {
		rf, ok := r.New.Int(bucket.AttrRefill)
		if !ok {
			return time.Time{}, malformed("At", "missing, and the new image has no rf")
		}
		at, field = time.UnixMilli(rf).UTC(), "NewImage.rf"
	}
	if !keys.UsageTimeOK(at) {
		return time.Time{}, malformed(field, at.Format(time.RFC3339)+" is outside the years 1970 to 9999")
	}
	return at, nil
}
