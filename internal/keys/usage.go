package keys

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/store"
)

// Usage snapshots. The aggregator writes them from the change stream; the
// limiter's Usage query reads them. One item per bucket shard and window:
//
//	usage snapshot  PK {ns}/USAGE#{entity}   SK {W}#{resource}#{start}#{shard}
//
// W is the window code (H hourly, D daily, M monthly); start is the
// window's first instant in UTC, formatted so that byte order is time order
// ("2026-01-05T07", "2026-01-05", "2026-01"); shard is the bucket shard the
// usage was charged to. All of an entity's snapshots share one partition,
// so a Query with a sort-key prefix ({W}#{resource}#{day or month or year})
// finds every shard of every window of one period at once.
//
// Attributes, besides the keys:
//
//	tc_{limit}   number: millitokens consumed in the window (ADDed; refunds subtract)
//	ev_{limit}   number: writes that changed the limit's tc in the window (ADDed)
//	sq           string: the high-water mark, the sequence number (EncodeSeq)
//	             of the last stream record of the shard item applied here
//	uw, ws       the window code and its start (Unix ms)
//	entity_id, resource, shard   as on the bucket item, for humans
//	ttl          expiry (Unix seconds), when the aggregator sets a retention
//
// One source item (a bucket shard) per snapshot item is what makes the
// single high-water mark enough for idempotency; see docs/aggregator.md.

// UsageWindow is the span of a usage snapshot.
type UsageWindow uint8

// Usage windows, aligned on UTC.
const (
	WindowHour UsageWindow = iota + 1
	WindowDay
	WindowMonth
)

// Attributes of a usage snapshot item.
const (
	AttrUsageSeq    = "sq"
	AttrUsageWindow = "uw"
	AttrUsageStart  = "ws"
	usageConsumed   = "tc_"
	usageEvents     = "ev_"
)

