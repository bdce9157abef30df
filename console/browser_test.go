package console_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/console"
	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestConsoleInBrowser drives the console in a real headless Chromium on an
// embedded stack, as an operator would: watch the counters and runs move
// while messages are published, open a run, open a dead letter and replay
// it (signing in first) and see the replay's run and its output, then roll
// the deployment back and see the instance move to the new revision.
// Screenshots go to the test's temp dir, and to $CONSOLE_SCREENSHOTS when
// set.
func TestConsoleInBrowser(t *testing.T) {
	browser := findChromium(t)
	st := startStack(t)
	ctx := newBrowser(t, browser)
	shots := screenshotDir(t)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\nconsole log:\n%s", what, err, st.log.String())
		}
	}
	waitFor := func(what, js string) {
		t.Helper()
		step(what, chromedp.Action[chromedp.Void](func(c context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond),
				chromedp.WithPollingTimeout(60*time.Second))(c, tg)
			return chromedp.Void{}, err
		}))
	}
	// follow opens the link that js (an expression for an <a>) finds on
	// a list page. Such a page refreshes its list in place, so a node found
	// and then clicked may be gone by the click ("Could not find node with
	// given id" in 1 of 5 fresh runs): the link's address is read and
	// opened instead.
	follow := func(what, js string, then chromedp.Action[chromedp.Void]) {
		t.Helper()
		waitFor(what, "!!("+js+")")
		href, err := chromedp.Run(ctx, chromedp.Evaluate[string]("("+js+`)?.getAttribute("href") ?? ""`))
		if err != nil || !strings.HasPrefix(href, "/") {
			t.Fatalf("%s: link %q, %v", what, href, err)
		}
		step(what, chromedp.Navigate(st.url+href), then)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	handled := `document.querySelector("#fn-echo [data-stat=handled]")?.textContent.trim()`

	// The functions page counts what the instance handles, live.
	step("opening the functions page", chromedp.Navigate(st.url+"/functions"), chromedp.WaitVisible(chromedp.CSS("#fn-echo")))
	total := 0
	for _, burst := range []int{3, 8, 5, 12, 6, 9, 4} {
		for range burst {
			total++
			st.publish(t, fmt.Sprintf(`{"greeting":"hello %d"}`, total), fmt.Sprintf("greet-%d", total))
		}
		waitFor(fmt.Sprintf("%d handled on the live page", total), fmt.Sprintf("%s === %q", handled, fmt.Sprint(total)))
	}
	if got := text("#fn-echo [data-stat=dead]"); got != "0" {
		t.Errorf("dead-lettered shows %q before any failure, want 0", got)
	}
	// A message that fails its first delivery is retried, and counted.
	st.publish(t, `{"greeting":"flaky"}`, "greet-flaky")
	total++
	waitFor("the retry counted", `document.querySelector("#fn-echo [data-stat=retried]")?.textContent.trim() === "1"`)
	waitFor("the flaky message handled", fmt.Sprintf("%s === %q", handled, fmt.Sprint(total+1)))
	total++
	// Under a steady flow the rate shows, for the screenshot.
	stopFlow := st.flow(t)
	waitFor("a rate above zero", `!["0", ""].includes(document.querySelector("#fn-echo [data-stat=rate]")?.textContent.replace("/s", "").trim())`)
	shot(t, ctx, shots, "console-functions.png")
	total += stopFlow()
	st.publish(t, `{"greeting":"hello, last one"}`, "greet-last")
	total++
	waitFor("the flow handled", fmt.Sprintf("%s === %q", handled, fmt.Sprint(total)))

	// The runs page lists every run; one opens with its payload and output.
	step("opening the runs", chromedp.Navigate(st.url+"/functions/echo/runs"))
	waitFor("every run listed", fmt.Sprintf(`document.querySelectorAll("table.runs tbody tr").length === %d`, total))
	if got := text("table.runs tbody"); !strings.Contains(got, "retry") || !strings.Contains(got, "flaky failed") {
		t.Errorf("runs lack the flaky message's retry:\n%s", got)
	}
	shot(t, ctx, shots, "console-runs.png")
	// Opened by its message ID: with three workers, the last flow message
	// may finish after it and head the list.
	follow("opening the newest run", `[...document.querySelectorAll("table.runs tbody tr")].find(r => r.querySelector('code[title="greet-last"]'))?.querySelector("a.rowlink")`,
		chromedp.WaitVisible(chromedp.CSS("pre.payload")))
	if p, o := text("pre.payload"), text("#outputs-h + table"); !strings.Contains(p, "hello, last one") || !strings.Contains(o, "test.out") {
		t.Errorf("run page payload %q, outputs %q; want the newest greeting and its test.out output", p, o)
	}
	if tr := text("dl.facts"); !strings.Contains(tr, "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("run page facts lack the trace ID:\n%s", tr)
	}
	shot(t, ctx, shots, "console-run.png")

	// A poison message is dead-lettered; the fix lands; the operator signs
	// in, replays it, and sees the replay's run with its output.
	st.broken.Store(true)
	st.publish(t, `{"greeting":"boom"}`, "greet-boom")
	step("back to functions", chromedp.Navigate(st.url+"/functions"), chromedp.WaitVisible(chromedp.CSS("#fn-echo")))
	waitFor("the dead letter counted", `document.querySelector("#fn-echo [data-stat=dead]")?.textContent.trim() === "1"`)
	st.broken.Store(false)
	step("opening the dead letters", chromedp.Navigate(st.url+"/deadletters"))
	follow("opening the dead letter", `document.querySelector("table.letters tbody tr:first-child a.rowlink")`, chromedp.WaitVisible(chromedp.CSS("#replay")))
	if h := text("dl.headers"); !strings.Contains(h, "Jetfn-Error") || !strings.Contains(h, "boom refused") {
		t.Errorf("dead letter headers %q lack Jetfn-Error and the reason", h)
	}
	shot(t, ctx, shots, "console-deadletter.png")
	step("asking to replay", chromedp.Click(chromedp.CSS("#replay")), chromedp.WaitVisible(chromedp.CSS("a.button[href^='/login']")))
	step("signing in", chromedp.Click(chromedp.CSS("a.button[href^='/login']")), chromedp.WaitVisible(chromedp.CSS("input[name=token]")),
		chromedp.SendKeys(chromedp.CSS("input[name=name]"), "ada"), chromedp.SendKeys(chromedp.CSS("input[name=token]"), st.token),
		chromedp.Submit(chromedp.CSS("input[name=token]")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if c := text("section.confirm"); !strings.Contains(c, "test.in") || !strings.Contains(c, ":replay:1") {
		t.Errorf("replay confirmation %q does not say where and under which ID", c)
	}
	step("confirming the replay", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("section.progress")))
	waitFor("the replay done", `document.querySelector("section.progress")?.textContent.includes("1 replayed")`)
	step("the replay's run", chromedp.Navigate(st.url+"/functions/echo/runs?outcome=ack"))
	waitFor("the replayed message handled", `[...document.querySelectorAll("table.runs tbody tr")].some(r => r.textContent.includes("greet-boom:replay:1"))`)
	follow("opening it", `[...document.querySelectorAll("table.runs tbody tr")].find(r => r.textContent.includes("greet-boom:replay:1"))?.querySelector("a.rowlink")`,
		chromedp.WaitVisible(chromedp.CSS("pre.payload")))
	if o := text("#outputs-h + table"); !strings.Contains(o, "test.out") || !strings.Contains(text("pre.payload"), "boom") {
		t.Errorf("the replay's run shows outputs %q; want its test.out output", o)
	}

	// Roll back: the confirmation shows the diff, the instance follows.
	step("opening deploys", chromedp.Navigate(st.url+"/deploys"), chromedp.WaitVisible(chromedp.CSS("#rollback")))
	waitFor("the instance on the current revision", `document.querySelector("tr.current .running")?.textContent.includes("echo")`)
	step("asking to roll back", chromedp.Click(chromedp.CSS("#rollback")), chromedp.WaitVisible(chromedp.CSS("table.diff")))
	if d := text("table.diff"); !strings.Contains(d, "concurrency: 3") || !strings.Contains(d, "concurrency: 2") {
		t.Errorf("rollback diff %q does not show the concurrency change", d)
	}
	shot(t, ctx, shots, "console-rollback.png")
	step("confirming the rollback", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitFor("revision 3 current and the instance on it", `(() => { const r = document.querySelector("tr.current");
		return r && r.textContent.includes("3") && r.querySelector(".running")?.textContent.includes("echo"); })()`)
	step("functions after the rollback", chromedp.Navigate(st.url+"/functions"), chromedp.WaitVisible(chromedp.CSS("#fn-echo")))
	waitFor("both instances on revision 3", `(() => { const cells = [...document.querySelectorAll("#fn-echo table.instances tbody tr td:nth-child(2)")];
		return cells.length === 2 && cells.every(c => c.textContent.trim() === "rev 3"); })()`)
	rev, err := deploy.Load(context.Background(), st.js, "app")
	if err != nil || rev.Number != 3 || string(rev.Raw) != string(revisionOne) {
		t.Errorf("deployment after the rollback: revision %d, %v; want 3 holding revision 1's manifest", rev.Number, err)
	}

	for _, want := range []string{`msg="console action" action=replay user=ada`, `msg="console action" action=rollback user=ada`} {
		if !strings.Contains(st.log.String(), want) {
			t.Errorf("audit log lacks %q:\n%s", want, st.log.String())
		}
	}
	for _, line := range strings.Split(st.log.String(), "\n") {
		if strings.Contains(line, "msg=\"console ") {
			t.Log(line)
		}
	}
	narrowAndDark(t, ctx, st.url, shots)
}

// narrowAndDark checks the functions page in a phone-sized window with the
// dark scheme: nothing wider than the window but the scrolling tables.
func narrowAndDark(t *testing.T, ctx context.Context, url, shots string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844),
		chromedp.Action[chromedp.Void](func(c context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(c, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return chromedp.Void{}, err
		}),
		chromedp.Navigate(url+"/functions"), chromedp.WaitVisible(chromedp.CSS("#fn-echo")))
	if err != nil {
		t.Fatalf("narrow dark window: %v", err)
	}
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || wide {
		t.Errorf("the page scrolls sideways in a 390px window (%v)", err)
	}
	shot(t, ctx, shots, "console-functions-narrow-dark.png")
}

// revisionOne and revisionTwo differ in concurrency only; the runtime runs
// revision two, so a rollback stores revision one's manifest as revision
// three.
var (
	revisionOne = []byte(echoManifest("2"))
	revisionTwo = []byte(echoManifest("3"))
)

func echoManifest(concurrency string) string {
	return `streams:
  - name: TEST
    subjects: ["test.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: echo
    version: 1.0.0
    stream: TEST
    subject: test.in
    ackWait: 5s
    maxDeliver: 2
    backoff: [10ms]
    concurrency: ` + concurrency + `
    outputs:
      - subject: test.out
        stream: TEST
`
}

// stack is an embedded NATS, a runtime following deployment "app" with the
// echo function, and the console with a token.
type stack struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	url    string
	token  string
	broken atomic.Bool // echo refuses "boom" for good while set
	log    *runtimetest.LogBuffer
}

