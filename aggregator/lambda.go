package aggregator

import (
	"context"
	"log/slog"
	"sort"

	"github.com/aws/aws-lambda-go/events"
)

// HandleLambda processes one Lambda DynamoDB Streams event and returns
// Lambda's partial batch response (the event source mapping must list
// ReportBatchItemFailures in FunctionResponseTypes) with the Result.
//
// The response names each failed record by its sequence number, as Lambda
// requires for stream sources; Lambda then retries from the lowest one
// reported. Malformed records (FromLambda or Process found them
// uninterpretable) are logged at Error and left out of the response, so
// that one bad record does not block its stream shard for 24 hours, unless
// Options.ReportMalformed is set.
func (p *Processor) HandleLambda(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, Result) {
	recs := make([]Record, 0, len(ev.Records))
	at := make([]int, 0, len(ev.Records)) // batch index of recs[i]
	var bad []Failure
	for i, er := range ev.Records {
		r, err := FromLambda(er)
		if err != nil {
			bad = append(bad, Failure{Index: i, SequenceNumber: er.Change.SequenceNumber, EventID: er.EventID, Err: err})
			continue
		}
		recs = append(recs, r)
		at = append(at, i)
	}
	res := p.Process(ctx, recs)
	for i := range res.Failures {
		res.Failures[i].Index = at[res.Failures[i].Index]
	}
	res.Failures = append(res.Failures, bad...)
	sort.Slice(res.Failures, func(i, j int) bool { return res.Failures[i].Index < res.Failures[j].Index })
	res.Stats.Records = len(ev.Records)

	// A nil or zero Processor fails every record (Process says why): log
	// those on the default logger.
	log, reportMalformed := slog.Default(), false
	if p != nil && p.log != nil {
		log, reportMalformed = p.log, p.reportMalformed
	}
	var resp events.DynamoDBEventResponse
	for _, f := range res.Failures {
		if f.Malformed() && !reportMalformed {
			log.Error("aggregator: skipping malformed record", "sequence_number", f.SequenceNumber,
				"event_id", f.EventID, "err", f.Err)
			continue
		}
		log.Warn("aggregator: record failed; Lambda will retry", "sequence_number", f.SequenceNumber,
			"event_id", f.EventID, "err", f.Err)
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: f.SequenceNumber})
	}
	return resp, res
}
