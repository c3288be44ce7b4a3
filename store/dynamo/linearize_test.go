package dynamo_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/internal/linearize"
)

// TestLinearizable records concurrent histories of random calls on a few
// keys through store/dynamo against DynamoDB Local (6 clients; a few calls
// with a deadline short enough to lose their answer) and checks each
// against the sequential model built on memsim. Unconditional deletes ask
// for no old item (see linearize.Config.NoOldOnBlindDelete: DynamoDB
// Local's are not atomic). make linearize runs the long campaign.
func TestLinearizable(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	histories, ops := linearize.Budget(t, 3, 50)
	var total linearize.Stats
	for h := range histories {
		seed := uint64(h + 1)
		s := linearize.Check(t, st, linearize.Config{Clients: 6, Ops: ops, Seed: seed, NS: "l" + strconv.Itoa(h),
			TimeoutPct: 3, Timeout: 3 * time.Millisecond, Groups: 2, NoOldOnBlindDelete: true}, 2*time.Minute)
		total.Ops += s.Ops
		total.Unknown += s.Unknown
		total.Refused += s.Refused
	}
	t.Logf("linearizable: %d histories, %d operations (%d with unknown outcome, %d refused)", histories, total.Ops, total.Unknown, total.Refused)
}
