package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestConsoleCommand runs `jetfn console` against a stack: it prints its
// address, serves the functions page, refuses an action without a token
// (read-only), refuses another Host on its loopback address, and stops
// with the context.
func TestConsoleCommand(t *testing.T) {
	nc, rt := opsEnv(t)
	t.Setenv("JETFN_CONSOLE_TOKEN", "")
	runtest.Publish(t, nc, "test.in", `{"name":"a"}`, "")
	runtimetest.Eventually(t, 10*time.Second, "one settled", func() bool { return runtest.Settled(rt, "greeter", 1) })
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &runtimetest.LogBuffer{}, &runtimetest.LogBuffer{}
	done := make(chan int, 1)
	go func() { done <- realMain(ctx, []string{"console", "--listen", "127.0.0.1:0"}, out, errOut) }()
	var base string
	runtimetest.Eventually(t, 10*time.Second, "CONSOLE= printed", func() bool {
		line, found := strings.CutPrefix(strings.TrimSpace(out.String()), "CONSOLE=")
		base = strings.TrimSuffix(line, "/")
		return found
	})
	runtimetest.Eventually(t, 10*time.Second, "the greeter on the functions page", func() bool {
		code, body := httpGet(t, base+"/functions", "")
		return code == http.StatusOK && strings.Contains(body, "fn-greeter")
	})
	res, err := http.Post(base+"/actions/rollback", "application/x-www-form-urlencoded", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("an action on a read-only console: %s, want 403", res.Status)
	}
	if code, _ := httpGet(t, base+"/functions", "rebound.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host: %d, want 421", code)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the context ended, want 0:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("jetfn console did not stop")
	}
	if !strings.Contains(errOut.String(), "console is read-only") {
		t.Errorf("the log does not say the console is read-only:\n%s", errOut.String())
	}
}

func httpGet(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}
