// Package memsim is Amazon DynamoDB in memory: one table with global
// secondary indexes, implementing [store.Store] with DynamoDB's semantics,
// costs and failure modes, for tests and for the deterministic simulator.
//
// # What it emulates
//
//   - Writes: PutItem, UpdateItem (an upsert), DeleteItem and
//     TransactWriteItems with condition and update expressions evaluated by
//     DynamoDB's rules (pre-update image, missing-attribute comparisons,
//     overlapping paths, key attributes, unused placeholders...), every
//     ReturnValues option, the old item on a failed condition, and
//     DynamoDB's validation messages. Transactions: at most 100 actions on
//     distinct items, all or nothing, one cancellation reason per action,
//     client-token idempotency for 10 minutes of the store's clock.
//   - Reads: GetItem, BatchGetItem (at most 100 distinct keys, answers
//     aligned with the keys), Query on the table or an index (partition key
//     equality, sort key begins_with, ascending order; keys-only index items
//     carry only the table and index keys), Scan (pages in key order, a
//     partition-key prefix filter; neither throttled nor faulted, and not
//     in the totals: it serves operator commands).
//   - Capacity: item sizes as DynamoDB counts them ([ItemSize]), write
//     units per started KB of the larger of the old and new item (failed
//     conditions included), read units per started 4 KB (half for eventually
//     consistent reads), double for transactions, index writes when an
//     item gains, loses or changes its index keys, the 400 KB item limit. Every answer reports what it
//     consumed; [Store.Totals] and [Store.Partition] add it up.
//   - Partitions: every partition key (of the table and of each index) has
//     its own ceiling, 1000 write and 3000 read units per second by
//     default, as a token bucket refilled continuously by the store's clock
//     and holding one second's worth. A request that would exceed it is
//     throttled ([store.ThrottledError]) and changes nothing.
//   - Change stream: one [Record] per item a write changed, with sequence
//     numbers and old and new images ([Store.Stream]).
//   - Faults: a fault plan ([Injector]) decides, once per request, whether
//     it is throttled, fails with a 5xx before or after being applied, loses
//     its answer after being applied, meets a transaction conflict, or is
//     delayed.
//
// Not emulated: decimal numbers (values are strings and int64 numbers),
// burst capacity (300 s of unused capacity), adaptive capacity and split for
// heat, on-demand warm throughput, stale eventually consistent reads (reads
// always see the latest write), TTL expiry, real concurrent transactions (a
// transaction applies atomically; conflicts come from the fault plan),
// request latency (except as injected delay), and the SDK's retries (those
// belong to store/dynamo). docs/memsim.md lists each behaviour with the
// test that checks it.
//
// # Determinism
//
// memsim reads time only from its [Clock] (by default the wall clock; pass
// a [ManualClock] that moves only when told, the same one the limiter
// reads, for tests and simulations that must replay), draws randomness
// only from seeded injectors, and never lets map order show in results,
// the stream, errors or counters. The same requests in the same order,
// with the same clock readings and fault plan, give the same answers,
// stream and counters.
//
// # Faults
//
// An [Injector] sees an [Op] (kind, keys, time) and returns a [Decision]. The
// constructors compose, and every injector prints its configuration, so a
// simulation can log its fault plan with its seed:
//
//	plan := memsim.Chain(
//		memsim.During(t0.Add(10*time.Second), t0.Add(20*time.Second),
//			memsim.Probability(0.05, 7, memsim.Fault5xxAfterApply)),
//		memsim.OnOps([]memsim.OpKind{memsim.OpUpdate}, memsim.Nth(3, memsim.FaultLostResponse)),
//		memsim.ThrottleStorm(t0.Add(time.Minute), 5*time.Minute, 10*time.Second, 0.5, 1),
//	)
//	st := memsim.New(memsim.WithClock(clk), memsim.WithFaults(plan))
//	fmt.Println(plan) // chain(during[10s,20s](p=0.05 seed=7 -> 5xx-after-apply), ...)
//
// A 5xx or a lost answer on a write is an [*store.UnavailableError] with
// OutcomeUnknown set whether or not the write was applied (a client cannot
// tell); on a read OutcomeUnknown is false. Injected latency goes to the
// sleeper set with [WithSleeper]; memsim never sleeps on its own.
//
// # Expressions
//
// Every Expr is parsed once per distinct pair of expression strings (the
// parse is cached by text, shared by all stores) and bound to its Names
// and Values on every call, with DynamoDB's validation rules and messages.
//
// # Concurrency
//
// A Store is safe for concurrent use. One mutex guards the table; stored
// items are never modified in place (a write builds a new item and swaps it
// in), so stream records share them without copying, and every item handed
// to a caller is a copy it may keep and modify (unless [WithSharedResults]
// says the caller only reads write results). The [Hook], the injector and the sleeper are called
// without the lock held.
package memsim