func startStack(t *testing.T) *stack {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	st := &stack{nc: runtimetest.Connect(t, ns.ClientURL()), token: "a-test-token-of-32-characters-xx", log: &runtimetest.LogBuffer{}}
	js, err := jetstream.New(st.nc)
	if err != nil {
		t.Fatal(err)
	}
	st.js = js
	ctx := context.Background()
	for _, raw := range [][]byte{revisionOne, revisionTwo} {
		if _, err := deploy.Store(ctx, js, "app", raw); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // two instances share the consumer
		st.runEcho(t, ns.ClientURL())
	}
	st.serveConsole(t, ns.ClientURL())
	return st
}

// runEcho runs revision two and follows the deployment.
func (st *stack) runEcho(t *testing.T, url string) {
	t.Helper()
	rev, err := deploy.Load(context.Background(), st.js, "app")
	if err != nil {
		t.Fatal(err)
	}
	m, err := rev.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	echo := jetfn.Function{Name: "echo", New: func(deps jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
			if st.broken.Load() && strings.Contains(string(msg.Data), "boom") {
				return jetfn.Permanent(errors.New("boom refused"))
			}
			if strings.Contains(string(msg.Data), "flaky") && msg.NumDelivered == 1 {
				return errors.New("flaky failed its first delivery")
			}
			return deps.Publisher.Publish(ctx, "test.out", append([]byte("echo "), msg.Data...), fmt.Sprint(msg.StreamSequence))
		}), nil
	}}
	nc := runtimetest.Connect(t, url)
	rt, err := runtime.New(nc, m, []jetfn.Function{echo})
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = deploy.Follow(ctx, js, "app", rev.Number, rt, st.logger())
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// serveConsole serves the console on a free loopback port until the test
// ends.
func (st *stack) serveConsole(t *testing.T, url string) {
	t.Helper()
	srv, err := console.New(console.Config{NATS: runtimetest.Connect(t, url), Deployment: "app", Log: st.logger(),
		DeadLetter: manifest.DeadLetterSpec{Stream: "DEADLETTER", SubjectPrefix: "deadletter"}},
		console.WithToken(st.token), console.WithInterval(250*time.Millisecond), console.LoopbackOnly(),
		console.WithTraceURL("https://traces.example/trace/{trace_id}"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v", err)
		}
	})
}

