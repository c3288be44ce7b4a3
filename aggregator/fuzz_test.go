package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// FuzzFromLambda feeds arbitrary JSON through the whole Lambda path: a
// record either converts or fails with a *MalformedError, its deltas
// likewise, and Process never panics.
func FuzzFromLambda(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	more, _ := filepath.Glob(filepath.Join("testdata", "malformed", "*.json"))
	for _, name := range append(files, more...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var ev struct{ Records []json.RawMessage }
		if err := json.Unmarshal(b, &ev); err != nil {
			f.Fatal(err)
		}
		for _, r := range ev.Records {
			f.Add([]byte(r))
		}
	}
	f.Add([]byte(`{"eventName":"MODIFY","dynamodb":{"Keys":{"PK":{"S":"n/BUCKET#e#r#0"},"SK":{"S":"#STATE"}},` +
		`"NewImage":{"b_x_tc":{"N":"5"}},"OldImage":{},"SequenceNumber":"1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var er events.DynamoDBEventRecord
		if json.Unmarshal(data, &er) != nil {
			return
		}
		r, err := FromLambda(er)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("FromLambda: %v is not a MalformedError", err)
			}
			return
		}
		if _, err := ExtractDeltas(r); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ExtractDeltas: %v is not a MalformedError", err)
		}
		st, _ := newStore(memsim.Epoch())
		p, _ := New(st, Options{Logger: quiet, Windows: []Window{Hourly, Daily, Monthly}})
		p.Process(context.Background(), []Record{r, r})
		p.HandleLambda(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{er}})
	})
}

// FuzzExtractDeltas builds records from arbitrary names and values: any
// attribute, any key, any event, any time. ExtractDeltas never panics and
// fails only with a *MalformedError; Process never panics, and a record
// that ExtractDeltas accepts is either applied or fails in the store.
func FuzzExtractDeltas(f *testing.F) {
	f.Add("MODIFY", "ns/BUCKET#e#r#0", "#STATE", "b_rpm_tc=5;rf=1000;shard_count=1", "b_rpm_tc=9;b_wcu_tc=3;rf=1000", "17", int64(1767225600))
	f.Add("INSERT", "ns/BUCKET#e#r#3", "#STATE", "", "b_a_b_tc=-4;b_a_b_tk=s:x", "0009", int64(0))
	f.Add("REMOVE", "ns/BUCKET#e#r#0", "#STATE", "b_rpm_tc=5", "", "1", int64(-1))
	f.Add("MODIFY", "ns/ENTITY#e", "#META", "", "parent_id=s:p", "x", int64(5))
	f.Add("MODIFY", "ns/BUCKET#e#r#0", "#STATE", "b_rpm_tc=-9223372036854775808", "b_rpm_tc=9223372036854775807", "2", int64(1))
	f.Add("MODIFY", "ns/BUCKET#e#r#0", "#STATE", "rf=1;b_wcu_tk=0;b_wcu_cp=1000000;b_wcu_bx=1000000;b_wcu_ra=1000000;b_wcu_rp=1000;b_wcu_tc=0;shard_count=4",
		"rf=1;b_wcu_tk=0;b_wcu_cp=1000000;b_wcu_bx=1000000;b_wcu_ra=1000000;b_wcu_rp=1000;b_wcu_tc=1000;shard_count=8", "3", int64(1))
	f.Fuzz(func(t *testing.T, event, pk, sk, oldAttrs, newAttrs, seq string, atSec int64) {
		r := Record{EventName: event, Keys: store.Key{PK: pk, SK: sk}, Old: parseAttrs(oldAttrs), New: parseAttrs(newAttrs),
			SequenceNumber: seq}
		if atSec != 0 {
			r.At = time.Unix(atSec, 0)
		}
		ds, err := ExtractDeltas(r)
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) || me.Field == "" {
				t.Fatalf("ExtractDeltas: %v is not a MalformedError with a field", err)
			}
			return
		}
		for _, d := range ds {
			if d.Amount == 0 || d.Limit == "wcu" || d.Limit == "" {
				t.Fatalf("bad delta %+v", d)
			}
		}
		st, _ := newStore(memsim.Epoch())
		p, _ := New(st, Options{Logger: quiet})
		p.Process(context.Background(), []Record{r})
	})
}

// parseAttrs reads "name=value;..." where value is an integer or "s:text".
func parseAttrs(s string) store.Item {
	if s == "" {
		return nil
	}
	it := store.Item{}
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		if rest, ok := strings.CutPrefix(v, "s:"); ok {
			it[k] = store.Str(rest)
		} else if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			it[k] = store.Int(n)
		}
	}
	return it
}
