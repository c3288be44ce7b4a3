package store

// The attribute and index names of the table, whose layout is fixed: string keys AttrPK and AttrSK; two global
// secondary indexes, IndexGSI2 (keys AttrGSI2PK, AttrGSI2SK; part of the
// table's definition, which no item of the limiter enters) and IndexGSI3
// (keys AttrGSI3PK, AttrGSI3SK: bucket discovery), both projecting keys only; item expiry (Unix seconds) in
// AttrTTL. An item is in an index only when it has both of the index's key
// attributes, as strings. Query on an index returns only the table and
// index key attributes of its items.
//
// The indexes are keys-only on purpose: an index that projected a token
// attribute would be written on every acquire (doubling its cost) and would
// concentrate every acquire of a resource on one index partition. A
// keys-only index is written only when an item carrying its keys is created
// or deleted.
const (
	AttrPK     = "PK"     // the table's partition key, a string
	AttrSK     = "SK"     // the table's sort key, a string
	AttrGSI2PK = "GSI2PK" // IndexGSI2's partition key, a string
	AttrGSI2SK = "GSI2SK" // IndexGSI2's sort key, a string
	AttrGSI3PK = "GSI3PK" // IndexGSI3's partition key, a string
	AttrGSI3SK = "GSI3SK" // IndexGSI3's sort key, a string
	AttrTTL    = "ttl"    // the item's expiry, a number of Unix seconds
	IndexGSI2  = "GSI2"   // an index no limiter item enters
	IndexGSI3  = "GSI3"   // the index of bucket discovery
)
