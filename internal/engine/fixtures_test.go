package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Fixtures of the machine tests (charge_test.go, races_test.go,
// cascade_test.go, adjust_test.go): items made by hand, what a client
// knows, the results fed back, and steps written as short sentences
// ("update 0 speculative", "refused local") so that a test reads as the
// conversation between the machine and the store.

// T is the tests' now (Unix ms); the stories count from it.
var T = t0.UnixMilli()

// rps10 is 10 tokens a second: a token refills in 100 ms (10 millitokens a
// ms), and the burst is 10 tokens (10,000 millitokens).
var rps10 = perSecond("rps", 10)

// plan1 charges one token of rps10 (and one write unit).
func plan1(ref keys.Bucket) *Plan { return NewPlan(ref, []Limit{rps10}, map[string]int64{"rps": 1}) }

// busy10 is a limit of 10 tokens that refills at 1,000 a second (a token a
// ms): enough admitted writes to heat a partition, so its bucket may
// double (see Plan.fewWrites). A 10/s limit never heats one.
var busy10 = Limit{Name: "rps", Limit: bucket.Limit{Capacity: 10_000, Burst: 10_000, RefillAmount: 1_000_000, RefillPeriod: 1000}}

// planBusy charges one token of busy10 (and one write unit).
func planBusy(ref keys.Bucket) *Plan {
	return NewPlan(ref, []Limit{busy10}, map[string]int64{"rps": 1})
}

// shape is a bucket item to make by hand: shard of n shards (n 0: 1),
// refilled to rf, each limit holding tk millitokens at rf (limits not
// named, the hidden "wcu" included, hold their per-shard burst) and tc
// consumed. fl and fh are the exact full-at instant, as a write leaves them
// when no consumption-only write came since; ahead moves a limit's fh that
// many ms later (the drift of consumption-only writes since).
type shape struct {
	shard int
	n     int64
	rf    int64
	tk    map[string]int64
	tc    map[string]int64
	ahead map[string]int64
}

// drifted is an ahead that closes rps10's refill route for any balance:
// fh a second past the exact full-at instant, a whole burst's refill.
var drifted = map[string]int64{"rps": 1000}

// item returns the item of shape s as plan p writes it (its limits, its
// hash, its keys and index entries).
func (s shape) item(p *Plan) store.Item {
	n := max(s.n, 1)
	it := p.WithAmounts(nil).createWith(s.shard, n, s.rf, true).Item
	tks := make([]int64, len(p.specs))
	for i := range p.specs {
		sp := &p.specs[i]
		l := sp.perShard(n)
		tk, ok := s.tk[sp.name]
		if !ok {
			tk = l.Burst
		}
		tks[i] = tk
		fa := bucket.State{Limit: l, Tokens: tk}.FullAt(s.rf)
		it[sp.tk], it[sp.tc] = store.Int(tk), store.Int(s.tc[sp.name])
		it[sp.fl], it[sp.fh] = store.Int(fa), store.Int(fa+s.ahead[sp.name])
	}
	it[store.AttrTTL] = store.Int(p.ttl(tks, n, s.rf))
	return it
}

// image decodes an item made by hand.
func image(t *testing.T, it store.Item) *Image {
	t.Helper()
	im, err := Decode(it)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// knows makes m hold it as the client's last image of its shard, received
// at at, and n as the bucket's shard count: an item its own write returned,
// rf its own.
func knows(t *testing.T, m *Memory, ref keys.Bucket, it store.Item, n, at int64) {
	t.Helper()
	shard, _ := it.Int(keys.AttrShard)
	im := image(t, it)
	m.learn(ref, int(shard), im, n, at, 0, nil)
	m.mu.Lock()
	m.get(idOf(ref)).shard(int(shard)).ownRefill = true // as if its own write had returned it
	m.mu.Unlock()
}

// heard makes m hold it as the client's last image of its shard, received
// at at, an item another writer refilled (a failed write returned it).
func heard(t *testing.T, m *Memory, ref keys.Bucket, it store.Item, n, at int64) {
	t.Helper()
	shard, _ := it.Int(keys.AttrShard)
	m.learn(ref, int(shard), image(t, it), n, at, 0, nil)
}

// measured makes m hold estimates of a shard's write rate taken at at:
// all writers' and the others' write units per ms, and what the others
// consume per limit (millitokens per ms; nil for nothing).
func measured(m *Memory, ref keys.Bucket, shard int, rate, others float64, at int64, drain map[string]float64) {
	_, si := m.viewOf(ref, shard)
	m.mu.Lock()
	defer m.mu.Unlock()
	si.rate, si.others, si.rateAt, si.drain = rate, others, at, drain
}

// The results a machine is fed.

// wrote is a write that applied and returned the new item (ALL_NEW); a Put
// returns nothing (nil).
func wrote(it store.Item) Result { return Result{Write: store.WriteOutput{Attributes: it}} }

// failed is a write whose condition failed, with the item as it stood
// (ALL_OLD; nil: there was none).
func failed(it store.Item) Result { return Result{Err: &store.ConditionFailedError{Item: it}} }

// gone is a write that found no item.
var gone = failed(nil)

// erred is a call that failed with err.
func erred(err error) Result { return Result{Err: err} }

// throttle is a write the partition refused.
var throttle = erred(&store.ThrottledError{Code: store.ThrottleProvisionedThroughputExceeded})

// unknown is a write that timed out: it may have applied.
var unknown = erred(&store.UnavailableError{Op: "Update", OutcomeUnknown: true, Err: context.DeadlineExceeded})

// listed is the keys-only index query's answer: entries of ref's shards.
func listed(ref keys.Bucket, shards ...int) Result {
	var r Result
	for _, s := range shards {
		it := store.Item{}
		for _, ix := range ref.WithShard(s).IndexAttrs() {
			it[ix.Name] = store.Str(ix.Value)
		}
		it[store.AttrPK] = store.Str(ref.WithShard(s).PK())
		it[store.AttrSK] = store.Str(keys.SKBucket)
		r.Query.Items = append(r.Query.Items, it)
	}
	return r
}

// found is a batch read's answer (nil: no item at that key).
func found(its ...store.Item) Result { return Result{Batch: store.BatchGetOutput{Items: its}} }

// picks is a Rand that chooses the given shards in turn, each as the k-th
// shard not tried yet (then the first one not tried), and never draws an
// early refill.
func picks(ks ...int) Rand { return &scripted{ks: ks} }

type scripted struct{ ks []int }

func (r *scripted) IntN(n int) int {
	if len(r.ks) == 0 {
		return 0
	}
	k := r.ks[0]
	r.ks = r.ks[1:]
	return min(k, n-1)
}

func (r *scripted) Float64() float64 { return 0.999 }

// Steps as sentences.

// describe writes a step as "update 0 speculative" (a call, the shard of
// its key, its path), "query discover", "get [0] discover", "done full",
// "refused local" or "err".
func describe(s Step) string {
	switch {
	case s.Call != nil:
		return describeCall(s.Call) + " " + s.Path.String()
	case s.Done:
		return "done " + s.Path.String()
	case s.Refused != nil:
		return "refused " + s.Path.String()
	case s.Err != nil:
		return "err"
	}
	return "nothing"
}

func describeCall(c *Call) string {
	switch {
	case c.Update != nil:
		return "update " + shardOfPK(c.Update.Key.PK)
	case c.Put != nil:
		pk, _ := c.Put.Item.Str(store.AttrPK)
		return "put " + shardOfPK(pk)
	case c.Query != nil:
		return "query"
	case c.BatchGet != nil:
		var ss []string
		for _, k := range c.BatchGet.Keys {
			ss = append(ss, shardOfPK(k.PK))
		}
		return "get [" + strings.Join(ss, " ") + "]"
	case c.Transact != nil:
		var ss []string
		for _, a := range c.Transact.Actions {
			ss = append(ss, shardOfPK(a.Update.Key.PK))
		}
		return "transact [" + strings.Join(ss, " ") + "]"
	}
	return "empty call"
}

func shardOfPK(pk string) string {
	b, ok := keys.ParseBucketPK(pk)
	if !ok {
		return "?" + pk
	}
	return fmt.Sprint(b.Shard)
}

// exchange is one turn of a conversation: the step the machine should
// ask for, and what its call returned (ignored after the last step).
type exchange struct {
	want string
	feed Result
}

// converse checks a machine's steps against a conversation, feeding each
// call's result at now, and returns the last step.
func converse(t *testing.T, step Step, feed func(Result, int64) Step, now int64, turns []exchange) Step {
	t.Helper()
	for i, x := range turns {
		if got := describe(step); got != x.want {
			t.Fatalf("step %d: %q (err %v), want %q", i+1, got, step.Err, x.want)
		}
		if i == len(turns)-1 {
			break
		}
		if step.Call == nil {
			t.Fatalf("step %d: %q asks for no call, but the conversation goes on", i+1, x.want)
		}
		step = feed(x.feed, now)
	}
	return step
}

// sim returns a memsim store holding items, as the other end of a story.
func sim(t *testing.T, items ...store.Item) *memsim.Store {
	t.Helper()
	st := memsim.New()
	for _, it := range items {
		if _, err := st.Put(context.Background(), store.PutInput{Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// exec makes a step's call on st.
func exec(t *testing.T, st *memsim.Store, s Step) Result {
	t.Helper()
	if s.Call == nil {
		t.Fatalf("%q asks for no call", describe(s))
	}
	return call(context.Background(), st, s.Call)
}

// play checks that the machine asks for each of wants in turn, making each
// call on st and feeding its result at now; the last want is only checked
// (its call, if any, is not made). It returns the step of the last want.
func play(t *testing.T, st *memsim.Store, s Step, feed func(Result, int64) Step, now int64, wants ...string) Step {
	t.Helper()
	for i, want := range wants {
		if got := describe(s); got != want {
			t.Fatalf("step %d: %q (err %v), want %q", i+1, got, s.Err, want)
		}
		if i < len(wants)-1 {
			s = feed(exec(t, st, s), now)
		}
	}
	return s
}

// attr reads a number of the item at ref's shard in st.
func attr(t *testing.T, st *memsim.Store, ref keys.Bucket, shard int, name string) int64 {
	t.Helper()
	it := st.Peek(ref.WithShard(shard).Key())
	if it == nil {
		t.Fatalf("shard %d of %s does not exist", shard, ref.Entity)
	}
	v, ok := it.Int(name)
	if !ok {
		t.Fatalf("shard %d has no %s", shard, name)
	}
	return v
}

// retryMs is a refusal's wait for its first exceeded limit.
func retryMs(t *testing.T, rl *Refusal) int64 {
	t.Helper()
	for _, v := range rl.Views() {
		if v.Exceeded {
			return v.RetryMs
		}
	}
	t.Fatal("the refusal exceeds no limit")
	return 0
}

// speculating returns m as the memory of a process whose first writes so
// far found their buckets below the burst: its first write to a bucket it
// has no image of, of a plan it has no history of, is the speculative
// charge (see Memory.coldWrite), which the stories of this package start
// from. A memory with no history at all makes the full write instead.
func speculating(m *Memory) *Memory {
	m.anyPlan.found(false)
	return m
}

// vouch makes m trust the shard count it holds for ref as if an image of
// shard 0 at that count had come at at (see Memory.trustsCount): the
// count alone sends the next acquire to shard 0 first.
func vouch(m *Memory, ref keys.Bucket, at int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.get(idOf(ref)).vouched = at + shardZeroLife - countSkew
}
