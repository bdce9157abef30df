package opscheck

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/test/testkit"
)

// system is everything under test and the checker's own clients: the NATS
// servers, FerretDB, the remote function's process, the jetfn instances.
type system struct {
	dir      string
	log      *slog.Logger
	hist     *History
	window   time.Duration
	replicas int
	prune    bool
	// allowShort runs deploy and the instances with --allow-short-window.
	allowShort bool
	// keying replaces the recording function's `ordered: true` (a control).
	keying string

	jetfn     string
	nats      *natsServers
	mongo     *mongoServer
	remote    *remoteProc
	instances []*instance
	wg        sync.WaitGroup // the instances' supervisors

	nc          *nats.Conn
	js          jetstream.JetStream
	mc          *mongo.Client
	dl          *dlObserver
	book        *ledger
	replays     replays
	deletions   []deletion
	live        []liveRev
	settleStart time.Time
	revs        int
}

// binaries are built once per process: every run of a long check shares
// them.
type binaries struct {
	jetfn, nats, remote string
}

// buildBinaries compiles jetfn, the pinned nats-server and the remote
// example into dir.
func buildBinaries(ctx context.Context, dir string) (binaries, error) {
	var b binaries
	var err error
	if b.jetfn, err = testkit.Build(ctx, dir); err != nil {
		return b, err
	}
	if b.nats, err = testkit.BuildPackage(ctx, "github.com/nats-io/nats-server/v2", filepath.Join(dir, "nats-server")); err != nil {
		return b, err
	}
	b.remote, err = testkit.BuildPackage(ctx, "./examples/remote-go", filepath.Join(dir, "remote"))
	return b, err
}

// start brings up the servers, the remote and the instances on the base
// revision. On error the caller still calls close.
func (s *system) start(ctx context.Context, bins binaries, instances int, nodes int) error {
	var err error
	s.jetfn = bins.jetfn
	if s.nats, err = startNATS(ctx, bins.nats, s.dir, nodes); err != nil {
		return err
	}
	if s.mongo, err = startMongo(s.dir); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	var addrs []string
	for _, u := range strings.Split(s.nats.urls, ",") {
		addrs = append(addrs, strings.TrimPrefix(u, "nats://"))
	}
	if s.remote, err = newRemote(bins.remote, s.dir, addrs, s.mongo.ChildURI(), database, s.log); err != nil {
		return err
	}
	if err := s.remote.Start(ctx, s.nc); err != nil {
		return err
	}
	if _, err := s.deploy(ctx, baseRevision()); err != nil {
		return err
	}
	return s.startInstances(ctx, instances)
}

func (s *system) connect() error {
	nc, err := nats.Connect(s.nats.urls, nats.Name("opscheck"), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("connecting to NATS: %w", err)
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc); err != nil {
		return err
	}
	s.mc, err = mongo.Connect(options.Client().ApplyURI(s.mongo.URI()).SetServerSelectionTimeout(5 * time.Second))
	return err
}

func (s *system) startInstances(ctx context.Context, n int) error {
	args := []string{"--deployment", deployment}
	if s.prune {
		args = append(args, "--prune")
	}
	if s.allowShort {
		args = append(args, "--allow-short-window")
	}
	env := testkit.ChildEnv{NATSURL: s.nats.urls, MongoURI: s.mongo.ChildURI(), MongoDatabase: database, Args: args}
	for i := range n {
		in := newInstance(i+1, s.jetfn, s.dir, env, s.hist, &s.wg)
		s.instances = append(s.instances, in)
		if err := in.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// jetfnCLI runs one jetfn command (deploy, rollback, dlq) as an operator
// would, with the system's NATS_URL.
func (s *system) jetfnCLI(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.jetfn, args...)
	cmd.Env = []string{"NATS_URL=" + s.nats.urls, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		return text, fmt.Errorf("jetfn %s: %w: %s", strings.Join(args, " "), err, text)
	}
	return text, nil
}

// deploy stores r as the deployment's next revision with `jetfn deploy`.
func (s *system) deploy(ctx context.Context, r Revision) (string, error) {
	r.Keying = s.keying
	m, err := r.check(s.window, s.replicas, s.allowShort)
	if err != nil {
		return "", err
	}
	s.revs++
	path := filepath.Join(s.dir, fmt.Sprintf("revision-%d.yaml", s.revs))
	if err := os.WriteFile(path, r.YAML(s.window, s.replicas), 0o644); err != nil {
		return "", err
	}
	args := []string{"deploy", "--manifest", path, "--deployment", deployment, "--yes"}
	if s.allowShort {
		args = append(args, "--allow-short-window")
	}
	out, err := s.jetfnCLI(ctx, args...)
	if err == nil {
		s.live = append(s.live, liveRev{At: time.Now(), M: m})
	}
	return lastLine(out), err
}

// baseManifest is the manifest file `jetfn dlq` reads the dead-letter
// stream from.
func (s *system) baseManifest() string { return filepath.Join(s.dir, "revision-1.yaml") }

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// close stops everything, whatever state the run left it in.
func (s *system) close() {
	for _, in := range s.instances {
		in.Stop()
	}
	s.wg.Wait()
	if s.remote != nil {
		s.remote.Close()
	}
	testkit.CloseClients(s.nc, s.mc)
	if s.mongo != nil {
		s.mongo.Close()
	}
	if s.nats != nil {
		s.nats.stop()
	}
}
