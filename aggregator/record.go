package aggregator

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Stream event names, as DynamoDB Streams sends them.
const (
	EventInsert = "INSERT" // the write created the item
	EventModify = "MODIFY" // the write changed an existing item
	EventRemove = "REMOVE" // the write deleted the item, or time to live expired it
)

// Record is one change stream record of the limiter's table, whatever
// delivered it (a Lambda event, memsim's stream, a dynamodbstreams reader).
type Record struct {
	// EventID identifies the record in logs (Lambda's eventID); optional.
	EventID string
	// EventName is EventInsert, EventModify or EventRemove.
	EventName string
	// Keys is the changed item's key.
	Keys store.Key
	// Old is the item before the change (nil for INSERT); New the item
	// after it (nil for REMOVE). The aggregator needs both
	// (NEW_AND_OLD_IMAGES).
	Old, New store.Item
	// SequenceNumber is the record's position in the stream, a decimal
	// string (DynamoDB's have up to about 40 digits). Records of one item
	// carry increasing sequence numbers.
	SequenceNumber string
	// At is when the change was made (DynamoDB's
	// ApproximateCreationDateTime, whole seconds; memsim's exact time).
	// When zero, the new image's refill timestamp rf stands in.
	At time.Time
}

// FromStream returns the Record of a stream record given field by field, as
// memsim's stream (the simulator's adapter: seq is the decimal Seq) or a
// dynamodbstreams reader provides them.
func FromStream(seq, event string, key store.Key, old, new store.Item, at time.Time) Record {
	return Record{EventID: seq, EventName: event, Keys: key, Old: old, New: new, SequenceNumber: seq, At: at}
}

// ErrMalformed is matched (errors.Is) by every *MalformedError.
var ErrMalformed = errors.New("aggregator: malformed record")

// MalformedError reports a record the aggregator cannot interpret: a
// missing or mistyped field. Retrying such a record never helps.
type MalformedError struct {
	// Field names what is wrong, such as "SequenceNumber", "Keys.PK",
	// "OldImage" or "NewImage.b_rpm_tc".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "aggregator: malformed record: {Field}: {Reason}".
func (e *MalformedError) Error() string {
	if e == nil {
		return ErrMalformed.Error()
	}
	return "aggregator: malformed record: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

func malformed(field, reason string) *MalformedError {
	return &MalformedError{Field: field, Reason: reason}
}

// FromLambda converts a record of a Lambda DynamoDB Streams event. Values
// are converted exactly: type S to a string, type N to an int64 parsed from
// its decimal string (never through float64, which loses digits above
// 2^53). In a bucket item any other type, or a number that is not an int64,
// is a *MalformedError naming the attribute, such as
// "NewImage.b_rpm_tc"; in other items (which the aggregator ignores) such
// attributes are left out. Keys must be strings.
func FromLambda(er events.DynamoDBEventRecord) (Record, error) {
	c := &er.Change
	r := Record{EventID: er.EventID, EventName: er.EventName, SequenceNumber: c.SequenceNumber}
	if !c.ApproximateCreationDateTime.IsZero() {
		r.At = c.ApproximateCreationDateTime.UTC()
	}
	var err error
	if r.Keys.PK, err = keyString(c.Keys, store.AttrPK); err != nil {
		return r, err
	}
	if r.Keys.SK, err = keyString(c.Keys, store.AttrSK); err != nil {
		return r, err
	}
	_, strict := bucketOf(r.Keys)
	if c.OldImage != nil {
		if r.Old, err = convertImage("OldImage", c.OldImage, strict); err != nil {
			return r, err
		}
	}
	if c.NewImage != nil {
		if r.New, err = convertImage("NewImage", c.NewImage, strict); err != nil {
			return r, err
		}
	}
	return r, nil
}

func keyString(m map[string]events.DynamoDBAttributeValue, name string) (string, error) {
	av, ok := m[name]
	if !ok {
		return "", malformed("Keys."+name, "missing")
	}
	if av.DataType() != events.DataTypeString {
		return "", malformed("Keys."+name, "type "+typeName(av.DataType())+", want S")
	}
	return av.String(), nil
}

// convertImage converts an image. Attribute names are visited in sorted
// order, so the error reported for an image with several bad attributes
// does not depend on map order.
func convertImage(field string, m map[string]events.DynamoDBAttributeValue, strict bool) (store.Item, error) {
	it := make(store.Item, len(m))
	for _, n := range slices.Sorted(maps.Keys(m)) {
		av := m[n]
		switch av.DataType() {
		case events.DataTypeString:
			it[n] = store.Str(av.String())
			continue
		case events.DataTypeNumber:
			v, err := strconv.ParseInt(av.Number(), 10, 64)
			if err == nil {
				it[n] = store.Int(v)
				continue
			}
			if strict {
				return nil, malformed(field+"."+n, strconv.Quote(av.Number())+" is not an int64")
			}
		default:
			if strict {
				return nil, malformed(field+"."+n, "type "+typeName(av.DataType())+", want S or N")
			}
		}
	}
	return it, nil
}

// typeNames are DynamoDB's names of the attribute types.
var typeNames = map[events.DynamoDBDataType]string{
	events.DataTypeBinary: "B", events.DataTypeBoolean: "BOOL", events.DataTypeBinarySet: "BS", events.DataTypeList: "L",
	events.DataTypeMap: "M", events.DataTypeNumber: "N", events.DataTypeNumberSet: "NS", events.DataTypeNull: "NULL",
	events.DataTypeString: "S", events.DataTypeStringSet: "SS",
}

func typeName(t events.DynamoDBDataType) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "unknown(" + strconv.Itoa(int(t)) + ")"
}

// bucketOf returns the bucket shard a record's key addresses, and false
// for any other item.
func bucketOf(k store.Key) (keys.Bucket, bool) {
	if k.SK != keys.SKBucket {
		return keys.Bucket{}, false
	}
	return keys.ParseBucketPK(k.PK)
}
