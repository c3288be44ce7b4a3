package store

import "iter"

// View is a read-only view of one item's attributes: an [Item] is one, and
// a backend may hand out its own (memsim's WithViews) so that a write's
// result costs no map. A View is never modified once handed out; it is safe
// for concurrent use.
type View interface {
	// Get returns the value of attribute name, and whether there is one.
	Get(name string) (Value, bool)
	// Int returns the number stored under name, and whether there was one.
	Int(name string) (int64, bool)
	// Str returns the string stored under name, and whether there was one.
	Str(name string) (string, bool)
	// Len returns the number of attributes, key attributes included.
	Len() int
	// All yields every attribute. The order is the view's own: fixed for
	// a given view, unspecified across views.
	All() iter.Seq2[string, Value]
	// Numbers yields every number attribute, in All's order.
	Numbers() iter.Seq2[string, int64]
	// Item returns the attributes as an Item. The map may be the view's
	// own, built once and shared: the caller must not modify it.
	Item() Item
}

var _ View = Item(nil)

// Get returns the value of attribute name, and whether there is one.
func (it Item) Get(name string) (Value, bool) {
	v, ok := it[name]
	return v, ok
}

// Len returns the number of attributes of it (0 for nil).
func (it Item) Len() int { return len(it) }

// All yields every attribute of it, in no particular order.
func (it Item) All() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		for k, v := range it {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Item returns it itself: an Item is its own [View].
func (it Item) Item() Item { return it }

// ViewOf returns v when it is set, else it as a View; nil (a nil
// interface) when neither holds an item: how a result that a backend hands
// out either as a view or as a map is read.
func ViewOf(v View, it Item) View {
	if v != nil {
		return v
	}
	if it != nil {
		return it
	}
	return nil
}

// Image returns what the write handed back: View when the backend set it,
// else Attributes; nil (a nil interface) when neither holds an item.
func (o WriteOutput) Image() View { return ViewOf(o.View, o.Attributes) }

// Image returns the item as it stood, as the backend handed it back: View
// when set, else Item; nil (a nil interface) when there is none.
func (e *ConditionFailedError) Image() View {
	if e == nil {
		return nil
	}
	return ViewOf(e.View, e.Item)
}

// ItemOfView returns v's attributes as an [Item] (a view builds it at most
// once), or nil for a nil view.
func ItemOfView(v View) Item {
	if v == nil {
		return nil
	}
	return v.Item()
}

// SlotView is a [View] whose attributes sit in slots: every view of one
// [Layout] holds each of the layout's names in the same slot, so that a
// reader of many views looks a name up once per layout and then reads by
// slot. memsim's views (WithViews) are slot views. Every attribute a view
// holds is in its layout, and IntAt(Layout().Slot(name)) reads what
// Int(name) reads: reading by slot is only faster.
type SlotView interface {
	View
	// Layout returns the view's layout; nil turns reading by slot off
	// (readers then read by name).
	Layout() Layout
	// IntAt returns the number in slot i of the view's layout, and
	// whether the view holds a number there (false for a string, for an
	// attribute this view lacks, and for a slot out of range).
	IntAt(i int) (int64, bool)
}

// Layout is the names of the attributes of [SlotView]s, each in its slot.
// Layouts are compared by identity (==): views whose layouts are equal hold
// a name in the same slot. A layout's dynamic type should be comparable (a
// pointer, in practice); readers do not remember the slots of one that is
// not, and look its names up every time.
type Layout interface {
	// Slot returns the slot of name, or -1 when the layout has none.
	Slot(name string) int
}
