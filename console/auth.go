package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sessionCookie holds a signed session: who signed in and when.
const sessionCookie = "jetfn_console"

// sessionTTL is how long a sign-in lasts.
const sessionTTL = 12 * time.Hour

// auth checks sessions, bearer tokens and CSRF tokens. Its key is derived
// from the token, so a restart with the same token keeps sessions valid and
// a new token ends them all; the token itself is never stored in a cookie.
type auth struct {
	token string
	key   []byte
}

func newAuth(token string) *auth {
	if token == "" {
		return &auth{}
	}
	sum := sha256.Sum256([]byte("jetfn-console-session-key:" + token))
	return &auth{token: token, key: sum[:]}
}

func (a *auth) enabled() bool { return a.token != "" }

// tokenMatches compares in constant time.
func (a *auth) tokenMatches(candidate string) bool {
	return a.enabled() && subtle.ConstantTimeCompare([]byte(candidate), []byte(a.token)) == 1
}

func (a *auth) mac(parts ...string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// newSession is the cookie value for user, signed in at now.
func (a *auth) newSession(user string, now time.Time) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	name := base64.RawURLEncoding.EncodeToString([]byte(user))
	return ts + "." + name + "." + a.mac("session", ts, name)
}

// session returns the user of a valid, unexpired session cookie value.
func (a *auth) session(value string, now time.Time) (user string, ok bool) {
	if !a.enabled() {
		return "", false
	}
	parts := strings.Split(value, ".")
	if len(parts) != 3 || !hmac.Equal([]byte(parts[2]), []byte(a.mac("session", parts[0], parts[1]))) {
		return "", false
	}
	ts, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || now.Sub(time.Unix(ts, 0)) > sessionTTL {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	return string(raw), err == nil
}

// csrf is the CSRF token of a session: forms carry it, and an action
// whose form does not is refused.
func (a *auth) csrf(session string) string { return a.mac("csrf", session)[:32] }

// who is the requester: the signed-in user, or the bearer of the token.
type who struct {
	User    string
	Session string // the cookie value; empty for a bearer
	Bearer  bool
}

// identify reads the session cookie or the Authorization header.
func (a *auth) identify(r *http.Request, now time.Time) (who, bool) {
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return who{User: "bearer", Bearer: true}, a.tokenMatches(bearer)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return who{}, false
	}
	user, ok := a.session(c.Value, now)
	return who{User: user, Session: c.Value}, ok
}

// checkAction is the gate of every state-changing request: a token is
// configured, the requester is signed in (or bears the token), and a
// browser's request is same-origin and carries the session's CSRF token.
func (a *auth) checkAction(r *http.Request, now time.Time) (who, error) {
	if !a.enabled() {
		return who{}, ErrReadOnly
	}
	w, ok := a.identify(r, now)
	if !ok {
		return w, ErrUnauthorized
	}
	if w.Bearer {
		return w, nil // a browser never sends this header across sites by itself
	}
	if err := sameOrigin(r); err != nil {
		return w, err
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(a.csrf(w.Session))) {
		return w, fmt.Errorf("%w: missing or stale form token; reload the page", ErrCSRF)
	}
	return w, nil
}

// sameOrigin refuses a request a browser marks as cross-site, or whose
// Origin is another host.
func sameOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("%w: Sec-Fetch-Site %s", ErrCSRF, site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("%w: Origin %s", ErrCSRF, origin)
		}
	}
	return nil
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost, 127.0.0.0/8 or ::1, with any port.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.Trim(host, "[]")
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
