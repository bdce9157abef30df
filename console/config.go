package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/manifest"
)

// Config is what the console needs: a connection to the stack, where the
// dead letters are, which deployment to show, and where to log.
type Config struct {
	NATS       *nats.Conn
	DeadLetter manifest.DeadLetterSpec
	// Deployment is the key in the manifests bucket whose revisions the
	// deploys page shows (jetfn deploy --deployment).
	Deployment string
	Log        *slog.Logger
}

// Validate reports every missing setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.NATS == nil {
		errs = append(errs, errors.New("console: NATS connection required"))
	}
	if c.DeadLetter.Stream == "" || c.DeadLetter.SubjectPrefix == "" {
		errs = append(errs, errors.New("console: dead-letter stream and subject prefix required"))
	}
	if c.Deployment == "" {
		errs = append(errs, errors.New("console: deployment name required"))
	}
	if c.Log == nil {
		errs = append(errs, errors.New("console: logger required"))
	}
	return errors.Join(errs...)
}

// MinTokenLength keeps a guessable token from opening the actions.
const MinTokenLength = 16

// DefaultInterval is how often the console polls the stack and live pages
// refresh.
const DefaultInterval = 2 * time.Second

// DefaultWindow is how long a poll waits for instances to answer.
const DefaultWindow = 500 * time.Millisecond

type options struct {
	token    string
	traceURL string
	interval time.Duration
	window   time.Duration
	loopback bool
}

// Option changes an optional setting.
type Option func(*options) error

// WithToken turns the actions on: an operator signs in with this token.
func WithToken(token string) Option {
	return func(o *options) error {
		if len(token) < MinTokenLength {
			return fmt.Errorf("console token: %d characters, want at least %d", len(token), MinTokenLength)
		}
		o.token = token
		return nil
	}
}

// WithTraceURL links each run's trace ID to a trace viewer: the template's
// {trace_id} is replaced, for example https://jaeger.example/trace/{trace_id}.
func WithTraceURL(template string) Option {
	return func(o *options) error {
		u, err := url.Parse(strings.ReplaceAll(template, "{trace_id}", "x"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.Contains(template, "{trace_id}") {
			return fmt.Errorf("trace URL %q: want an http(s) URL holding {trace_id}", template)
		}
		o.traceURL = template
		return nil
	}
}

// WithInterval sets how often the stack is polled.
func WithInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("console interval %s: want at least 100ms", d)
		}
		o.interval = d
		return nil
	}
}

// WithWindow sets how long a poll waits for instances to answer.
func WithWindow(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("console window %s: want a positive duration", d)
		}
		o.window = d
		return nil
	}
}

// LoopbackOnly refuses requests whose Host is not a loopback name or
// address, against DNS rebinding: set it when listening on 127.0.0.1.
func LoopbackOnly() Option {
	return func(o *options) error {
		o.loopback = true
		return nil
	}
}
