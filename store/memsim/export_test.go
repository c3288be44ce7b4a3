package memsim

// WithSchema is withSchema, for the tests of table layouts other than the
// limiter's.
var WithSchema = withSchema
