package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/functions"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/metrics"
	"github.com/jetfn/jetfn/natsconn"
	"github.com/jetfn/jetfn/runtime"
)

// connectTimeout bounds how long start-up waits for NATS and MongoDB.
const connectTimeout = 10 * time.Second

func cmdRun(ctx context.Context, args []string, _, errOut io.Writer) error {
	fs := newFlags("run", "run [--manifest FILE]", errOut)
	mf := addManifestFlags(fs, "run", "warn instead of refusing a duplicate window shorter than twice the redelivery horizon")
	deployment := fs.String("deployment", "", "load the manifest from the jetfn-manifests KV bucket and apply every new revision live (instead of --manifest)")
	prune := fs.Bool("prune", false, "with --deployment: delete the durable consumer of a function a new revision removes")
	noProvision := fs.Bool("no-provision", false, "only look up streams and consumers, never create or update them (for `jetfn permissions` without --provision)")
	cfg, err := parseConfig(fs, args)
	if err != nil {
		return err
	}
	if *mf.path != "" {
		cfg.Manifest = *mf.path
	}
	cfg.AllowShortWindow, cfg.NoProvision, cfg.Deployment, cfg.Prune = *mf.allowShort, *noProvision, *deployment, *prune
	if cfg.Deployment != "" {
		cfg.Manifest = "(deployment " + cfg.Deployment + ")"
	}
	if err := cfg.requireRun(); err != nil {
		return err
	}
	return serve(ctx, cfg, cfg.newLogger(errOut), func() {})
}

// serve runs the runtime until ctx is done, then drains it and the
// connections. onReady is called once every function is bound.
func serve(ctx context.Context, cfg Config, log *slog.Logger, onReady func()) error {
	tp, log, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing() // last: after the runtime drained and its spans ended
	nc, closed, err := connectNATS(cfg.NATSURL, cfg.NATS, log)
	if err != nil {
		return err
	}
	defer drainNATS(nc, closed, log)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	m, revision, err := startManifest(ctx, cfg, js)
	if err != nil {
		return err
	}
	client, err := connectMongo(ctx, cfg.MongoURI, cfg.MongoCAFile, connectTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	mx := metrics.New() // the histogram before the runtime, the listener after
	opts := append(runtimeOptions(cfg, log, client, mx), tracingOptions(tp)...)
	rt, err := newRuntime(ctx, cfg, js, nc, m, revision, opts, log)
	if err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		srv, err := mx.Serve(cfg.MetricsAddr, rt, metrics.Probes{NATS: nc, Mongo: client})
		if err != nil {
			return usageError(fmt.Errorf("METRICS_ADDR: %w", err))
		}
		defer func() { _ = srv.Close() }()
		log.Info("serving metrics and health", "addr", srv.Addr())
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx) // ends the watcher below if Run fails early
	defer cancel()
	wg.Go(func() { whenReady(ctx, cfg, js, revision, rt, log, onReady) })
	if err := rt.Run(ctx); err != nil {
		return fmt.Errorf("running: %w", err)
	}
	return nil
}

func runtimeOptions(cfg Config, log *slog.Logger, client *mongo.Client, mx *metrics.Metrics) []runtime.Option {
	opts := []runtime.Option{runtime.WithLogger(log), runtime.WithMongo(client.Database(cfg.MongoDatabase)),
		runtime.WithDrainTimeout(cfg.DrainTimeout), runtime.WithHandlerObserver(mx.ObserveHandler)}
	if cfg.AllowShortWindow {
		opts = append(opts, runtime.AllowShortWindow())
	}
	if cfg.NoProvision {
		opts = append(opts, runtime.WithoutProvisioning())
	}
	if cfg.Prune {
		opts = append(opts, runtime.WithPrune())
	}
	return opts
}

// whenReady calls onReady once every function is bound, then, with
// --deployment, applies each new revision until ctx is done.
func whenReady(ctx context.Context, cfg Config, js jetstream.JetStream, revision uint64, rt *runtime.Runtime, log *slog.Logger, onReady func()) {
	select {
	case <-rt.Ready():
		onReady()
	case <-ctx.Done():
		return
	}
	if cfg.Deployment == "" {
		return
	}
	if err := deploy.Follow(ctx, js, cfg.Deployment, revision, rt, log); err != nil {
		log.Error("following the deployment stopped; the current manifest keeps running", "err", err)
	}
}

