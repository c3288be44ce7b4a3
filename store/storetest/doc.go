// Package storetest is the conformance suite of [store.Store]: the
// behaviour every backend must show, so that a limiter tested against the
// in-memory simulator (store/memsim) behaves the same against Amazon
// DynamoDB (store/dynamo).
//
// # Using the suite
//
// A backend runs the suite from a test in its own package, passing a
// function that returns a fresh, empty store for each subtest:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			return memsim.New()
//		})
//	}
//
// The store must have the limiter's table layout (see [store.AttrPK]):
// string table keys PK and SK, and the keys-only global secondary indexes
// GSI2 (GSI2PK, GSI2SK) and GSI3 (GSI3PK, GSI3SK). [Build] is
// [store.Build] for a backend's own tests: it ends the test on an error. newStore may use t for t.Cleanup (to delete a DynamoDB
// table, say) and t.Skip (when DynamoDB Local is not installed). It is
// called once per case, about 75 times in all; a table-driven case (such as
// Conditions/OnExistingItem) runs its subtests on that one store, each on
// its own keys. Subtests run one after another (none calls t.Parallel),
// except that the concurrency cases issue requests from many goroutines at
// once.
//
// A failure names what broke: Run/<Group>/<Case>, for instance
// TestConformance/Conditions/OnExistingItem/NumberComparisonIsNumeric. Run a
// part with go test -run 'Conformance/TransactWrite'.
//
// # What the suite checks, and what it does not
//
// The suite checks only what real DynamoDB does (it runs against DynamoDB
// Local too): item round trips, conditional writes and their old items,
// update expressions (ADD, SET, if_not_exists, REMOVE) and ReturnValues,
// validation errors, transactions and their cancellation reasons (a Check
// is accepted only there: WriteConcurrently rejects it), batch
// reads, queries of the table and of the keys-only indexes, concurrent
// writes and the absence of lost updates.
//
// It never checks what only a simulator has: throttling, injected faults,
// latency, or exact capacity figures. About capacity it asserts only that
// a successful small write reports at least one write unit and that a read
// that returns items reports some read units. About a failed condition it
// asserts only that an error of the right kind came back, with the old item
// when the caller asked for it.
//
// Validation messages are compared only by stable substrings that DynamoDB
// itself uses ("overlap", "unused", "part of the key", ...); each case notes
// DynamoDB's full message. Reads that DynamoDB serves eventually consistent
// (Get, BatchGet and Query without ConsistentRead, and every index query)
// are retried for a few seconds until they show the expected state, so a
// backend that models replication lag passes as long as the lag ends.
package storetest
