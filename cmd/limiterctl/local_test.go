package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

// limiterctl local starts DynamoDB Local with the table, prints the
// endpoint and the environment to export; an acquire made with that
// environment is admitted; the end of its context stops the JVM.
func TestLocal(t *testing.T) {
	for _, v := range []string{"LIMITER_TABLE", "LIMITER_ENDPOINT", "LIMITER_NAMESPACE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION"} {
		t.Setenv(v, "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var errOut bytes.Buffer // read only once the command has returned
	done := make(chan int, 1)
	go func() {
		code := runContext(ctx, []string{"local"}, pw, &errOut)
		pw.Close()
		done <- code
	}()

	var endpoint, table string
	var exports []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "endpoint="); ok {
			endpoint, table, _ = strings.Cut(rest, " table=")
		}
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			exports = append(exports, strings.Fields(rest)...)
		}
		if strings.HasPrefix(line, "Ctrl-C stops it") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if endpoint == "" || table != "rate-limits" || len(exports) != 5 {
		cancel()
		code := <-done
		t.Fatalf("limiterctl local: exit %d, endpoint %q, table %q, exports %q\n%s", code, endpoint, table, exports, errOut.String())
	}

	for _, kv := range exports {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if os.Getenv("LIMITER_ENDPOINT") != endpoint || os.Getenv("LIMITER_TABLE") != table {
		t.Fatalf("the exports %q do not name the endpoint %s and table %s", exports, endpoint, table)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"acquire", "key-1", "gpt-4", "--consume", "rpm=1", "--limit", "rpm:10/min"}, &out, &errs); code != exitOK ||
		!strings.Contains(out.String(), "Admitted: key-1 took rpm=1 on gpt-4.") {
		t.Fatalf("acquire with the printed environment: exit %d\n%s%s", code, out.String(), errs.String())
	}

	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("limiterctl local: exit %d after its context ended\n%s", code, errOut.String())
	}
	if conn, err := net.Dial("tcp", strings.TrimPrefix(endpoint, "http://")); err == nil {
		conn.Close()
		t.Fatalf("%s still answers after limiterctl local returned", endpoint)
	}
}
