// Package items is the stored form of the configuration both planes use:
// entity items, stored-limits items and the table's schema-version item.
// The limiter reads them on its acquire path; package admin writes them.
// Their keys are in internal/keys.
package items

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Attributes of configuration items.
const (
	AttrParent  = "parent_id"
	AttrCascade = "cascade"
	AttrLimits  = "limits"
	AttrMode    = "mode"
	AttrVersion = "version"
)

// Modes of a scope, stored in the mode attribute of its limits item
// (absent: the scope enforces its limits). A limits item holds limits, a
// mode, or both.
const (
	// ModeAdmit: every acquire in the scope is admitted without a write.
	ModeAdmit = "admit"
	// ModeRefuse: every acquire in the scope is refused without a write.
	ModeRefuse = "refuse"
	// ModeShadow: every limit of the scope's acquires is a shadow limit.
	ModeShadow = "shadow"
)

// DecodeMode reads a scope's mode from its limits item (nil: no item,
// mode ""); an unknown mode is an error.
func DecodeMode(it store.Item) (string, error) {
	m, _ := it.Str(AttrMode)
	switch m {
	case "", ModeAdmit, ModeRefuse, ModeShadow:
		return m, nil
	}
	return "", errors.New("limiter: stored mode " + strconv.Quote(m) + " is unknown (this library knows admit, refuse and shadow)")
}

// SchemaVersion is the version of the table layout this library writes. It
// is stored once per table (PK "#SCHEMA", SK "#VERSION", attribute
// "version").
const SchemaVersion = 1

// ErrSchemaVersion: the table was written with a layout this library does
// not know (limiter.ErrSchemaVersion).
var ErrSchemaVersion = errors.New("limiter: unknown table schema version")

// Limit is a limit as stored, in tokens: limiter.Limit, whose fields
// these are. The functions take and return it as a type parameter, so that
// the limiter and the admin pass their own slices.
type Limit interface {
	~struct {
		Name                    string
		Capacity, Burst, Refill int64
		Period                  time.Duration

		Window, TimeZone string
		WeekStart        time.Weekday
		MonthDay         int
		Shadow           bool
		TTL              time.Duration
	}
}

// fields is a Limit's struct, to read a type parameter's fields.
type fields struct {
	Name                    string
	Capacity, Burst, Refill int64
	Period                  time.Duration

	Window, TimeZone string
	WeekStart        time.Weekday
	MonthDay         int
	Shadow           bool
	TTL              time.Duration
}

// Entity is a stored entity.
type Entity struct {
	ID, Parent string
	Cascade    bool
}

// EntityItem is the stored form of an entity, with its configuration
// index entry.
func EntityItem(ns string, e Entity) store.Item {
	k := keys.Entity(ns, e.ID)
	cascade := int64(0)
	if e.Cascade {
		cascade = 1
	}
	it := store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK),
		keys.AttrEntity: store.Str(e.ID), AttrCascade: store.Int(cascade),
		store.AttrGSI3PK: store.Str(keys.ConfigIndexPK(ns)), store.AttrGSI3SK: store.Str(keys.EntityIndexSK(e.ID))}
	if e.Parent != "" {
		it[AttrParent] = store.Str(e.Parent)
	}
	return it
}

// DecodeEntity reads the entity id from its item.
func DecodeEntity(id string, it store.Item) Entity {
	e := Entity{ID: id}
	e.Parent, _ = it.Str(AttrParent)
	c, _ := it.Int(AttrCascade)
	e.Cascade = c != 0 && e.Parent != ""
	return e
}

// LimitsItem is the stored form, at key k, of the limits and the mode of
// the scope (entity, resource) (entity "" for a resource's, resource ""
// for an entity's on every resource), with its configuration index entry;
// nil when there are neither limits nor a mode (the scope stores nothing).
func LimitsItem[L Limit](ns string, k store.Key, entity, resource string, limits []L, mode string) store.Item {
	if len(limits) == 0 && mode == "" {
		return nil
	}
	it := ScopeItem(ns, k, entity, resource)
	if len(limits) > 0 {
		it[AttrLimits] = store.Str(encodeLimits(limits))
	}
	if mode != "" {
		it[AttrMode] = store.Str(mode)
	}
	return it
}

// encodeLimits is the stored form: "name=capacity/burst/refill/periodMs;..."
// in tokens and milliseconds (burst 0 stored as the capacity), with "/s"
// after a shadow limit's period; a calendar quota's refill and period are
// 0, followed (after any "/s") by "|window|timeZone|weekStart|monthDay"
// ("tpd=1000/1000/0/0/s|month|Europe/Paris|0|15"); a concurrency cap's
// calendar is "|concurrent||0|0" and its TTL (ms) follows
// ("inflight=10/10/0/0|concurrent||0|0|300000").
func encodeLimits[L Limit](ls []L) string {
	var b strings.Builder
	for i, l := range ls {
		x := fields(l)
		if i > 0 {
			b.WriteByte(';')
		}
		burst := x.Burst
		if burst == 0 {
			burst = x.Capacity
		}
		b.WriteString(x.Name + "=" + strconv.FormatInt(x.Capacity, 10) + "/" + strconv.FormatInt(burst, 10) +
			"/" + strconv.FormatInt(x.Refill, 10) + "/" + strconv.FormatInt(x.Period.Milliseconds(), 10))
		if x.Shadow {
			b.WriteString("/s")
		}
		if x.Window != "" {
			b.WriteString("|" + x.Window + "|" + x.TimeZone + "|" + strconv.Itoa(int(x.WeekStart)) + "|" + strconv.Itoa(x.MonthDay))
		}
		if x.TTL != 0 {
			b.WriteString("|" + strconv.FormatInt(x.TTL.Milliseconds(), 10))
		}
	}
	return b.String()
}

