package scale

import (
	"context"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/functions"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/test/testkit"
)

// clusterManifest is scaleManifest with R3 streams; the consumer inherits
// the stream's replicas.
var clusterManifest = strings.ReplaceAll(scaleManifest, "duplicates: 24h\n", "duplicates: 24h\n    replicas: 3\n")

// publishEvery is the steady rate of sessions during the failover test.
const publishEvery = 100 * time.Millisecond

// TestClusterFailover runs summarize-session in-process against a 3-node
// cluster with R3 streams and consumer, while a publisher ends a session
// every 100ms. It stops the stream leader's server, keeps publishing, starts
// it again on its ports and store, then does the same to the consumer
// leader's. Every session must be summarized and announced once, the
// runtime must carry on without a restart, and it must leave no goroutine
// behind when it stops.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster through two leader failovers")
	}
	began := time.Now()
	// The runtime's user has exactly the permissions `jetfn permissions
	// --provision` generates for this manifest.
	m, err := manifest.Parse([]byte(clusterManifest))
	if err != nil {
		t.Fatal(err)
	}
	cl := StartSecuredCluster(t, 3, m.Permissions(manifest.PermissionOptions{Provision: true}))
	_, mc := runtimetest.StartMongo(t)
	db := mc.Database("cluster")
	js, err := jetstream.New(cl.ConnectCluster(t, "publisher"))
	if err != nil {
		t.Fatal(err)
	}
	// A first request starts the publisher connection's response
	// subscription, so the baseline holds it.
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Fatal(err)
	}
	goroutinesBefore := goroutineBuckets()
	rec := &logRecord{}
	fo := startInProcess(t, cl, db, rec)
	checkReplicas(t, js)

	pub := &publisher{js: js, db: db}
	pubCtx, stopPub := context.WithCancel(t.Context())
	var pubWG sync.WaitGroup
	pubWG.Go(func() { pub.run(pubCtx) })
	t.Cleanup(func() { stopPub(); pubWG.Wait() })

	waitHandled(t, rec, 20)
	var reports []string
	for _, role := range []string{"stream", "consumer"} {
		reports = append(reports, failover(t, cl, js, rec, fo, pub, role))
	}
	stopPub()
	pubWG.Wait()
	sessions := pub.sessions()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := waitSettled(ctx, js, len(sessions)); err != nil {
		t.Fatal(err)
	}
	fo.stop(t)
	checkNoLeak(t, goroutinesBefore)
	verdict := mustCheck(t, js, db, sessions)
	hs := rec.Handled("")
	t.Logf("cluster: %d sessions published (%d publish retries), %d handled, %d redelivered, %s",
		len(sessions), pub.retries.Load(), len(hs), redelivered(hs), verdict)
	for _, r := range reports {
		t.Log(r)
	}
	t.Logf("runtime warnings and errors: %v", rec.Problems())
	for problem := range rec.Problems() {
		if strings.Contains(strings.ToLower(problem), "permissions violation") {
			t.Errorf("the generated permissions were not enough: %s", problem)
		}
	}
	t.Logf("TestClusterFailover: %s in all", time.Since(began).Round(100*time.Millisecond))
}

// inProcess is the runtime under test and the connection it owns.
type inProcess struct {
	rt     *runtime.Runtime
	nc     *nats.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	err    error
}

