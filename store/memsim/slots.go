package memsim

import "github.com/shardlimit/limiter/store"

// A record is a [store.SlotView] of its layout: readers of many records
// (the limiter decoding every write's result) look names up once per
// layout, then read slots.
var _ store.SlotView = (*record)(nil)

// Layout implements [store.SlotView.Layout].
func (r *record) Layout() store.Layout { return r.lay }

// IntAt implements [store.SlotView.IntAt].
func (r *record) IntAt(i int) (int64, bool) {
	if i < 0 || i >= len(r.lay.names) || !r.isNumber(i) {
		return 0, false
	}
	return r.num[i], true
}

// Slot implements [store.Layout.Slot].
func (l *layout) Slot(name string) int {
	if i, ok := l.index[name]; ok {
		return int(i)
	}
	return -1
}
