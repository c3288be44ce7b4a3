package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Scan: every page of the table, filtered by a partition-key prefix.

var scanCases = []testCase{
	{"PrefixAcrossPages", func(f *fixture) {
		for _, k := range scanKeys() {
			f.put(item(k, "n", 1))
		}
		want := []store.Key{{PK: "a/B#1", SK: "#S"}, {PK: "a/B#2", SK: "#S"}, {PK: "a/E#1", SK: "#L"}, {PK: "a/E#1", SK: "#M"}}
		for _, limit := range []int{0, 1, 3} {
			f.expectScan("a/", limit, want)
		}
		if _, pages, err := f.scanAll("a/", 1); err != nil || pages < len(scanKeys()) {
			f.t.Errorf("Scan with Limit 1 over %d items took %d pages (err %v), want at least %d", len(scanKeys()), pages, err, len(scanKeys()))
		}
	}},
	{"EmptyPrefixReadsAll", func(f *fixture) {
		want := scanKeys()
		for _, k := range want {
			f.put(item(k, "n", 1))
		}
		slices.SortFunc(want, func(a, b store.Key) int { return strings.Compare(a.PK+"\x00"+a.SK, b.PK+"\x00"+b.SK) })
		f.expectScan("", 2, want)
	}},
	{"EmptyTable", func(f *fixture) {
		out, err := f.s.Scan(f.ctx, store.ScanInput{})
		if err != nil || len(out.Items) != 0 || out.Next != nil {
			f.t.Errorf("Scan of an empty table = %+v, %v; want no items, no Next, no error", out, err)
		}
	}},
	{"NegativeLimit", func(f *fixture) {
		_, err := f.s.Scan(f.ctx, store.ScanInput{Limit: -1})
		var v *store.ValidationError
		if !errors.As(err, &v) {
			f.t.Errorf("Scan with Limit -1: error %v, want a *store.ValidationError", err)
		}
	}},
}

// scanAll reads every page of a scan (limit items a page) and returns the
// keys of the items in key order, and the number of pages.
func (f *fixture) scanAll(prefix string, limit int) ([]store.Key, int, error) {
	var got []store.Key
	in := store.ScanInput{PartitionKeyPrefix: prefix, Limit: limit}
	for pages := 1; ; pages++ {
		out, err := f.s.Scan(f.ctx, in)
		if err != nil {
			return nil, pages, err
		}
		for _, it := range out.Items {
			k, ok := it.Key()
			if !ok {
				return nil, pages, fmt.Errorf("Scan returned an item without a key: %v", it)
			}
			if !strings.HasPrefix(k.PK, prefix) {
				return nil, pages, fmt.Errorf("Scan(prefix %q) returned %v", prefix, k)
			}
			got = append(got, k)
		}
		if out.Next == nil {
			slices.SortFunc(got, func(a, b store.Key) int { return strings.Compare(a.PK+"\x00"+a.SK, b.PK+"\x00"+b.SK) })
			return got, pages, nil
		}
		in.Start = out.Next
	}
}

// expectScan waits for a full scan (eventually consistent) to return
// exactly want, in key order.
func (f *fixture) expectScan(prefix string, limit int, want []store.Key) {
	f.t.Helper()
	f.eventually(func() string {
		got, _, err := f.scanAll(prefix, limit)
		if err != nil {
			return err.Error()
		}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("Scan(prefix %q, limit %d) = %v, want %v", prefix, limit, got, want)
		}
		return ""
	})
}

func scanKeys() []store.Key {
	return []store.Key{
		{PK: "a/B#1", SK: "#S"}, {PK: "a/B#2", SK: "#S"}, {PK: "a/E#1", SK: "#M"}, {PK: "a/E#1", SK: "#L"},
		{PK: "ab/B#1", SK: "#S"}, {PK: "b/B#1", SK: "#S"}, {PK: "#SCHEMA", SK: "#V"},
	}
}
