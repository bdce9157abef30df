package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/test/testkit"
)

// Names in manifests/production.yaml the harness watches.
const (
	transcriptionStream = "TRANSCRIPTION"
	deadLetterStream    = "DEADLETTER"
	functionName        = "summarize-session"
	database            = "chaos"
	// publish-recording-event reads RECORDING, keyed by recordingId, and
	// publishes its notices to NOTIFICATIONS.
	recordingStream   = "RECORDING"
	noticeStream      = "NOTIFICATIONS"
	recordingFunction = "publish-recording-event"
)

// Options configure a Harness.
type Options struct {
	// Dir holds binaries, stores, configs and logs.
	Dir string
	// Sync is JetStream's sync_interval on every node ("always"), or empty
	// for the server's default.
	Sync string
	// Instances is how many `jetfn run` processes share the consumer.
	Instances int
	// Quiet replaces production.yaml's quiet period of summarize-session.
	Quiet time.Duration
	// KeyConcurrency, when positive, replaces publish-recording-event's
	// `ordered: true` with `keyConcurrency: n`: its events of one recording
	// then run up to n at once, in no order, which the order check should
	// catch. Zero runs production.yaml as shipped.
	KeyConcurrency int
	// Log receives the harness's progress.
	Log *slog.Logger
}

// Validate reports every missing setting.
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("chaos harness: no directory"))
	}
	if o.Instances < 2 {
		errs = append(errs, fmt.Errorf("chaos harness: %d jetfn instances, want at least 2 (one is killed)", o.Instances))
	}
	if o.Quiet <= 0 {
		errs = append(errs, fmt.Errorf("chaos harness: quiet %s is not positive", o.Quiet))
	}
	if o.KeyConcurrency < 0 {
		errs = append(errs, fmt.Errorf("chaos harness: key concurrency %d is negative", o.KeyConcurrency))
	}
	if o.Log == nil {
		errs = append(errs, errors.New("chaos harness: no logger"))
	}
	return errors.Join(errs...)
}

// Harness owns the three nats-server processes, the jetfn processes, an
// embedded Mongo-compatible server and its own clients of both. The jetfn
// instances and the harness get every node's URL.
type Harness struct {
	opts      Options
	jetfn     string
	cluster   *Cluster
	mongo     *devstack.Mongo
	instances []*instance
	pub       *Publisher
	recPub    *RecordingPublisher
	// pubStopped is when the publisher stopped starting sessions: the end
	// of the last fault's window.
	pubStopped time.Time
	nc         *nats.Conn
	js         jetstream.JetStream
	mc         *mongo.Client
}

// instance is one `jetfn run` process and how to start it again.
type instance struct {
	bin     string
	env     testkit.ChildEnv
	logPath string
	proc    *testkit.Child
	// failedStarts counts starts that exited before ready.
	failedStarts int
}

