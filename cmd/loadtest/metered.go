package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/shardlimit/limiter/store"
)

// metered is the store every limiter of a run talks to: it counts every
// request by kind as the store sees it (each write of WriteConcurrently
// separately), with the capacity it reported, and adds the -latency of a
// simulated server: half before the request reaches the store, half after
// it was applied, so that an answer is as old when it arrives as a real
// one.
type metered struct {
	store.Store
	half time.Duration // half the simulated round trip; 0 for none
	on   atomic.Bool   // count only while on (the limiter's measured slices)
	ops  [numOps]opCounter
}

// The kinds of request counted.
const (
	opGet = iota
	opBatchGet
	opPut
	opUpdate
	opDelete
	opTransactWrite
	opQuery
	numOps
)

var opNames = [numOps]string{"Get", "BatchGet", "Put", "Update", "Delete", "TransactWrite", "Query"}

func isWriteOp(op int) bool {
	return op == opPut || op == opUpdate || op == opDelete || op == opTransactWrite
}

type opCounter struct {
	calls, condFailed, throttled, failed atomic.Int64
	wcuMilli, rcuMilli                   atomic.Int64 // capacity in thousandths of a unit
}

// opStats is a snapshot of one kind's counters.
type opStats struct {
	Op              string  `json:"op"`
	Calls           int64   `json:"calls"`
	ConditionFailed int64   `json:"condition_failed"`
	Throttled       int64   `json:"throttled"`
	Failed          int64   `json:"failed"` // other errors
	WCU             float64 `json:"wcu"`
	RCU             float64 `json:"rcu"`
}

func newMetered(st store.Store, latency time.Duration) *metered {
	return &metered{Store: st, half: latency / 2}
}

func (m *metered) count(op int, c store.Capacity, err error) {
	if !m.on.Load() {
		return
	}
	k := &m.ops[op]
	k.calls.Add(1)
	k.wcuMilli.Add(int64(c.WriteUnits*1000 + 0.5))
	k.rcuMilli.Add(int64(c.ReadUnits*1000 + 0.5))
	switch {
	case err == nil:
	case errors.Is(err, store.ErrConditionFailed):
		k.condFailed.Add(1)
	case errors.Is(err, store.ErrThrottled):
		k.throttled.Add(1)
	default:
		k.failed.Add(1)
	}
}

// stats returns the counters of every kind that was called, in the order
// of opNames.
func (m *metered) stats() []opStats {
	var out []opStats
	for i := range m.ops {
		k := &m.ops[i]
		if n := k.calls.Load(); n > 0 {
			out = append(out, opStats{Op: opNames[i], Calls: n, ConditionFailed: k.condFailed.Load(),
				Throttled: k.throttled.Load(), Failed: k.failed.Load(),
				WCU: float64(k.wcuMilli.Load()) / 1000, RCU: float64(k.rcuMilli.Load()) / 1000})
		}
	}
	return out
}

// wait sleeps one half of the simulated round trip.
func (m *metered) wait(ctx context.Context) error {
	if m.half <= 0 {
		return nil
	}
	t := time.NewTimer(m.half)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &store.UnavailableError{Op: "latency", Err: ctx.Err()}
	case <-t.C:
		return nil
	}
}

// call runs f between the two halves of the latency and counts it.
func call[T any](m *metered, ctx context.Context, op int, f func() (T, error), capOf func(T) store.Capacity) (T, error) {
	var zero T
	if err := m.wait(ctx); err != nil {
		return zero, err
	}
	out, err := f()
	m.count(op, capOf(out), err)
	if werr := m.wait(ctx); werr != nil && err == nil {
		// The request was applied; only its answer was lost.
		return out, &store.UnavailableError{Op: opNames[op], Err: werr, OutcomeUnknown: isWriteOp(op)}
	}
	return out, err
}

func writeCap(o store.WriteOutput) store.Capacity { return o.Consumed }

func (m *metered) Get(ctx context.Context, in store.GetInput) (store.GetOutput, error) {
	return call(m, ctx, opGet, func() (store.GetOutput, error) { return m.Store.Get(ctx, in) },
		func(o store.GetOutput) store.Capacity { return o.Consumed })
}

func (m *metered) BatchGet(ctx context.Context, in store.BatchGetInput) (store.BatchGetOutput, error) {
	return call(m, ctx, opBatchGet, func() (store.BatchGetOutput, error) { return m.Store.BatchGet(ctx, in) },
		func(o store.BatchGetOutput) store.Capacity { return o.Consumed })
}

func (m *metered) Put(ctx context.Context, in store.PutInput) (store.WriteOutput, error) {
	return call(m, ctx, opPut, func() (store.WriteOutput, error) { return m.Store.Put(ctx, in) }, writeCap)
}

func (m *metered) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	return call(m, ctx, opUpdate, func() (store.WriteOutput, error) { return m.Store.Update(ctx, in) }, writeCap)
}

func (m *metered) Delete(ctx context.Context, in store.DeleteInput) (store.WriteOutput, error) {
	return call(m, ctx, opDelete, func() (store.WriteOutput, error) { return m.Store.Delete(ctx, in) }, writeCap)
}

func (m *metered) TransactWrite(ctx context.Context, in store.TransactWriteInput) (store.WriteOutput, error) {
	return call(m, ctx, opTransactWrite, func() (store.WriteOutput, error) { return m.Store.TransactWrite(ctx, in) }, writeCap)
}

func (m *metered) Query(ctx context.Context, in store.QueryInput) (store.QueryOutput, error) {
	return call(m, ctx, opQuery, func() (store.QueryOutput, error) { return m.Store.Query(ctx, in) },
		func(o store.QueryOutput) store.Capacity { return o.Consumed })
}

// Scan is counted with the queries: the load never scans.
func (m *metered) Scan(ctx context.Context, in store.ScanInput) (store.ScanOutput, error) {
	return call(m, ctx, opQuery, func() (store.ScanOutput, error) { return m.Store.Scan(ctx, in) },
		func(o store.ScanOutput) store.Capacity { return o.Consumed })
}

// WriteConcurrently is one round trip for all its writes; each write is
// counted as the request it is.
func (m *metered) WriteConcurrently(ctx context.Context, writes []store.Write) []store.WriteResult {
	if err := m.wait(ctx); err != nil {
		out := make([]store.WriteResult, len(writes))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	out := m.Store.WriteConcurrently(ctx, writes)
	for i, r := range out {
		op := opUpdate
		switch {
		case writes[i].Put != nil:
			op = opPut
		case writes[i].Delete != nil:
			op = opDelete
		}
		m.count(op, r.Output.Consumed, r.Err)
	}
	if err := m.wait(ctx); err != nil {
		for i := range out {
			if out[i].Err == nil {
				out[i].Err = &store.UnavailableError{Op: "WriteConcurrently", Err: err, OutcomeUnknown: true}
			}
		}
	}
	return out
}
