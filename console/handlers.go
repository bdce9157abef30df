package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetfn/jetfn/internal/textfit"
	"github.com/jetfn/jetfn/ops/dlq"
	"github.com/jetfn/jetfn/wire"
)

// Handler is the console's HTTP handler: its pages, actions and assets.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(staticFS())))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/functions", http.StatusFound)
	})
	mux.HandleFunc("GET /functions", s.functionsPage)
	mux.HandleFunc("GET /functions/{name}/runs", s.runsPage)
	mux.HandleFunc("GET /functions/{name}/runs/{instance}/{id}", s.runPage)
	mux.HandleFunc("GET /deadletters", s.deadLettersPage)
	mux.HandleFunc("GET /deadletters/{seq}", s.deadLetterPage)
	mux.HandleFunc("GET /deploys", s.deploysPage)
	mux.HandleFunc("GET /deploys/diff", s.diffPage)
	mux.HandleFunc("GET /jobs/{id}", s.jobPage)
	mux.HandleFunc("GET /confirm/{action}", s.confirmPage)
	mux.HandleFunc("POST /actions/{action}", s.doAction)
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	return s.guard(mux)
}

// guard checks the Host and sets the headers every answer carries: no
// script or style from elsewhere, no framing, no sniffing.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.loopback && !loopbackHost(r.Host) {
			http.Error(w, ErrBadHost.Error(), http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// show renders a page, or only its main part when the live script asks
// for it (?part=main).
func (s *Server) show(w http.ResponseWriter, r *http.Request, name, title string, live bool, data any) {
	p := s.pageFor(r, name, title, data)
	if live {
		p.Live = liveURL(r.URL)
	}
	body, err := s.pages.render(name, p, r.URL.Query().Get("part") == "main")
	if err != nil {
		s.cfg.Log.Error("rendering a console page", "page", name, "err", err)
		http.Error(w, "rendering the page failed; see the console's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// liveURL is the page's own URL asking for its main part.
func liveURL(u *url.URL) string {
	q := u.Query()
	q.Set("part", "main")
	return u.Path + "?" + q.Encode()
}

func (s *Server) pageFor(r *http.Request, name, title string, data any) page {
	p := page{Name: name, Title: title, ReadOnly: s.ReadOnly(), Path: r.URL.RequestURI(), Now: time.Now(),
		TraceURL: s.opts.traceURL, Data: data}
	if w, ok := s.auth.identify(r, p.Now); ok && !w.Bearer {
		p.User, p.CSRF = w.User, s.auth.csrf(w.Session)
		if p.User == "" {
			p.User = "signed in"
		}
	}
	return p
}

// fail shows an error page: 404 for what does not exist, else 502 (the
// stack did not answer as it should).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusBadGateway
	switch {
	case isNotFound(err):
		code = http.StatusNotFound
	case errors.Is(err, ErrReadOnly), errors.Is(err, ErrUnauthorized), errors.Is(err, ErrCSRF):
		code = http.StatusForbidden
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	s.show(w, r, "error", "Error", false, map[string]any{"Code": code, "Err": err.Error()})
}

func (s *Server) functionsPage(w http.ResponseWriter, r *http.Request) {
	s.show(w, r, "functions", "Functions", true, s.snapshot(r.Context()))
}

// runsData is the runs page: the function, its merged runs and the filter.
type runsData struct {
	Function *functionView
	Name     string
	Runs     []runView
	Answered int
	Outcome  string
	Counts   map[string]int
	Err      string
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	sn := s.snapshot(r.Context())
	d := runsData{Name: name, Function: sn.function(name), Outcome: r.URL.Query().Get("outcome"), Counts: map[string]int{}}
	expected := 0
	if d.Function != nil {
		expected = len(d.Function.Instances)
	}
	runs, answered, err := s.runsOf(r.Context(), name, expected, wire.RunsRequest{})
	if err != nil {
		d.Err = err.Error()
	}
	d.Answered = answered
	for _, run := range runs {
		d.Counts[run.Outcome]++
		if d.Outcome == "" || run.Outcome == d.Outcome {
			d.Runs = append(d.Runs, run)
		}
	}
	s.show(w, r, "runs", name+" runs", true, d)
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	name, instance, id := r.PathValue("name"), r.PathValue("instance"), r.PathValue("id")
	runs, _, err := s.runsOf(r.Context(), name, 0, wire.RunsRequest{Run: id})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	i := slices.IndexFunc(runs, func(v runView) bool { return v.Instance == instance })
	if i < 0 {
		s.fail(w, r, fmt.Errorf("%w: run %s of %s on instance %s: the instance no longer remembers it (it keeps its last %d runs) or has stopped",
			ErrNotFound, id, name, instance, wire.RunHistory))
		return
	}
	s.show(w, r, "run", name+" run "+id, false, map[string]any{"Name": name, "Run": runs[i]})
}

// maxLiveLetters is the longest dead-letter list the page refreshes live.
const maxLiveLetters = 200

// lettersData is the dead letters page.
type lettersData struct {
	Filter    letterFilter
	Functions []string
	Letters   []dlq.Letter
	Err       string
}

func (s *Server) deadLettersPage(w http.ResponseWriter, r *http.Request) {
	d := lettersData{Filter: filterOf(r.URL.Query())}
	for _, f := range s.snapshot(r.Context()).Functions {
		d.Functions = append(d.Functions, f.Name)
	}
	letters, err := s.matching(r.Context(), d.Filter)
	if err != nil {
		d.Err = err.Error()
	}
	slices.Reverse(letters) // newest first
	d.Letters = letters
	// Listing reads every dead letter (one message get each): refreshing a
	// long list every few seconds would load the server for nothing.
	s.show(w, r, "deadletters", "Dead letters", len(letters) <= maxLiveLetters, d)
}

func (s *Server) deadLetterPage(w http.ResponseWriter, r *http.Request) {
	seq, err := seqParam(url.Values{"seq": {r.PathValue("seq")}})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	store, err := dlq.Open(r.Context(), s.js, s.cfg.DeadLetter)
	if err == nil {
		var l dlq.Letter
		if l, err = store.Get(r.Context(), seq); err == nil {
			s.show(w, r, "deadletter", "Dead letter "+strconv.FormatUint(seq, 10), false, l)
			return
		}
	}
	s.fail(w, r, err)
}

// deploysData is the deploys page: revisions, and which instances run
// which digest.
type deploysData struct {
	Deployment string
	Revisions  []revisionView
	Running    map[string][]instanceView // by digest
	Unknown    []instanceView            // running a digest no revision has
	Rolled     string
	Err        string
}

func (s *Server) deploysPage(w http.ResponseWriter, r *http.Request) {
	d := deploysData{Deployment: s.cfg.Deployment, Running: map[string][]instanceView{}, Rolled: r.URL.Query().Get("rolled")}
	revs, err := s.revisions.list()
	if err != nil {
		d.Err = err.Error()
	}
	d.Revisions = revs
	known := map[string]bool{}
	for _, rev := range revs {
		known[rev.Digest] = true
	}
	for _, f := range s.snapshot(r.Context()).Functions {
		for _, in := range f.Instances {
			if known[in.ManifestDigest] {
				d.Running[in.ManifestDigest] = append(d.Running[in.ManifestDigest], in)
			} else {
				d.Unknown = append(d.Unknown, in)
			}
		}
	}
	s.show(w, r, "deploys", "Deploys", true, d)
}

func (s *Server) diffPage(w http.ResponseWriter, r *http.Request) {
	num := func(k string) uint64 { n, _ := strconv.ParseUint(r.URL.Query().Get(k), 10, 64); return n }
	from, okFrom := s.revisions.find(num("from"))
	to, okTo := s.revisions.find(num("to"))
	if !okFrom || !okTo {
		s.fail(w, r, fmt.Errorf("%w: revision not in the deployment's history", ErrNotFound))
		return
	}
	lines := lineDiff(string(from.Raw), string(to.Raw))
	added, removed := diffStats(lines)
	s.show(w, r, "diff", "Diff", false, map[string]any{"From": from, "To": to, "Lines": lines, "Added": added, "Removed": removed})
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	j, ok := s.jobs.get(r.PathValue("id"))
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: no such replay (the console remembers its last %d)", ErrNotFound, maxJobs))
		return
	}
	v := j.view()
	s.show(w, r, "job", v.Title, v.Finished.IsZero(), v)
}

// confirmData is the confirmation page of an action.
type confirmData struct {
	Action  action
	Params  map[string]string
	Confirm confirmation
	Back    string
}

func (s *Server) confirmPage(w http.ResponseWriter, r *http.Request) {
	a, ok := s.actions[r.PathValue("action")]
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: %w %q", ErrNotFound, ErrUnknownAction, r.PathValue("action")))
		return
	}
	c, err := a.confirm(r.Context(), s, r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	params := map[string]string{}
	for k := range r.URL.Query() {
		if k != "back" {
			params[k] = r.URL.Query().Get(k)
		}
	}
	s.show(w, r, "confirm", c.Title, false, confirmData{Action: a, Params: params, Confirm: c, Back: localPath(r.URL.Query().Get("back"))})
}

// doAction is every action's gate: the token, the session, the CSRF
// token, then the action, and an audit line whatever the outcome.
func (s *Server) doAction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("action")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	_ = r.ParseForm() // a malformed form fails the CSRF check below
	by, err := s.auth.checkAction(r, time.Now())
	if err != nil {
		s.cfg.Log.Warn("console refused an action", "action", name, "user", by.User, "remote_addr", r.RemoteAddr, "err", err)
		s.fail(w, r, err)
		return
	}
	a, ok := s.actions[name]
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: %w %q", ErrNotFound, ErrUnknownAction, r.PathValue("action")))
		return
	}
	next, audit, err := a.run(r.Context(), s, r.PostForm, by)
	attrs := append([]any{"action", name, "user", by.User, "remote_addr", r.RemoteAddr}, audit...)
	if err != nil {
		s.cfg.Log.Warn("console action failed", append(attrs, "err", err)...)
		s.fail(w, r, err)
		return
	}
	s.cfg.Log.Info("console action", attrs...)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.show(w, r, "login", "Sign in", false, map[string]any{"Next": localPath(r.URL.Query().Get("next")), "Failed": false})
}

// login checks the token and sets the session cookie; the token itself is
// not kept in the browser.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.PostFormValue("next"))
	if err := sameOrigin(r); err != nil || !s.auth.tokenMatches(r.PostFormValue("token")) {
		s.cfg.Log.Warn("console sign-in refused", "remote_addr", r.RemoteAddr, "read_only", s.ReadOnly())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		s.show(w, r, "login", "Sign in", false, map[string]any{"Next": next, "Failed": true})
		return
	}
	user := strings.TrimSpace(r.PostFormValue("name"))
	if user == "" {
		user = "operator"
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.auth.newSession(textfit.Truncate(user, 40), time.Now()), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionTTL.Seconds())})
	s.cfg.Log.Info("console sign-in", "user", user, "remote_addr", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if sameOrigin(r) == nil {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	http.Redirect(w, r, "/functions", http.StatusSeeOther)
}

// localPath keeps a redirect target on this console: a path, never
// another host.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return "/functions"
	}
	return p
}
