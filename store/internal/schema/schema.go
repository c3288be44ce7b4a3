// Package schema describes a table's layout for the backends: key
// attribute names, secondary indexes and the expiry attribute. The
// limiter's layout is fixed ([Default], from the store.Attr* and
// store.Index* constants); the backends' tests vary it.
package schema

import "github.com/shardlimit/limiter/store"

// Projection says which attributes a secondary index copies.
type Projection uint8

// Index projections, as DynamoDB defines them. The limiter's indexes are
// keys-only (see store.AttrPK for why).
const (
	ProjectKeysOnly Projection = iota
	ProjectAll
)

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

// Default returns the schema of the limiter's table: string keys PK
// and SK; GSI2 (which no item of the limiter enters) and GSI3 (bucket
// discovery), both keys-only; expiry in "ttl".
func Default() Schema {
	return Schema{
		PartitionKey: store.AttrPK,
		SortKey:      store.AttrSK,
		Indexes: []Index{
			{Name: store.IndexGSI2, PartitionKey: store.AttrGSI2PK, SortKey: store.AttrGSI2SK, Projection: ProjectKeysOnly},
			{Name: store.IndexGSI3, PartitionKey: store.AttrGSI3PK, SortKey: store.AttrGSI3SK, Projection: ProjectKeysOnly},
		},
		TTLAttribute: store.AttrTTL,
	}
}
