//go:build unix

package dynamotest

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// A server of its own stops with its whole process group.
func TestStopKillsTheProcess(t *testing.T) {
	if os.Getenv(EnvEndpoint) != "" {
		t.Skipf("%s is set: Start launches no process", EnvEndpoint)
	}
	Start(t) // skips without an installation
	srv, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	pid := srv.PID()
	if _, err := srv.Client.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.Stop() // idempotent
	select {
	case <-srv.proc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("process still running")
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still exists: %v", pid, err)
	}
}
