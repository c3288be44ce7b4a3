package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/limiter/store"
)

// WriteConcurrently, and the atomicity of conditional writes under
// concurrency.

var writeConcurrentlyCases = []testCase{
	// Results come back in the order of the writes, each the outcome of its
	// own write: a failed condition fails only its write.
	{"ResultsInOrder", func(f *fixture) {
		a, b, c, d, e := key("wc-a"), key("wc-b"), key("wc-c"), key("wc-d"), key("wc-e")
		itemA, itemB, itemD := item(a, "n", 1), item(b, "n", 1), item(d, "n", 4)
		f.put(itemA)
		f.put(itemB)
		f.put(itemD)
		results := f.s.WriteConcurrently(f.ctx, []store.Write{
			{Update: &store.UpdateInput{Key: a, Expr: f.expr(store.Update{}.Add("n", num(1)), nm(store.AttrPK).Exists()), Return: store.ReturnAllNew}},
			{Update: &store.UpdateInput{Key: b, Expr: f.expr(store.Update{}.Add("n", num(-5)), nm("n").GreaterThanEqual(num(5))), ReturnOldOnConditionFailure: true}},
			{Put: &store.PutInput{Item: item(c, "n", 3), Expr: f.expr(store.Update{}, nm(store.AttrPK).NotExists())}},
			{Delete: &store.DeleteInput{Key: d, Return: store.ReturnAllOld}},
			{Update: &store.UpdateInput{Key: e, Expr: f.expr(store.Update{}.Add("n", num(5)), store.Condition{}), Return: store.ReturnUpdatedNew}},
		})
		if len(results) != 5 {
			f.t.Fatalf("WriteConcurrently returned %d results for 5 writes", len(results))
		}
		for i, r := range results {
			if i == 1 {
				continue
			}
			if r.Err != nil {
				f.t.Errorf("write %d: %v", i, r.Err)
			} else {
				expectWriteUnits(f.t, fmt.Sprintf("write %d", i), r.Output.Consumed)
			}
		}
		expectConditionFailed(f.t, results[1].Err, itemB)
		expectAttrs(f.t, "write 0 ALL_NEW", item(a, "n", 2), results[0].Output.Attributes)
		expectAttrs(f.t, "write 2 ReturnNone", nil, results[2].Output.Attributes)
		expectAttrs(f.t, "write 3 ALL_OLD", itemD, results[3].Output.Attributes)
		expectAttrs(f.t, "write 4 UPDATED_NEW", attrs("n", 5), results[4].Output.Attributes)

		f.expect(a, item(a, "n", 2))
		f.expect(b, itemB)
		f.expect(c, item(c, "n", 3))
		f.expect(d, nil)
		f.expect(e, item(e, "n", 5))
	}},
	{"ValidationIsPerWrite", func(f *fixture) {
		a, b := key("wc-a"), key("wc-b")
		itemA := item(a, "n", 1)
		f.put(itemA)
		results := f.s.WriteConcurrently(f.ctx, []store.Write{
			{Update: &store.UpdateInput{Key: a, Expr: raw("SET #a = :v REMOVE #a", "", nameN, value1)}},
			{Update: &store.UpdateInput{Key: b, Expr: f.expr(store.Update{}.Add("n", num(1)), store.Condition{})}},
		})
		if len(results) != 2 {
			f.t.Fatalf("WriteConcurrently returned %d results for 2 writes", len(results))
		}
		expectValidation(f.t, results[0].Err, "overlap")
		if results[1].Err != nil {
			f.t.Errorf("write 1: %v", results[1].Err)
		}
		f.expect(a, itemA)
		f.expect(b, item(b, "n", 1))

		// A Check belongs to a transaction: alone or beside a write, it fails
		// that Write alone and nothing is written.
		exists := f.expr(store.Update{}, nm(store.AttrPK).Exists())
		results = f.s.WriteConcurrently(f.ctx, []store.Write{
			{Check: &store.CheckInput{Key: a, Expr: exists}},
			{Put: &store.PutInput{Item: item(b, "n", 7)}, Check: &store.CheckInput{Key: a, Expr: exists}},
			{Update: &store.UpdateInput{Key: b, Expr: f.expr(store.Update{}.Add("n", num(1)), store.Condition{})}},
		})
		for i, r := range results[:2] {
			if !errors.Is(r.Err, store.ErrValidation) {
				f.t.Errorf("write %d with a Check: %v, want a ValidationError", i, r.Err)
			}
		}
		if results[2].Err != nil {
			f.t.Errorf("write 2: %v", results[2].Err)
		}
		f.expect(a, itemA)
		f.expect(b, item(b, "n", 2))
	}},
	{"NoWrites", func(f *fixture) {
		if results := f.s.WriteConcurrently(f.ctx, nil); len(results) != 0 {
			f.t.Errorf("WriteConcurrently(nil) = %v, want no results", results)
		}
	}},
}

var concurrencyCases = []testCase{
	// Goroutines race conditional decrements of one item. Conditional writes
	// are atomic, so the final state accounts for exactly the writes that
	// succeeded: tokens never go negative, and no successful write is lost.
	{"NoLostUpdates", func(f *fixture) {
		const (
			workers   = 16
			perWorker = 50
			initial   = 500 // fewer tokens than attempts: some writes must fail
		)
		k := key("hot")
		f.put(item(k, "tk", initial, "n", 0))
		e := f.expr(store.Update{}.Add("tk", num(-1)).Add("n", num(1)), nm("tk").GreaterThanEqual(num(1)))

		var (
			ok, denied, throttled atomic.Int64
			mu                    sync.Mutex
			unexpected            []error
			wg                    sync.WaitGroup
		)
		for range workers {
			wg.Go(func() {
				for range perWorker {
					_, err := f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: e})
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, store.ErrConditionFailed):
						denied.Add(1)
					case errors.Is(err, store.ErrThrottled):
						// Not applied; DynamoDB may throttle a hot item.
						throttled.Add(1)
					default:
						mu.Lock()
						unexpected = append(unexpected, err)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(unexpected) > 0 {
			f.t.Fatalf("%d concurrent Updates failed unexpectedly, the first with: %v", len(unexpected), unexpected[0])
		}
		f.t.Logf("%d succeeded, %d condition failures, %d throttled", ok.Load(), denied.Load(), throttled.Load())
		f.expect(k, item(k, "tk", initial-ok.Load(), "n", ok.Load()))
		if throttled.Load() == 0 && ok.Load() != initial {
			f.t.Errorf("%d of %d attempts succeeded on %d tokens without throttling, want exactly %d",
				ok.Load(), workers*perWorker, initial, initial)
		}
	}},
	// Of concurrent Puts under attribute_not_exists(PK), one wins and the
	// others see its item.
	{"CreateOnceHasOneWinner", func(f *fixture) {
		const workers = 16
		k := key("create-race")
		cond := f.expr(store.Update{}, nm(store.AttrPK).NotExists())
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int
			errs    []error
		)
		for w := range workers {
			wg.Go(func() {
				_, err := f.s.Put(f.ctx, store.PutInput{Item: item(k, "w", w), Expr: cond})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, w)
				case errors.Is(err, store.ErrConditionFailed), errors.Is(err, store.ErrThrottled):
				default:
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			f.t.Fatalf("%d concurrent Puts failed unexpectedly, the first with: %v", len(errs), errs[0])
		}
		if len(winners) != 1 {
			f.t.Fatalf("%d Puts under attribute_not_exists(PK) succeeded (%v), want exactly 1", len(winners), winners)
		}
		f.expect(k, item(k, "w", winners[0]))
	}},
}
