package bucket

import (
	"fmt"
	"time"
)

// Window is the length of a calendar quota's window.
type Window uint8

// The windows of a calendar quota. The zero Window is no window: a rate.
const (
	Day   Window = iota + 1 // from midnight to midnight
	Week                    // from midnight of a start day to the same a week later
	Month                   // from midnight of an anchor day to the same day a month later
)

// String returns the window's name: "day", "week" or "month".
func (w Window) String() string {
	switch w {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Window(%d)", uint8(w))
}

// A Calendar is the window of a quota: N per day, week or month, reset at
// each boundary (no sliding refill), in a time zone.
//
// Boundaries are local midnights: a day is the time between two
// midnights, so a day with a daylight-saving change lasts 23 or 25 hours
// (a zone whose clocks skip midnight starts that day at the first instant
// after it, as time.Date resolves it). A week starts at midnight of
// WeekStart. A month starts at midnight of day MonthDay (1 when 0); in a
// month shorter than MonthDay, on its last day: a cycle anchored on the
// 31st runs from 31 January to 28 (or 29) February, from then to 31 March.
type Calendar struct {
	// Window is the window's length: Day, Week or Month. The zero Window
	// is not a calendar (Valid reports false).
	Window Window
	// Loc is the time zone of the boundaries; nil is UTC.
	Loc *time.Location
	// WeekStart is the first day of a Week window (the zero value is
	// Sunday); other windows ignore it.
	WeekStart time.Weekday
	// MonthDay anchors a Month window: 1 to 31 (0 is 1).
	MonthDay int
}

// Valid reports whether c has a boundary: a known Window, a WeekStart in
// Sunday..Saturday, a MonthDay in 0..31.
func (c Calendar) Valid() bool {
	return c.Window >= Day && c.Window <= Month && c.WeekStart >= time.Sunday && c.WeekStart <= time.Saturday &&
		c.MonthDay >= 0 && c.MonthDay <= 31
}

// maxBoundarySteps bounds Bounds' search from now's local date.
const maxBoundarySteps = 4

// Bounds returns the window that holds the instant now (Unix ms): its start
// and its end (the next window's start), start <= now < end. c must be
// Valid, and now more than a window away from either end of int64 (else
// the answer is unspecified, but Bounds returns).
func (c Calendar) Bounds(now int64) (start, end int64) {
	loc := c.Loc
	if loc == nil {
		loc = time.UTC
	}
	t := time.UnixMilli(now).In(loc)
	y, m, d := t.Date()
	// boundary(i) is the i-th boundary from the one on or before t's
	// local date. Each is one time.Date of a calendar date, the same for
	// the window it ends and the one it starts: windows never overlap or
	// leave a gap, also across a clock change.
	var boundary func(i int) int64
	switch c.Window {
	case Week:
		back := (int(t.Weekday()) - int(c.WeekStart) + 7) % 7
		boundary = func(i int) int64 { return time.Date(y, m, d-back+7*i, 0, 0, 0, 0, loc).UnixMilli() }
	case Month:
		boundary = func(i int) int64 { return c.anchor(y, m+time.Month(i), loc).UnixMilli() }
	default:
		boundary = func(i int) int64 { return time.Date(y, m, d+i, 0, 0, 0, 0, loc).UnixMilli() }
	}
	// A midnight the clocks skip resolves to an instant an hour off its
	// date (time.Date's rule), which may put now on the other side of it:
	// one step either way. The bound stops the loops where a boundary is
	// out of int64 milliseconds (now within a window of either end of the
	// range), whose answer is then unspecified.
	i := 0
	for boundary(i) > now && i > -maxBoundarySteps {
		i--
	}
	for boundary(i+1) <= now && i < maxBoundarySteps {
		i++
	}
	return boundary(i), boundary(i + 1)
}

// anchor returns the start of the month window that begins in month m of
// year y: midnight of MonthDay, or of the month's last day when it is
// shorter.
func (c Calendar) anchor(y int, m time.Month, loc *time.Location) time.Time {
	// time.Date normalizes a month out of 1..12 into the next or the
	// previous year.
	last := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
	return time.Date(y, m, min(max(c.MonthDay, 1), last), 0, 0, 0, 0, loc)
}

// FieldWindow is the attribute field of a quota's window start (Unix ms).
const FieldWindow = "ws"

// QuotaAttrName returns the attribute name q_{limit}_{field} of a calendar
// quota: field FieldTokens (what is left in the window, millitokens),
// FieldCapacity (the quota, undivided), FieldWindow (the window's start)
// or FieldTotalConsumed. A quota's attributes are not b_ attributes:
// [Decode] leaves them out of a Composite.
func QuotaAttrName(limit, field string) string { return "q_" + limit + "_" + field }
