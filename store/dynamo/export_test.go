package dynamo

import "github.com/shardlimit/limiter/store/internal/schema"

// WithSchema sets the table's layout, for the tests of layouts other than
// the limiter's.
func WithSchema(sc schema.Schema) Option {
	return func(o *options) { o.schema = sc }
}
