package store

// Projection says which attributes a secondary index copies.
type Projection uint8

// Index projections. The limiter's indexes are keys-only on purpose: an
// index that projects a token attribute would be written on every acquire
// (doubling its cost) and would concentrate every acquire of a resource on
// one index partition. A keys-only index is written only when an item
// carrying its keys is created or deleted.
const (
	ProjectKeysOnly Projection = iota
	ProjectAll
)

// String returns DynamoDB's name of p.
func (p Projection) String() string {
	if p == ProjectAll {
		return "ALL"
	}
	return "KEYS_ONLY"
}

// Index is a global secondary index: string partition and sort keys.
type Index struct {
	Name         string
	PartitionKey string
	SortKey      string
	Projection   Projection
}

// Schema describes a table: the names of its key attributes and its
// indexes. An item is placed in an index only when it has both of the
// index's key attributes, as strings.
type Schema struct {
	PartitionKey string
	SortKey      string
	Indexes      []Index
	// TTLAttribute names the number attribute holding an item's expiry
	// (Unix seconds), or "" for none.
	TTLAttribute string
}

// Index returns the index called name, and whether there is one.
func (s Schema) Index(name string) (Index, bool) {
	for _, ix := range s.Indexes {
		if ix.Name == name {
			return ix, true
		}
	}
	return Index{}, false
}

// IsKeyAttribute reports whether name is the table's partition or sort key.
// Index key attributes are ordinary attributes of the table.
func (s Schema) IsKeyAttribute(name string) bool {
	return name == s.PartitionKey || name == s.SortKey
}

// KeyOf returns the table key of it, and false when it lacks either key
// attribute as a string.
func (s Schema) KeyOf(it Item) (Key, bool) {
	pk, ok1 := it.Str(s.PartitionKey)
	sk, ok2 := it.Str(s.SortKey)
	return Key{PK: pk, SK: sk}, ok1 && ok2
}

// The attribute and index names of the limiter's table.
const (
	AttrPK     = "PK"
	AttrSK     = "SK"
	AttrGSI2PK = "GSI2PK"
	AttrGSI2SK = "GSI2SK"
	AttrGSI3PK = "GSI3PK"
	AttrGSI3SK = "GSI3SK"
	AttrTTL    = "ttl"
	IndexGSI2  = "GSI2"
	IndexGSI3  = "GSI3"
)

// DefaultSchema returns the schema of the limiter's table: string keys PK
// and SK; GSI2 (per-resource aggregation) and GSI3 (bucket discovery), both
// keys-only; expiry in "ttl".
func DefaultSchema() Schema {
	return Schema{
		PartitionKey: AttrPK,
		SortKey:      AttrSK,
		Indexes: []Index{
			{Name: IndexGSI2, PartitionKey: AttrGSI2PK, SortKey: AttrGSI2SK, Projection: ProjectKeysOnly},
			{Name: IndexGSI3, PartitionKey: AttrGSI3PK, SortKey: AttrGSI3SK, Projection: ProjectKeysOnly},
		},
		TTLAttribute: AttrTTL,
	}
}
