// Package aggregator turns the table's change stream into usage snapshots
// and keeps hot buckets sharded ahead of their clients.
//
// It reads the stream records of bucket items (DynamoDB Streams,
// NEW_AND_OLD_IMAGES) and, for each batch:
//
//   - Usage: every change of a limit's total-consumed counter tc is a
//     consumption delta ([ExtractDeltas]); deltas are added up per bucket
//     shard and window (hourly and daily by default, monthly on request,
//     UTC) into usage snapshot items, which the limiter's Usage query reads.
//     The hidden wcu limit never appears.
//   - Proactive sharding: when shard 0 consumed more than a fraction (80 %
//     by default) of what its wcu limit refills over the last FineWindow
//     (MeterWindow for records with whole-second times), measured from the
//     records' wcu tc counters, the aggregator doubles the bucket's shard
//     count with the limiter's own conditional write (keys.DoubleShards),
//     so racing doublers produce one doubling per level.
//   - Propagation: when shard 0's shard_count grows, the aggregator sets it
//     on the bucket's other existing shards (found through GSI3), so that
//     clients with a stale count learn the new one from any shard. It never
//     creates shards: the limiter creates them lazily, empty.
//
// # Delivery and idempotency
//
// Streams deliver at least once, and a batch may be retried after part of
// it was applied. Every write the aggregator makes is idempotent per
// record: a snapshot item covers exactly one bucket shard and stores the
// sequence number of the last record of that shard it has absorbed (its
// high-water mark); a write applies only records newer than the mark and
// moves the mark in the same conditional update. Doubling and propagation
// are conditional on the shard count they change. Records of one item
// arrive in order (DynamoDB Streams guarantees it per item), which is what
// makes one mark per snapshot enough; docs/aggregator.md explains the
// design, and what happens when a deliverer breaks that order.
//
// # Determinism
//
// A [Processor] starts no goroutine, reads no clock (times come from the
// records) and issues its writes in an order fixed by the batch's content
// (sorted, never map order), so the simulator can run it as an actor.
//
// # Adapters
//
// [Record] is the aggregator's own record type. [FromLambda] converts a
// Lambda event record (aws-lambda-go), exactly: numbers are parsed from
// their decimal strings as int64, never through float64. The simulator
// fills Record from memsim's stream itself (see [FromStream]).
// [Processor.HandleLambda] is the whole Lambda handler, partial-batch
// response included; cmd/aggregator wraps it.
package aggregator
