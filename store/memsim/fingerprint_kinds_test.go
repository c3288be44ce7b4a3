package memsim

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// TestFingerprintTellsAStringFromANumber: each value carries its kind's
// tag, so a string and a number never line up, however the attribute
// names after them are spelled. Without the tags, these pairs of items
// (their names crafted to hold the length prefixes the other item's
// encoding has there) would fingerprint alike, and a retry of one with
// the other's client token would be answered as a repeat.
func TestFingerprintTellsAStringFromANumber(t *testing.T) {
	le := func(n uint64) string {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], n)
		return string(b[:])
	}
	put := func(it store.Item) []store.Write {
		it[store.AttrPK], it[store.AttrSK] = store.Str("p"), store.Str("s")
		return []store.Write{{Put: &store.PutInput{Item: it}}}
	}
	y := strings.Repeat("A", 74)
	for name, pr := range map[string][2][]store.Write{
		// A number's eight bytes, untagged, read as the length of a
		// string "S" tag and all.
		"a number where a tagged string stood": {
			put(store.Item{"\x00": store.Int(1), "\x00" + le(74) + y: store.Str("z")}),
			put(store.Item{"\x00": store.Str(""), y: store.Str("z")}),
		},
		// A string "N", untagged, read as a number's tag.
		"a string N where a tagged number stood": {
			put(store.Item{"\x00": store.Str("N"), le(1) + "A": store.Str("z")}),
			put(store.Item{"\x00": store.Int(9), "A": store.Str("z")}),
		},
	} {
		if fingerprint(pr[0]) == fingerprint(pr[1]) {
			t.Errorf("%s: the same fingerprint", name)
		}
	}
}
