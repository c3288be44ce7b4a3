package aggregator

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// EventRecord converts a record read with the DynamoDB Streams API
// (dynamodbstreams.GetRecords) to the shape Lambda delivers, for
// [Processor.HandleLambda]: a process that reads the stream itself (cmd/aggregator
// -poll) hands its batches to the same processor. The limiter's items hold
// strings and numbers only; an attribute of another type becomes NULL
// (BOOL stays BOOL), which the processor reports as a malformed record.
func EventRecord(r types.Record) events.DynamoDBEventRecord {
	er := events.DynamoDBEventRecord{
		AWSRegion: aws.ToString(r.AwsRegion), EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: aws.ToString(r.EventSource), EventVersion: aws.ToString(r.EventVersion),
	}
	d := r.Dynamodb
	if d == nil {
		return er
	}
	er.Change = events.DynamoDBStreamRecord{
		Keys: eventImage(d.Keys), NewImage: eventImage(d.NewImage), OldImage: eventImage(d.OldImage),
		SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes),
		StreamViewType: string(d.StreamViewType),
	}
	if d.ApproximateCreationDateTime != nil {
		er.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
	}
	return er
}

func eventImage(m map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = events.NewStringAttribute(v.Value)
		case *types.AttributeValueMemberN:
			out[k] = events.NewNumberAttribute(v.Value)
		case *types.AttributeValueMemberBOOL:
			out[k] = events.NewBooleanAttribute(v.Value)
		default:
			out[k] = events.NewNullAttribute()
		}
	}
	return out
}