// startInProcess connects to every node's URL with the options `jetfn run`
// uses and runs the runtime until stop.
func startInProcess(t *testing.T, cl *Cluster, db *mongo.Database, rec *logRecord) *inProcess {
	t.Helper()
	nc, err := nats.Connect(cl.URLs(), nats.Name("jetfn"), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second),
		nats.UserInfo("jetfn", "jetfn"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(clusterManifest))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(rec, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rt, err := runtime.New(nc, m, functions.All(), runtime.WithMongo(db), runtime.WithLogger(log),
		runtime.WithDrainTimeout(5*time.Second))
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{rt: rt, nc: nc, cancel: cancel}
	p.wg.Go(func() { p.err = rt.Run(ctx) })
	t.Cleanup(func() { p.stop(t) })
	select {
	case <-rt.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("runtime not ready after 30s")
	}
	return p
}

// stop ends Run, waits for it and closes the connection; a second call
// does nothing.
func (p *inProcess) stop(t *testing.T) {
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
	p.cancel = nil
	p.nc.Close()
	if p.err != nil {
		t.Errorf("runtime: %v", p.err)
	}
}

// checkReplicas fails unless the stream and the function's consumer are
// both R3.
func checkReplicas(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	// The runtime is ready once its consumer exists, not once the R3
	// groups have elected their leaders.
	if _, _, err := leaders(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), transcriptionStream)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(t.Context(), transcriptionStream, durable)
	if err != nil {
		t.Fatal(err)
	}
	si, ci := s.CachedInfo(), c.CachedInfo()
	if si.Config.Replicas != 3 || si.Cluster == nil || len(si.Cluster.Replicas) != 2 {
		t.Fatalf("stream: replicas %d, cluster %+v; want R3", si.Config.Replicas, si.Cluster)
	}
	// Replicas 0 in the consumer's config means "as the stream".
	if (ci.Config.Replicas != 0 && ci.Config.Replicas != 3) || ci.Cluster == nil || len(ci.Cluster.Replicas) != 2 {
		t.Fatalf("consumer: replicas %d, cluster %+v; want R3", ci.Config.Replicas, ci.Cluster)
	}
	t.Logf("stream R%d (leader %s), consumer config replicas %d, %d peers besides leader %s",
		si.Config.Replicas, si.Cluster.Leader, ci.Config.Replicas, len(ci.Cluster.Replicas), ci.Cluster.Leader)
}

// failover stops the server that leads the stream ("stream") or the
// consumer ("consumer"), keeps publishing while it is down, starts it again
// and waits until every replica is current. It reports the longest time the
// function handled nothing from the stop until twenty sessions after the
// restart, the time Stats took while the node was down, and the leaders.
func failover(t *testing.T, cl *Cluster, js jetstream.JetStream, rec *logRecord, fo *inProcess, pub *publisher, role string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := testkit.WaitCurrent(ctx, js, transcriptionStream, durable); err != nil {
		t.Fatal(err)
	}
	sl, clead, err := leaders(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	victim := map[string]string{"stream": sl, "consumer": clead}[role]
	handledBefore, publishedBefore := rec.Count(), pub.count()
	stopped := time.Now()
	cl.Stop(victim)
	statsStart := time.Now()
	_ = fo.rt.Stats()
	statsTook := time.Since(statsStart)
	// Keep publishing through the outage: three seconds' worth of sessions.
	if err := poll(ctx, 20*time.Millisecond, "sessions published while "+victim+" is down", func() bool {
		return pub.count() >= publishedBefore+30
	}); err != nil {
		t.Fatal(err)
	}
	resumed := waitHandledAfter(t, rec, handledBefore+20)
	if err := cl.Restart(victim); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := testkit.WaitCurrent(ctx, js, transcriptionStream, durable); err != nil {
		t.Fatal(err)
	}
	caughtUp := time.Since(restarted)
	end := waitHandledAfter(t, rec, rec.Count()+20)
	sl2, cl2, _ := leaders(ctx, js) // for the report only
	hs := rec.Handled("")
	return fmt.Sprintf("%s leader %s stopped (stream leader %s, consumer leader %s): largest gap with no session handled %s "+
		"(while down %s, around its return %s); Stats took %s while it was down; its replicas current %s after the restart; leaders now stream %s, consumer %s",
		role, victim, sl, clead, largestGap(hs, stopped, end).Round(10*time.Millisecond),
		largestGap(hs, stopped, resumed).Round(10*time.Millisecond), largestGap(hs, restarted, end).Round(10*time.Millisecond),
		statsTook.Round(time.Millisecond), caughtUp.Round(10*time.Millisecond), sl2, cl2)
}

// leaders names the servers that lead the stream and the function's
// consumer, retrying while an election is under way.
func leaders(ctx context.Context, js jetstream.JetStream) (string, string, error) {
	var sl, cl string
	err := testkit.Retry(ctx, readWithin, "reading the leaders", func(ctx context.Context) error {
		var err error
		sl, cl, err = testkit.Leaders(ctx, js, transcriptionStream, durable)
		return err
	})
	return sl, cl, err
}

// waitHandled waits until n sessions in all were handled.
func waitHandled(t *testing.T, rec *logRecord, n int) {
	t.Helper()
	waitHandledAfter(t, rec, n)
}

// waitHandledAfter waits until n sessions in all were handled and returns
// when the n-th was.
func waitHandledAfter(t *testing.T, rec *logRecord, n int) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := poll(ctx, 10*time.Millisecond, fmt.Sprintf("%d sessions handled", n), func() bool { return rec.Count() >= n }); err != nil {
		t.Fatalf("%v; runtime warnings and errors so far: %v", err, rec.Problems())
	}
	hs := rec.Handled("")
	return hs[n-1].At
}

