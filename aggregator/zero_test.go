package aggregator

import (
	"context"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"
	"github.com/shardlimit/limiter/store/memsim"
)

// A nil or zero Processor, or a nil context, fails every record of a batch
// with an error that says why, and writes nothing: Lambda retries the
// batch; no panic.
func TestStoryNilAndZeroProcessorsFailEveryRecord(t *testing.T) {
	ev := loadEvent(t, "acquire-adjust-rollback.json")
	var recs []Record
	for _, er := range ev.Records {
		r, err := FromLambda(er)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	st := memsim.New()
	p := newProcessor(t, st, Options{Logger: quiet})
	var nilCtx context.Context
	var nilP *Processor
	var nilMalformed *MalformedError
	for _, c := range []struct {
		name string
		p    *Processor
		ctx  context.Context
		want string
	}{
		{"nil Processor", nilP, context.Background(), "Processor"},
		{"zero Processor", &Processor{}, context.Background(), "Processor"},
		{"nil ctx", p, nilCtx, "ctx"},
	} {
		zerotest.NoPanics(t, map[string]func(){
			c.name + " Process": func() {
				res := c.p.Process(c.ctx, recs)
				if len(res.Failures) != len(recs) || !strings.Contains(res.Failures[0].Err.Error(), c.want) {
					t.Errorf("%s: Process failed %d of %d records (%v), want all, naming %s", c.name, len(res.Failures), len(recs), res.Failures, c.want)
				}
			},
			c.name + " HandleLambda": func() {
				resp, res := c.p.HandleLambda(c.ctx, ev)
				if len(resp.BatchItemFailures) != len(ev.Records) || len(res.Failures) != len(ev.Records) {
					t.Errorf("%s: HandleLambda reported %d of %d records failed, want all", c.name, len(resp.BatchItemFailures), len(ev.Records))
				}
			},
		})
	}
	zerotest.NoPanics(t, map[string]func(){"nil MalformedError.Error": func() { _ = nilMalformed.Error() }})
	if items := st.Items(); len(items) != 0 {
		t.Errorf("unusable processors wrote %d items", len(items))
	}
}
