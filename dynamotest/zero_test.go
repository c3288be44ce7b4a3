package dynamotest

import (
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"
)

// fatalTB records a Fatal instead of ending the test.
type fatalTB struct {
	testing.TB
	fatal bool
}

func (f *fatalTB) Helper()               {}
func (f *fatalTB) Fatal(...any)          { f.fatal = true }
func (f *fatalTB) Fatalf(string, ...any) { f.fatal = true }

// A nil or zero Server fails the test that asks it for a table (no
// panic); its PID and Stop do nothing; NewClient skips a nil option. None
// of this starts DynamoDB Local.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	var nilSrv *Server
	calls := map[string]func(){
		"nil Server PID and Stop":   func() { nilSrv.PID(); nilSrv.Stop(); (&Server{}).PID(); (&Server{}).Stop() },
		"NewClient with nil option": func() { NewClient("", nil) },
	}
	for _, s := range []*Server{nilSrv, {}} {
		calls["NewTable of a nil or zero Server"] = func() {
			tb := &fatalTB{TB: t}
			s.NewTable(tb)
			if !tb.fatal {
				t.Error("NewTable of a nil or zero Server did not fail the test")
			}
		}
		zerotest.NoPanics(t, calls)
	}
}