// publisher plays the transcriber at a steady rate: it stores a session's
// segments, then publishes session-ended, retrying both until they succeed.
type publisher struct {
	js      jetstream.JetStream
	db      *mongo.Database
	mu      sync.Mutex
	done    []session
	retries atomic.Int64
}

func (p *publisher) run(ctx context.Context) {
	tick := time.NewTicker(publishEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		s := newSession("c", i)
		if err := seed(ctx, p.db, []session{s}); err != nil {
			return // only ctx ends a seed against a server that stays up
		}
		retries, err := publishEnded(ctx, p.js, s)
		p.retries.Add(int64(retries))
		if err != nil {
			return
		}
		p.mu.Lock()
		p.done = append(p.done, s)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *publisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.done)
}

// sessions are those whose session-ended the stream acknowledged.
func (p *publisher) sessions() []session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]session(nil), p.done...)
}

// checkNoLeak waits until no goroutine runs jetfn runtime or function code
// any more and every other client-side goroutine group (by the function
// that started it: nats.go, the Mongo driver, the test) is back to its size
// before the runtime started. Groups the servers started are left out: the
// runtime created streams and consumers, and the Mongo driver's pool opened
// connections, which the embedded servers serve with goroutines of their
// own.
func checkNoLeak(t *testing.T, before map[string]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var grown []string
	var stacks string
	err := poll(ctx, 50*time.Millisecond, "the runtime's goroutines to end", func() bool {
		stacks, grown = runtimeStacks(), nil
		for k, v := range goroutineBuckets() {
			if v > before[k] && !serverSide(k) {
				grown = append(grown, fmt.Sprintf("%s %d -> %d", k, before[k], v))
			}
		}
		return stacks == "" && len(grown) == 0
	})
	total := 0
	for _, v := range before {
		total += v
	}
	t.Logf("goroutines: %d before the runtime started, %d after it stopped (server-side groups may grow)", total, goruntime.NumGoroutine())
	if err != nil {
		t.Errorf("%v; groups that grew: %v\n%s", err, grown, stacks)
	}
}

func serverSide(createdBy string) bool {
	for _, p := range []string{"github.com/nats-io/nats-server/", "github.com/FerretDB/", "database/sql.", "modernc.org/"} {
		if strings.HasPrefix(createdBy, p) {
			return true
		}
	}
	return false
}

// runtimeStacks returns the stacks of goroutines in jetfn's runtime or
// functions packages.
func runtimeStacks() string {
	buf := make([]byte, 1<<22)
	buf = buf[:goruntime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/jetfn/jetfn/runtime.") || strings.Contains(g, "github.com/jetfn/jetfn/functions/") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// goroutineBuckets counts goroutines by the function that started them.
func goroutineBuckets() map[string]int {
	buf := make([]byte, 1<<22)
	buf = buf[:goruntime.Stack(buf, true)]
	out := map[string]int{}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		createdBy := "main"
		if i := strings.Index(g, "created by "); i >= 0 {
			createdBy = g[i+len("created by "):]
			if j := strings.IndexAny(createdBy, " \n"); j >= 0 {
				createdBy = createdBy[:j]
			}
		}
		out[createdBy]++
	}
	return out
}