// ScopeItem is the item of a scope's limits and mode (see LimitsItem)
// with neither: its key and its configuration index entry.
func ScopeItem(ns string, k store.Key, entity, resource string) store.Item {
	if entity != "" && resource == "" {
		resource = keys.AnyResource
	}
	return store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK),
		store.AttrGSI3PK: store.Str(keys.ConfigIndexPK(ns)), store.AttrGSI3SK: store.Str(keys.LimitsIndexSK(entity, resource))}
}

// DecodeLimits decodes a stored limits item, checking each limit with
// valid (limiter.Limit.Validate); ok is false for no item, or an item that
// holds a mode alone.
func DecodeLimits[L Limit](it store.Item, valid func(L) error) (_ []L, ok bool, _ error) {
	if it == nil {
		return nil, false, nil
	}
	s, ok := it.Str(AttrLimits)
	if _, hasMode := it.Str(AttrMode); !ok && hasMode {
		return nil, false, nil
	}
	if !ok {
		return nil, false, errors.New("limiter: stored limits item has no limits attribute")
	}
	var ls []L
	for _, part := range strings.Split(s, ";") {
		name, rest, ok := strings.Cut(part, "=")
		rest, cal, isQuota := strings.Cut(rest, "|")
		f := strings.Split(rest, "/")
		shadow := len(f) == 5 && f[4] == "s"
		if shadow {
			f = f[:4]
		}
		if !ok || len(f) != 4 {
			return nil, false, errors.New("limiter: malformed stored limits " + strconv.Quote(s))
		}
		var q fields
		if isQuota {
			c := strings.Split(cal, "|")
			var ttl int64
			if len(c) == 5 {
				var err error
				if ttl, err = strconv.ParseInt(c[4], 10, 64); err != nil {
					return nil, false, errors.New("limiter: malformed stored limits " + strconv.Quote(s))
				}
				c = c[:4]
			}
			if len(c) != 4 {
				return nil, false, errors.New("limiter: malformed stored limits " + strconv.Quote(s))
			}
			ws, err1 := strconv.Atoi(c[2])
			md, err2 := strconv.Atoi(c[3])
			if err1 != nil || err2 != nil {
				return nil, false, errors.New("limiter: malformed stored limits " + strconv.Quote(s))
			}
			q = fields{Window: c[0], TimeZone: c[1], WeekStart: time.Weekday(ws), MonthDay: md, TTL: time.Duration(ttl) * time.Millisecond}
		}
		var v [4]int64
		for i := range f {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return nil, false, errors.New("limiter: malformed stored limits " + strconv.Quote(s))
			}
			v[i] = n
		}
		x := L(fields{Name: name, Capacity: v[0], Burst: v[1], Refill: v[2], Period: time.Duration(v[3]) * time.Millisecond,
			Window: q.Window, TimeZone: q.TimeZone, WeekStart: q.WeekStart, MonthDay: q.MonthDay, Shadow: shadow, TTL: q.TTL})
		if err := valid(x); err != nil {
			return nil, false, errors.New("limiter: stored limits: " + err.Error())
		}
		ls = append(ls, x)
	}
	return ls, true, nil
}

// Version returns the version a schema-version item holds.
func Version(it store.Item) int64 {
	v, _ := it.Int(AttrVersion)
	return v
}

// CheckSchema verifies the table's schema-version item it (nil: there is
// none), writing it when there is none. counted is told of the write.
func CheckSchema(ctx context.Context, st store.Store, it store.Item, counted func(store.Capacity, error)) error {
	if it == nil {
		k := keys.Schema()
		put := store.PutInput{
			Item: store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK), AttrVersion: store.Int(SchemaVersion)},
			Expr: keys.IfAbsent(), ReturnOldOnConditionFailure: true,
		}
		out, err := st.Put(ctx, put)
		counted(out.Consumed, err)
		var cf *store.ConditionFailedError
		if errors.As(err, &cf) {
			return CheckSchema(ctx, st, cf.Item, counted)
		}
		return err
	}
	if v := Version(it); v != SchemaVersion {
		return errors.Join(ErrSchemaVersion, errors.New("limiter: table has schema version "+strconv.FormatInt(v, 10)+
			", this limiter writes version "+strconv.Itoa(SchemaVersion)+"; upgrade the library"))
	}
	return nil
}