func (st *stack) logger() *slog.Logger { return slog.New(slog.NewTextHandler(st.log, nil)) }

// publish stores one greeting on test.in with its message ID and a
// traceparent.
func (st *stack) publish(t *testing.T, data, msgID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := &nats.Msg{Subject: "test.in", Data: []byte(data), Header: nats.Header{
		"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	if _, err := st.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}

// flow publishes greetings at a steady pace until the returned stop, which
// returns how many it published.
func (st *stack) flow(t *testing.T) (stop func() int) {
	t.Helper()
	done, count := make(chan struct{}), make(chan int, 1)
	go func() {
		tick := time.NewTicker(15 * time.Millisecond) // a pace, not a wait for an effect
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-done:
				count <- n
				return
			case <-tick.C:
				n++
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := st.js.Publish(ctx, "test.in", []byte(fmt.Sprintf(`{"greeting":"flow %d"}`, n)), jetstream.WithMsgID(fmt.Sprintf("flow-%d", n)))
				cancel()
				if err != nil {
					n--
				}
			}
		}
	}()
	return func() int { close(done); return <-count }
}

// findChromium is Debian's chromium (or another Chrome on PATH); the test
// skips, saying how to get one, without.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH: install Debian's `chromium` package (apt-get install -y chromium; .ci/run does) to run the browser test")
	return ""
}

// newBrowser starts headless Chromium with a fresh profile; the flags keep
// it from reaching for the network on its own, which a closed network
// makes it wait on.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

func screenshotDir(t *testing.T) string {
	if dir := os.Getenv("CONSOLE_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// shot saves the whole page as a PNG.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
