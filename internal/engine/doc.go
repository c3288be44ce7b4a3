// Package engine is the limiter's write protocol as a pure decision core.
//
// It decides, never does: given what a client knows of a bucket (its last
// images of the shards, its estimates of the other writers' rates, or
// nothing), a request and the time, a machine returns the next store call
// to make; given that call's outcome (the new image, the failed write's
// old image, or an error), it returns the next step. It does no I/O and
// reads no clock: the caller passes now (Unix ms) into every step. The
// root package drives the machines: it makes the calls a step asks for
// and feeds their results back, the way etcd's node drives its raft state
// machine.
//
// The machines:
//
//   - [Charge]: one acquire of one bucket. It chooses the shard, the first
//     write (from the client's last image: speculative, full, a refill
//     under the rf lock, or a refusal answered locally), then reacts to a
//     refusal, a lost race, a missing bucket, a doubling or a hot
//     partition.
//   - [Cascade]: one acquire of an entity's bucket and its parent's,
//     each side a Charge, their writes issued together, a charged side
//     refunded when the other side refuses.
//   - [Adjust]: a correction or refund on the shard an acquire charged.
//
// Knowledge of buckets lives in a [Memory], which the caller owns and
// shares between machines; it is the only state that outlives a call.
//
// docs/write-paths.md explains every write, its cost and why the
// protocol never admits more than burst + rate × window.
package engine
