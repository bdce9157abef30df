package console

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetfn/jetfn/ops/status"
	"github.com/jetfn/jetfn/wire"
)

func TestLineDiff(t *testing.T) {
	tests := []struct {
		name, a, b string
		want       string // one op and text per line
	}{
		{name: "same", a: "x\ny\n", b: "x\ny\n", want: " x| y"},
		{name: "changed line", a: "a\nconcurrency: 2\nb\n", b: "a\nconcurrency: 3\nb\n", want: " a|-concurrency: 2|+concurrency: 3| b"},
		{name: "added at end", a: "a\n", b: "a\nb\n", want: " a|+b"},
		{name: "removed at start", a: "a\nb\n", b: "b\n", want: "-a| b"},
		{name: "from nothing", a: "", b: "a\n", want: "+a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range lineDiff(tt.a, tt.b) {
				got = append(got, string(l.Op)+l.Text)
			}
			if diff := cmp.Diff(tt.want, strings.Join(got, "|")); diff != "" {
				t.Errorf("lineDiff (-want +got):\n%s", diff)
			}
		})
	}
	lines := lineDiff("a\nb\nc\n", "a\nc\nd\n")
	if added, removed := diffStats(lines); added != 1 || removed != 1 || lines[2].NewNo != 2 || lines[2].OldNo != 3 {
		t.Errorf("diff %+v: +%d -%d, want +1 -1 with c at old 3, new 2", lines, added, removed)
	}
}

// TestRates: rates come from the handled counters of two polls; a new
// instance counts from its second poll, a restarted one from zero, and
// the history keeps historyLen samples.
func TestRates(t *testing.T) {
	inst := func(id, fn string, handled uint64) status.Instance {
		return status.Instance{ID: id, Function: fn, Stats: wire.Stats{Handled: handled}}
	}
	r := newRates()
	t0 := time.Unix(1000, 0)
	fn, _ := r.observe(t0, []status.Instance{inst("a", "f", 10)})
	if fn["f"] != 0 {
		t.Errorf("first poll rate %v, want 0", fn["f"])
	}
	fn, byInst := r.observe(t0.Add(2*time.Second), []status.Instance{inst("a", "f", 30), inst("b", "f", 500)})
	if fn["f"] != 10 || byInst["a"] != 10 || byInst["b"] != 0 {
		t.Errorf("second poll: f %v, a %v, b %v; want 10, 10 and nothing for the new b", fn["f"], byInst["a"], byInst["b"])
	}
	fn, _ = r.observe(t0.Add(3*time.Second), []status.Instance{inst("a", "f", 4), inst("b", "f", 501)})
	if fn["f"] != 5 {
		t.Errorf("after a restarted a (4 from 0) and b +1 in 1s: %v, want 5", fn["f"])
	}
	for i := range historyLen + 5 {
		r.observe(t0.Add(time.Duration(4+i)*time.Second), []status.Instance{inst("a", "f", 4)})
	}
	if h := r.historyOf("f"); len(h) != historyLen {
		t.Errorf("history of %d samples, want %d", len(h), historyLen)
	}
}

// TestAuth: sessions verify and expire, a forged or other token's session
// fails, and the action gate wants the CSRF token and the same origin.
func TestAuth(t *testing.T) {
	a, other := newAuth("the-right-token-0123456789"), newAuth("another-token-0123456789")
	now := time.Unix(100_000, 0)
	sess := a.newSession("ada", now)
	if user, ok := a.session(sess, now.Add(time.Hour)); !ok || user != "ada" {
		t.Errorf("fresh session: %q %v", user, ok)
	}
	if _, ok := a.session(sess, now.Add(sessionTTL+time.Minute)); ok {
		t.Error("an expired session passed")
	}
	if _, ok := other.session(sess, now); ok {
		t.Error("a session of another token passed")
	}
	if _, ok := a.session(strings.Replace(sess, "YWRh", "Ym9i", 1), now); ok {
		t.Error("a session with its name changed passed")
	}
	if _, ok := newAuth("").session(sess, now); ok {
		t.Error("a console without a token accepted a session")
	}
	tests := []struct {
		name    string
		csrf    string
		headers map[string]string
		want    error
	}{
		{name: "good", csrf: a.csrf(sess)},
		{name: "no csrf", want: ErrCSRF},
		{name: "csrf of another session", csrf: a.csrf(a.newSession("bob", now)), want: ErrCSRF},
		{name: "cross-site", csrf: a.csrf(sess), headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: ErrCSRF},
		{name: "other origin", csrf: a.csrf(sess), headers: map[string]string{"Origin": "http://evil.example"}, want: ErrCSRF},
		{name: "same origin", csrf: a.csrf(sess), headers: map[string]string{"Origin": "http://console.test", "Sec-Fetch-Site": "same-origin"}},
		{name: "bearer", headers: map[string]string{"Authorization": "Bearer the-right-token-0123456789", "Cookie": ""}},
		{name: "wrong bearer", headers: map[string]string{"Authorization": "Bearer nope"}, want: ErrUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://console.test/actions/rollback", strings.NewReader(url.Values{"csrf": {tt.csrf}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Cookie", sessionCookie+"="+sess)
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			if _, err := a.checkAction(r, now); (tt.want == nil) != (err == nil) || (tt.want != nil && !strings.Contains(err.Error(), tt.want.Error())) {
				t.Errorf("checkAction = %v, want %v", err, tt.want)
			}
		})
	}
	r := httptest.NewRequest("POST", "http://console.test/actions/rollback", nil)
	if _, err := newAuth("").checkAction(r, now); err != ErrReadOnly {
		t.Errorf("without a token: %v, want ErrReadOnly", err)
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:7333": true, "localhost:7333": true, "[::1]:7333": true, "127.0.0.2": true,
		"evil.example:7333": false, "10.0.0.1:7333": false, "": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestFormats(t *testing.T) {
	tests := []struct{ got, want string }{
		{formatMillis(0), "–"}, {formatMillis(0.256), "0.26 ms"}, {formatMillis(17.64), "17.6 ms"},
		{formatMillis(4023), "4023 ms"}, {formatMillis(12_500), "12.5 s"},
		{formatRate(0), "0"}, {formatRate(3.25), "3.2"}, {formatRate(67.4), "67"}, {formatRate(12_345), "12.3k"},
		{formatCount(uint64(1234567)), "1,234,567"}, {formatCount(12), "12"},
		{shortID("FjywC2PxYz0123456789ab"), "…6789ab"}, {traceLink("https://t.example/{trace_id}", "abc"), "https://t.example/abc"},
		{payloadText([]byte(`{"a":1}`)), "{\n  \"a\": 1\n}"}, {payloadText([]byte{0xff, 0xfe}), "(2 bytes, not UTF-8 text)"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: %q, want %q", i, tt.got, tt.want)
		}
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{"/deploys": "/deploys", "//evil.example/": "/functions", "https://evil.example": "/functions",
		"/\\evil.example": "/functions", "": "/functions"} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}