// MinUsageTime and MaxUsageTime bound the instants a snapshot may cover,
// [MinUsageTime, MaxUsageTime): outside them a window start does not format
// to a fixed-width (four-digit year) key.
var (
	MinUsageTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxUsageTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// UsageTimeOK reports whether t is in [MinUsageTime, MaxUsageTime).
func UsageTimeOK(t time.Time) bool { return !t.Before(MinUsageTime) && t.Before(MaxUsageTime) }

// Valid reports whether w is one of the windows.
func (w UsageWindow) Valid() bool { return w >= WindowHour && w <= WindowMonth }

// windowNames are each window's key code, noun, adjective and key layout
// (by UsageWindow; index 0 is no window).
var windowNames = [...]struct{ code, noun, adjective, layout string }{
	{"", "invalid", "", ""},
	WindowHour:  {"H", "hour", "hourly", "2006-01-02T15"},
	WindowDay:   {"D", "day", "daily", "2006-01-02"},
	WindowMonth: {"M", "month", "monthly", "2006-01"},
}

func (w UsageWindow) names() struct{ code, noun, adjective, layout string } {
	if !w.Valid() {
		return windowNames[0]
	}
	return windowNames[w]
}

// Code returns the one-letter code of w used in keys: H, D or M ("" for
// an invalid window).
func (w UsageWindow) Code() string { return w.names().code }

// UsageWindowOf returns the window whose Code is code.
func UsageWindowOf(code string) (UsageWindow, bool) {
	for w := WindowHour; w <= WindowMonth; w++ {
		if code == w.Code() {
			return w, true
		}
	}
	return 0, false
}

// String returns "hour", "day" or "month" ("invalid" for an invalid
// window).
func (w UsageWindow) String() string { return w.names().noun }

// Adjective returns "hourly", "daily" or "monthly" ("" for an invalid
// window): the name the limiter's and the aggregator's window types print.
func (w UsageWindow) Adjective() string { return w.names().adjective }

// Start returns the start of the window of kind w that contains t, in UTC.
func (w UsageWindow) Start(t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	switch w {
	case WindowHour:
		return time.Date(y, m, d, t.Hour(), 0, 0, 0, time.UTC)
	case WindowDay:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case WindowMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

// End returns the end (exclusive) of the window of kind w that starts at
// start.
func (w UsageWindow) End(start time.Time) time.Time {
	switch w {
	case WindowHour:
		return start.Add(time.Hour)
	case WindowDay:
		return start.AddDate(0, 0, 1)
	case WindowMonth:
		return start.AddDate(0, 1, 0)
	}
	return start
}

// Format returns the key form of a window start of kind w.
func (w UsageWindow) Format(start time.Time) string { return start.UTC().Format(w.names().layout) }

// Period returns the query period that holds the window starting at start:
// its sort-key fragment (a day "2026-01-05T" for hourly windows, a month
// "2026-01-" for daily ones, a year "2026-" for monthly ones) and the start
// of the next period. The Usage query issues one Query per period.
func (w UsageWindow) Period(start time.Time) (prefix string, next time.Time) {
	t := start.UTC()
	y, m, d := t.Date()
	switch w {
	case WindowHour:
		return t.Format("2006-01-02T"), time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	case WindowDay:
		return t.Format("2006-01-"), time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
	case WindowMonth:
		return t.Format("2006-"), time.Date(y+1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return "", t
}

// UsagePK returns the partition key of an entity's usage snapshots.
func UsagePK(ns, entity string) string { return ns + "/USAGE#" + entity }

// Usage is the address of one usage snapshot: one window of one bucket
// shard.
type Usage struct {
	// Namespace, Entity and Resource are the bucket's; Shard its shard.
	Namespace string
	Entity    string
	Resource  string
	// Window is the snapshot's span.
	Window UsageWindow
	// Start is the window's start (see UsageWindow.Start).
	Start time.Time
	Shard int
}

// Key returns the table key of u.
func (u Usage) Key() store.Key {
	return store.Key{PK: UsagePK(u.Namespace, u.Entity),
		SK: u.Window.Code() + "#" + u.Resource + "#" + u.Window.Format(u.Start) + "#" + strconv.Itoa(u.Shard)}
}

// UsageSKPrefix returns the sort-key prefix of an entity's snapshots of
// kind w for resource whose start begins with period (see
// UsageWindow.Period; "" for every window).
func UsageSKPrefix(w UsageWindow, resource, period string) string {
	return w.Code() + "#" + resource + "#" + period
}

// ParseUsageSK parses the sort key of a usage snapshot. ok is false for any
// other sort key.
func ParseUsageSK(sk string) (w UsageWindow, resource string, start time.Time, shard int, ok bool) {
	parts := strings.Split(sk, "#")
	if len(parts) != 4 || parts[1] == "" {
		return 0, "", time.Time{}, 0, false
	}
	w, ok = UsageWindowOf(parts[0])
	if !ok {
		return 0, "", time.Time{}, 0, false
	}
	start, err := time.ParseInLocation(w.names().layout, parts[2], time.UTC)
	if err != nil || w.Format(start) != parts[2] {
		return 0, "", time.Time{}, 0, false
	}
	shard, err = strconv.Atoi(parts[3])
	if err != nil || shard < 0 || strconv.Itoa(shard) != parts[3] {
		return 0, "", time.Time{}, 0, false
	}
	return w, parts[1], start, shard, true
}

// UsageConsumedAttr returns the name of the attribute holding the
// millitokens limit consumed in a window: tc_{limit}.
func UsageConsumedAttr(limit string) string { return usageConsumed + limit }

// UsageEventsAttr returns the name of the attribute counting the writes
// that changed limit's usage in a window: ev_{limit}.
func UsageEventsAttr(limit string) string { return usageEvents + limit }

// ParseUsageAttr splits a snapshot's per-limit attribute name into its
// limit and kind (events false: tc_, consumed millitokens; true: ev_, the
// count). ok is false for any other attribute.
func ParseUsageAttr(attr string) (limit string, events, ok bool) {
	if l, ok := strings.CutPrefix(attr, usageConsumed); ok && l != "" {
		return l, false, true
	}
	if l, ok := strings.CutPrefix(attr, usageEvents); ok && l != "" {
		return l, true, true
	}
	return "", false, false
}

// MaxSeqDigits bounds the significant digits of a stream sequence number
// (DynamoDB's are 21 to 40 digits).
const MaxSeqDigits = 99

// ErrSeq is returned by EncodeSeq for a string that is not a sequence
// number.
var ErrSeq = errors.New("not a decimal sequence number of at most 99 significant digits")

// EncodeSeq returns the form of a stream sequence number that DynamoDB
// compares correctly as a string: the number of significant digits as two
// decimal digits, then the digits ("111" -> "03111"). Sequence numbers are
// too long for DynamoDB numbers (38 digits) and for int64; comparing the
// encoded strings byte by byte compares the numbers (by length, then
// lexicographically).
func EncodeSeq(seq string) (string, error) {
	if seq == "" {
		return "", ErrSeq
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return "", ErrSeq
		}
	}
	digits := strings.TrimLeft(seq, "0")
	if digits == "" {
		digits = "0"
	}
	if len(digits) > MaxSeqDigits {
		return "", ErrSeq
	}
	return fmt.Sprintf("%02d%s", len(digits), digits), nil
}

// CompareEncodedSeq compares two EncodeSeq results: -1, 0 or +1 as the
// sequence number a is less than, equal to or greater than b.
func CompareEncodedSeq(a, b string) int { return strings.Compare(a, b) }