// newRuntime builds the runtime for m. With --deployment, a current
// revision this instance refuses (a function its binary lacks, a window
// its flags do not accept) would make every restart exit while the
// revision stays current; so it starts on the newest earlier revision it
// accepts instead, says so, and follows the deployment from the current
// one.
func newRuntime(ctx context.Context, cfg Config, js jetstream.JetStream, nc *nats.Conn, m *manifest.Manifest, current uint64,
	opts []runtime.Option, log *slog.Logger) (*runtime.Runtime, error) {
	rt, err := runtime.New(nc, m, functions.All(), opts...)
	if err == nil {
		rt.SetRevision(current)
		return rt, nil
	}
	if !errors.Is(err, manifest.ErrInvalidManifest) && !errors.Is(err, manifest.ErrShortWindow) {
		return nil, err
	}
	if cfg.Deployment == "" {
		return nil, usageError(err)
	}
	refusal := err
	history, herr := deploy.Revisions(ctx, js, cfg.Deployment)
	if herr != nil {
		return nil, usageError(fmt.Errorf("%w (and reading earlier revisions failed: %w)", refusal, herr))
	}
	for _, rev := range history {
		if rev.Number >= current {
			continue
		}
		earlier, perr := rev.Manifest()
		if perr != nil {
			continue
		}
		if rt, err := runtime.New(nc, earlier, functions.All(), opts...); err == nil {
			log.Error("this instance refuses the deployment's current revision; it runs the newest earlier one it accepts "+
				"until a revision it accepts is deployed", "deployment", cfg.Deployment, "refused_revision", current,
				"running_revision", rev.Number, "err", refusal)
			rt.SetRevision(rev.Number)
			return rt, nil
		}
	}
	return nil, usageError(fmt.Errorf("deployment %s revision %d: %w (and no earlier stored revision is accepted either)",
		cfg.Deployment, current, refusal))
}

// startManifest is the manifest to start with: the file, or the
// deployment's current revision in KV (and its revision number).
func startManifest(ctx context.Context, cfg Config, js jetstream.JetStream) (*manifest.Manifest, uint64, error) {
	if cfg.Deployment == "" {
		m, err := manifest.Load(cfg.Manifest)
		return m, 0, usageError(err)
	}
	rev, err := deploy.Load(ctx, js, cfg.Deployment)
	if err != nil {
		return nil, 0, usageError(err)
	}
	m, err := rev.Manifest()
	return m, rev.Number, usageError(err)
}

// connectNATS connects with unlimited reconnects: once running, a NATS
// outage means waiting and retrying, never giving up on messages. At start,
// though, a connection that fails (a wrong CA, an expired certificate, a bad
// credential, no server) is one clear line and exit code 2, not a retry loop
// that hides it. The returned channel closes when the connection is closed.
func connectNATS(natsURL string, auth natsconn.Settings, log *slog.Logger) (*nats.Conn, <-chan struct{}, error) {
	authOpts, err := auth.Options()
	if err != nil {
		return nil, nil, usageError(err)
	}
	closed := make(chan struct{})
	nc, err := nats.Connect(natsURL, append(authOpts,
		nats.Name("jetfn"),
		nats.Timeout(connectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own close
				log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("reconnected to NATS", "url", c.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
	)...)
	if err != nil {
		return nil, nil, usageError(fmt.Errorf("connecting to NATS_URL %s: %w", redactURLs(natsURL), err))
	}
	return nc, closed, nil
}

// withJetStreamAt connects to natsURL for the length of fn and waits until
// the connection has closed, so no callback of it outlives the command.
// The commands that ask a server and exit (check --server, deploy,
// rollback, dlq) share it; `run` keeps its connection and drains it.
func withJetStreamAt(natsURL string, auth natsconn.Settings, log *slog.Logger, fn func(jetstream.JetStream) error) error {
	nc, closed, err := connectNATS(natsURL, auth, log)
	if err != nil {
		return err
	}
	defer func() {
		nc.Close()
		<-closed
	}()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return fn(js)
}

// drainNATS lets pending publishes and acks reach the server, then closes.
func drainNATS(nc *nats.Conn, closed <-chan struct{}, log *slog.Logger) {
	if err := nc.Drain(); err != nil {
		log.Warn("draining the NATS connection", "err", err)
		nc.Close()
	}
	select {
	case <-closed:
	case <-time.After(connectTimeout):
		log.Warn("NATS connection did not close after draining")
	}
}

// connectMongo connects and pings within timeout, so a wrong MONGO_URI
// fails at start rather than as a dead letter per message. Errors show the
// URI without its password.
func connectMongo(ctx context.Context, uri, caFile string, timeout time.Duration) (*mongo.Client, error) {
	opts := options.Client().ApplyURI(uri).SetServerSelectionTimeout(timeout)
	if caFile != "" {
		tlsCfg, err := natsconn.Settings{CAFile: caFile}.TLSConfig()
		if err != nil {
			return nil, usageError(fmt.Errorf("MONGO_CA_FILE: %w", errors.Unwrap(err)))
		}
		opts.SetTLSConfig(tlsCfg)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, usageError(fmt.Errorf("MONGO_URI %s: %s", redactURL(uri), redactSecret(err.Error(), uri)))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := client.Ping(ctx, nil); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, usageError(fmt.Errorf("%w at MONGO_URI %s: %s", errMongoUnreachable, redactURL(uri), redactSecret(err.Error(), uri)))
	}
	return client, nil
}

// redactSecret removes the URI's password from a message, in case a driver
// error quotes the URI.
func redactSecret(msg, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return msg
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// redactURLs hides the passwords in NATS_URL, which may list several
// servers separated by commas.
func redactURLs(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// redactURL hides a password in a URL, so it never reaches a log or error.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
