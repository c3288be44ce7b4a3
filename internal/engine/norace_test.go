//go:build !race

package engine

// raceEnabled reports a -race build, in which sync.Pool drops items at
// random and allocation counts are meaningless.
const raceEnabled = false