// New builds jetfn and nats-server, starts the cluster, Mongo and the jetfn
// instances, and waits until everything is ready.
func New(ctx context.Context, opts Options) (*Harness, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	h := &Harness{opts: opts}
	if err := h.start(ctx); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *Harness) start(ctx context.Context) error {
	natsBin, err := testkit.BuildPackage(ctx, "github.com/nats-io/nats-server/v2", filepath.Join(h.opts.Dir, "nats-server"))
	if err != nil {
		return err
	}
	if h.jetfn, err = testkit.Build(ctx, h.opts.Dir); err != nil {
		return err
	}
	if h.cluster, err = StartCluster(ctx, natsBin, h.opts.Dir, 3, h.opts.Sync); err != nil {
		return err
	}
	if err := h.waitHealthy(ctx); err != nil {
		return err
	}
	if h.mongo, err = devstack.StartMongo("127.0.0.1:0", filepath.Join(h.opts.Dir, "mongo")); err != nil {
		return err
	}
	if err := h.connect(); err != nil {
		return err
	}
	manifest, err := h.writeManifest(ctx)
	if err != nil {
		return err
	}
	for i := range h.opts.Instances {
		in := &instance{
			bin:     h.jetfn,
			env:     testkit.ChildEnv{NATSURL: h.cluster.URLs(), MongoURI: h.mongo.URI, MongoDatabase: database, Manifest: manifest},
			logPath: filepath.Join(h.opts.Dir, fmt.Sprintf("jetfn-%d.log", i+1)),
		}
		h.instances = append(h.instances, in)
		if err := in.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// waitHealthy bounds Cluster.WaitHealthy: a node replaying a big store
// after a restart can take a while on a loaded machine.
func (h *Harness) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return h.cluster.WaitHealthy(ctx)
}

// connect opens the harness's clients. The NATS one reconnects forever to
// any node, as jetfn's does.
func (h *Harness) connect() error {
	nc, err := nats.Connect(h.cluster.URLs(), nats.Name("chaos-harness"),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("connecting harness to NATS: %w", err)
	}
	h.nc = nc
	if h.js, err = jetstream.New(nc); err != nil {
		return err
	}
	mc, err := mongo.Connect(options.Client().ApplyURI(h.mongo.URI).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		return fmt.Errorf("connecting harness to Mongo: %w", err)
	}
	h.mc = mc
	return nil
}

// writeManifest copies manifests/production.yaml (R3 streams, the
// production consumer settings) with summarize-session's quiet period
// replaced, and publish-recording-event's `ordered: true` replaced by
// Options.KeyConcurrency if set.
func (h *Harness) writeManifest(ctx context.Context) (string, error) {
	root, err := testkit.ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(root, "manifests", "production.yaml"))
	if err != nil {
		return "", err
	}
	const quietLine = "quiet: 2s"
	text := string(raw)
	if strings.Count(text, quietLine) != 1 {
		return "", fmt.Errorf("manifests/production.yaml: want one %q to scale, found %d", quietLine, strings.Count(text, quietLine))
	}
	text = strings.Replace(text, quietLine, "quiet: "+h.opts.Quiet.String(), 1)
	if h.opts.KeyConcurrency > 0 {
		const orderedLine = "ordered: true"
		if strings.Count(text, orderedLine) != 1 {
			return "", fmt.Errorf("manifests/production.yaml: want one %q to replace, found %d", orderedLine, strings.Count(text, orderedLine))
		}
		text = strings.Replace(text, orderedLine, fmt.Sprintf("keyConcurrency: %d", h.opts.KeyConcurrency), 1)
	}
	path := filepath.Join(h.opts.Dir, "production-chaos.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// startAttempts is how often an instance is started before the harness
// gives up, as a supervisor (systemd, Kubernetes) restarts a process that
// exits; startPause spaces the attempts.
const (
	startAttempts = 10
	startPause    = time.Second
)

// start runs the instance's process and waits until its functions are
// bound. An instance that exits first (jetfn run exits 1 when a stream
// lookup times out during a leader election) is started again, and counted
// in failedStarts.
func (in *instance) start(ctx context.Context) error {
	var err error
	for range startAttempts {
		if err = in.startOnce(ctx); err == nil {
			return nil
		}
		if in.proc == nil {
			return err // the process did not even start
		}
		select {
		case <-in.proc.Exited():
		default:
			return err // not ready in time, still running: no restart fixes that
		}
		in.failedStarts++
		select {
		case <-ctx.Done():
			return err
		case <-time.After(startPause):
		}
	}
	return fmt.Errorf("%d starts: %w", startAttempts, err)
}

func (in *instance) startOnce(ctx context.Context) error {
	in.proc = nil // a failed start must not leave the last, exited process here
	p, err := testkit.StartChild(in.bin, in.env, in.logPath)
	if err != nil {
		return err
	}
	in.proc = p
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return p.Ready(ctx)
}

// failedStarts counts the starts of every instance that exited before it
// was ready.
func (h *Harness) failedStarts() int {
	n := 0
	for _, in := range h.instances {
		n += in.failedStarts
	}
	return n
}

// Close stops everything the harness started.
func (h *Harness) Close() {
	for _, in := range h.instances {
		if in.proc != nil {
			_ = in.proc.Stop()
		}
	}
	testkit.CloseClients(h.nc, h.mc)
	if h.mongo != nil {
		h.mongo.Stop()
	}
	if h.cluster != nil {
		h.cluster.Stop()
	}
}
