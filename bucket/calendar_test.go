package bucket

import (
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone %s: %v", name, err)
	}
	return loc
}

// A billing cycle anchored on the 31st runs to the last day of a short
// month and back to the 31st after it: no month is skipped or doubled.
func TestMonthAnchoredOnThe31stEndsOnTheLastDayOfShortMonths(t *testing.T) {
	c := Calendar{Window: Month, MonthDay: 31}
	at := func(s string) int64 {
		tm, err := time.Parse(time.DateTime, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	for _, tc := range []struct{ now, start, end string }{
		{"2027-02-10 12:00:00", "2027-01-31 00:00:00", "2027-02-28 00:00:00"},
		{"2027-02-28 00:00:00", "2027-02-28 00:00:00", "2027-03-31 00:00:00"},
		{"2028-02-29 10:00:00", "2028-02-29 00:00:00", "2028-03-31 00:00:00"},
		{"2027-04-29 23:59:59", "2027-03-31 00:00:00", "2027-04-30 00:00:00"},
		{"2027-05-01 00:00:00", "2027-04-30 00:00:00", "2027-05-31 00:00:00"},
		{"2027-12-31 08:00:00", "2027-12-31 00:00:00", "2028-01-31 00:00:00"},
		{"2028-01-15 00:00:00", "2027-12-31 00:00:00", "2028-01-31 00:00:00"},
	} {
		s, e := c.Bounds(at(tc.now))
		if s != at(tc.start) || e != at(tc.end) {
			t.Errorf("at %s: window [%s, %s), want [%s, %s)", tc.now,
				time.UnixMilli(s).UTC().Format(time.DateTime), time.UnixMilli(e).UTC().Format(time.DateTime), tc.start, tc.end)
		}
	}
}

// Boundaries are local midnights: the October day Paris leaves summer time
// lasts 25 hours, the March one 23, and a month in Paris starts at 22:00
// or 23:00 UTC.
func TestWindowsFollowTheZonesClockChanges(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	day := Calendar{Window: Day, Loc: paris}
	for _, tc := range []struct {
		date  string
		hours int64
	}{{"2027-10-31", 25}, {"2027-03-28", 23}, {"2027-06-01", 24}} {
		d, _ := time.ParseInLocation(time.DateOnly, tc.date, paris)
		s, e := day.Bounds(d.Add(12 * time.Hour).UnixMilli())
		if s != d.UnixMilli() || (e-s)/3_600_000 != tc.hours {
			t.Errorf("%s: day [%d, %d) of %d h, want from %d, %d h", tc.date, s, e, (e-s)/3_600_000, d.UnixMilli(), tc.hours)
		}
	}
	month := Calendar{Window: Month, Loc: paris}
	s, e := month.Bounds(time.Date(2027, 10, 31, 22, 59, 0, 0, time.UTC).UnixMilli())
	if got := time.UnixMilli(s).UTC(); got != time.Date(2027, 9, 30, 22, 0, 0, 0, time.UTC) {
		t.Errorf("October in Paris starts at %v UTC, want 22:00 on 30 September", got)
	}
	if got := time.UnixMilli(e).UTC(); got != time.Date(2027, 10, 31, 23, 0, 0, 0, time.UTC) {
		t.Errorf("October in Paris ends at %v UTC, want 23:00 on 31 October (winter time)", got)
	}
}

// A zone whose clocks skip midnight (Santiago in September) still tiles
// time: every instant is in exactly one window, start <= now < end, and
// the end of one window is the start of the next.
func TestWindowsTileTimeAcrossASkippedMidnight(t *testing.T) {
	loc := mustZone(t, "America/Santiago")
	for _, w := range []Window{Day, Week, Month} {
		c := Calendar{Window: w, Loc: loc, WeekStart: time.Sunday}
		from := time.Date(2027, 8, 20, 0, 0, 0, 0, time.UTC).UnixMilli()
		_, end := c.Bounds(from)
		for now := from; now < from+40*86_400_000; now += 15 * 60_000 {
			s, e := c.Bounds(now)
			if s > now || e <= now {
				t.Fatalf("%v at %v: window [%v, %v) misses it", w, time.UnixMilli(now).In(loc), time.UnixMilli(s).In(loc), time.UnixMilli(e).In(loc))
			}
			if now >= end {
				if s != end {
					t.Fatalf("%v: window after %v starts at %v", w, time.UnixMilli(end).In(loc), time.UnixMilli(s).In(loc))
				}
				end = e
			}
		}
	}
}

func TestWeekStartsOnWeekStart(t *testing.T) {
	c := Calendar{Window: Week, WeekStart: time.Monday}
	// Sunday 7 March 2027, 10:00 UTC: the week began Monday 1 March.
	s, e := c.Bounds(time.Date(2027, 3, 7, 10, 0, 0, 0, time.UTC).UnixMilli())
	if s != time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli() || e != time.Date(2027, 3, 8, 0, 0, 0, 0, time.UTC).UnixMilli() {
		t.Errorf("week [%v, %v)", time.UnixMilli(s).UTC(), time.UnixMilli(e).UTC())
	}
}
