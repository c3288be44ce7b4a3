package sim

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// Latency is a log-normal distribution of durations, given by its median
// and its 99th percentile. The zero Latency is always 0.
type Latency struct {
	// Median is the distribution's median; 0 or less makes every draw 0.
	Median time.Duration
	// P99 is its 99th percentile; at or below Median, every draw is
	// Median.
	P99 time.Duration
}

// dist is a Latency compiled for drawing: median in ns and the log-normal
// sigma.
type dist struct {
	median float64
	sigma  float64
}

// z99 is the standard normal quantile of 0.99.
const z99 = 2.3263478740408408

func (l Latency) compile() dist {
	if l.Median <= 0 {
		return dist{}
	}
	d := dist{median: float64(l.Median)}
	if l.P99 > l.Median {
		d.sigma = math.Log(float64(l.P99)/float64(l.Median)) / z99
	}
	return d
}

// draw returns one duration in ns.
func (d dist) draw(r *rand.Rand) int64 {
	if d.median == 0 {
		return 0
	}
	if d.sigma == 0 {
		return int64(d.median)
	}
	return int64(d.median * math.Exp(d.sigma*r.NormFloat64()))
}

// LatencyModel gives the round-trip time of each kind of store request.
// The scheduler splits every round trip into a request half (the time
// until the store applies it) and a response half.
type LatencyModel struct {
	Read  Latency // Get, BatchGet, Query
	Write Latency // Put, Update, Delete (each write of WriteConcurrently too)
	Txn   Latency // TransactWrite
}

// DynamoDBLatency is the default model, shaped after DynamoDB measured
// from a client in the same region: single-item writes about 6 ms median
// with a tail to about 20 ms at p99, reads a bit faster, transactions
// about 25 ms median.
func DynamoDBLatency() LatencyModel {
	return LatencyModel{
		Read:  Latency{Median: 4 * time.Millisecond, P99: 12 * time.Millisecond},
		Write: Latency{Median: 6 * time.Millisecond, P99: 20 * time.Millisecond},
		Txn:   Latency{Median: 25 * time.Millisecond, P99: 60 * time.Millisecond},
	}
}

func (m LatencyModel) compile() [memsim.NumOpKinds]dist {
	var out [memsim.NumOpKinds]dist
	r, w, t := m.Read.compile(), m.Write.compile(), m.Txn.compile()
	out[memsim.OpGet], out[memsim.OpBatchGet], out[memsim.OpQuery] = r, r, r
	out[memsim.OpPut], out[memsim.OpUpdate], out[memsim.OpDelete] = w, w, w
	out[memsim.OpTransactWrite] = t
	return out
}

// FixedLatency is a model in which every call takes exactly d, reads,
// writes and transactions alike: the race behaviour of a slow store, with
// no luck in it.
func FixedLatency(d time.Duration) LatencyModel {
	l := Latency{Median: d, P99: d}
	return LatencyModel{Read: l, Write: l, Txn: l}
}
