package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/jetfn/jetfn/natsconn"
)

// Config is every setting jetfn reads from the environment. Only main reads
// the environment; packages get values, never variables.
type Config struct {
	NATSURL       string        `env:"NATS_URL"`
	MongoURI      string        `env:"MONGO_URI"`
	MongoDatabase string        `env:"MONGO_DATABASE" envDefault:"jetfn"`
	Manifest      string        `env:"JETFN_MANIFEST"`
	DrainTimeout  time.Duration `env:"DRAIN_TIMEOUT" envDefault:"30s"`
	LogLevel      string        `env:"LOG_LEVEL" envDefault:"info"`
	LogFormat     string        `env:"LOG_FORMAT" envDefault:"text"`
	// MongoCAFile is a CA bundle for MongoDB TLS; credentials and the rest
	// of TLS go in MONGO_URI.
	MongoCAFile string `env:"MONGO_CA_FILE"`
	// MetricsAddr is where `run` serves /metrics, /healthz and /readyz
	// (for example :9090); empty turns the listener off.
	MetricsAddr string `env:"METRICS_ADDR"`
	// ConsoleToken allows the console's actions to whoever signs in with
	// it (`jetfn console`, `jetfn dev`); never logged.
	ConsoleToken string `env:"JETFN_CONSOLE_TOKEN"`
	NATS         natsconn.Settings

	// Flags of `run`, not environment variables.
	AllowShortWindow bool   `env:"-"`
	NoProvision      bool   `env:"-"`
	Deployment       string `env:"-"`
	Prune            bool   `env:"-"`
}

// errUsage marks an error caused by a setting or a flag: exit code 2.
var errUsage = errors.New("usage")

// loadConfig parses the environment. A value that does not parse is an
// error naming its variable.
func loadConfig() (Config, error) {
	var cfg Config
	if err := env.Parse(&cfg); err != nil {
		return cfg, usageError(envVarError(err))
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	var errs []error
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("LOG_FORMAT: %q is not text or json", c.LogFormat))
	}
	if c.DrainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("DRAIN_TIMEOUT: %s is not positive", c.DrainTimeout))
	}
	if c.MongoDatabase == "" {
		errs = append(errs, errors.New("MONGO_DATABASE: must not be empty"))
	}
	if c.MongoCAFile != "" {
		if _, err := os.Stat(c.MongoCAFile); err != nil {
			errs = append(errs, fmt.Errorf("MONGO_CA_FILE: %w", err))
		}
	}
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err)
	}
	return usageError(errors.Join(errs...))
}

// requireRun checks what `jetfn run` needs beyond the defaults.
func (c Config) requireRun() error {
	var errs []error
	if c.NATSURL == "" {
		errs = append(errs, errors.New("NATS_URL: required (for example nats://127.0.0.1:4222)"))
	}
	if c.MongoURI == "" {
		errs = append(errs, errors.New("MONGO_URI: required (for example mongodb://127.0.0.1:27017)"))
	}
	if c.Manifest == "" {
		errs = append(errs, errors.New("JETFN_MANIFEST: required (or --manifest)"))
	}
	return usageError(errors.Join(errs...))
}

// usageError marks err as caused by a setting or flag (exit code 2)
// without changing its message.
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return usageErr{err}
}

type usageErr struct{ err error }

func (e usageErr) Error() string        { return e.err.Error() }
func (e usageErr) Unwrap() error        { return e.err }
func (e usageErr) Is(target error) bool { return target == errUsage }

// envVarError rewrites caarlos0/env's errors, which name struct fields, to
// name the environment variable the user set.
func envVarError(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	var out []error
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			out = append(out, fmt.Errorf("%s: %w", envName(pe.Name), pe.Err))
			continue
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

func envName(field string) string {
	f, ok := reflect.TypeFor[Config]().FieldByName(field)
	if !ok {
		return field
	}
	name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
	return name
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("LOG_LEVEL: %q is not debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger builds the process's logger from LOG_LEVEL and LOG_FORMAT.
func (c Config) newLogger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
