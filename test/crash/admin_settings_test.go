package crash

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
)

// What an administrator tuned on TRANSCRIPTION and on summarize-session's
// consumer. The manifest declares none of it, so no start and no Apply may
// take it away.
const (
	opsStreamDescription   = "tuned by ops"
	opsMaxBytes            = int64(1 << 30)
	opsMaxMsgSize          = int32(1 << 20)
	opsConsumerDescription = "ops consumer"
)

var opsMetadata = map[string]string{"owner": "ops"}

// transcriptionSubjects are the subjects the harness's manifest declares
// for TRANSCRIPTION.
var transcriptionSubjects = []string{"transcription.>", "transcript.>"}

// appliedAckWait is summarize-session's ackWait in the revision applied
// live; the one before it has the harness's ackWait.
const appliedAckWait = 8 * time.Second

// applyWithin bounds how long a stored revision takes to reach the
// consumer: the KV watch fires at once, and Apply re-binds one function.
const applyWithin = 20 * time.Second

// impliedMaxAckPending is summarize-session's maxAckPending: the manifest
// sets none, so the runtime's default (1000, above its concurrency) holds.
const impliedMaxAckPending = 1000

// adminDeployment is the deployment the live-Apply step follows.
const adminDeployment = "admin-settings"

// TestAdminSettingsKept is issue 14, item 1: the runtime built the stream
// and consumer configuration from the manifest alone, so every start and
// every live Apply reset what an administrator had tuned: the stream's
// description, byte and message-size limits, compression, direct get and
// metadata, the consumer's description and metadata. An admin creates both
// first; then three starts (the last one following a deployment) and one
// live Apply each must leave every admin setting in place and every
// manifest field as the manifest says; each step is reported on its own
// (see checkKept). It runs the real binary against the embedded servers,
// in under ten seconds with the build cached.
func TestAdminSettingsKept(t *testing.T) {
	if testing.Short() {
		t.Skip("builds jetfn and runs it four times")
	}
	ctx := t.Context()
	bin, err := testkit.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := newDeletedFixture(t, bin)
	admin := f.stack.js
	stream, err := admin.CreateStream(ctx, opsStream(jetstream.StreamConfig{
		Name: transcriptionStream, Subjects: transcriptionSubjects, Duplicates: dayWindow, Storage: jetstream.FileStorage,
	}))
	if err != nil {
		t.Fatalf("admin creating %s: %v", transcriptionStream, err)
	}
	// What the manifest implies for summarize-session, so the runtime has
	// nothing of its own to change but its description and metadata.
	if _, err := stream.CreateConsumer(ctx, opsConsumer(jetstream.ConsumerConfig{
		Durable: functionName, FilterSubject: events.SessionEndedSubject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
		MaxAckPending: impliedMaxAckPending,
	})); err != nil {
		t.Fatalf("admin creating consumer %s: %v", functionName, err)
	}

	stop := func(c *testkit.Child, run string) {
		t.Helper()
		if err := c.Stop(); err != nil {
			t.Fatalf("stopping %s: %v", run, err)
		}
	}
	first := f.start(nil)
	checkKept(ctx, t, admin, "the first start", ackWait)
	stop(first, "the first run")

	second := f.start(nil)
	checkKept(ctx, t, admin, "the second start", ackWait)
	stop(second, "the second run")

	deployRevision(ctx, t, f, 1, localConsumer)
	f.start(nil, "--deployment", adminDeployment)
	checkKept(ctx, t, admin, "a start with --deployment (revision 1, same manifest)", ackWait)

	applied := localConsumer
	applied.ackWait = appliedAckWait
	deployRevision(ctx, t, f, 2, applied)
	awaitApplied(ctx, t, f, appliedAckWait)
	checkKept(ctx, t, admin, fmt.Sprintf("the live Apply of revision 2 (ackWait %s → %s)", ackWait, appliedAckWait), appliedAckWait)

	s := f.session("after-apply")
	from := f.nextSeq(ctx)
	f.send(ctx, s, false)
	f.awaitOnce(ctx, handleWithin, "a session published after the live Apply", from, []session{s})
}

// opsStream is c with the administrator's stream settings.
func opsStream(c jetstream.StreamConfig) jetstream.StreamConfig {
	c.Description, c.MaxBytes, c.MaxMsgSize = opsStreamDescription, opsMaxBytes, opsMaxMsgSize
	c.Compression, c.AllowDirect = jetstream.S2Compression, true
	c.Metadata = withOpsMetadata(c.Metadata)
	return c
}

// opsConsumer is c with the administrator's consumer settings.
func opsConsumer(c jetstream.ConsumerConfig) jetstream.ConsumerConfig {
	c.Description = opsConsumerDescription
	c.Metadata = withOpsMetadata(c.Metadata)
	return c
}

func withOpsMetadata(md map[string]string) map[string]string {
	out := maps.Clone(md)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, opsMetadata)
	return out
}

// setting is one configuration value as it should be and as the server
// has it; who says what it should be is in the name.
type setting struct {
	name      string
	want, got any
}

func streamChecks(c jetstream.StreamConfig) []setting {
	return []setting{
		{"description (ops)", opsStreamDescription, c.Description},
		{"maxBytes (ops)", opsMaxBytes, c.MaxBytes},
		{"maxMsgSize (ops)", opsMaxMsgSize, c.MaxMsgSize},
		{"compression (ops)", jetstream.S2Compression, c.Compression},
		{"allowDirect (ops)", true, c.AllowDirect},
		{"metadata owner (ops)", opsMetadata["owner"], c.Metadata["owner"]},
		{"subjects (manifest)", strings.Join(transcriptionSubjects, ","), strings.Join(c.Subjects, ",")},
		{"duplicates (manifest)", dayWindow, c.Duplicates},
		{"storage (manifest)", jetstream.FileStorage, c.Storage},
	}
}

func consumerChecks(c jetstream.ConsumerConfig, wantAckWait time.Duration) []setting {
	return []setting{
		{"description (ops)", opsConsumerDescription, c.Description},
		{"metadata owner (ops)", opsMetadata["owner"], c.Metadata["owner"]},
		{"ackWait (manifest)", wantAckWait, c.AckWait},
		{"ackPolicy (jetfn)", jetstream.AckExplicitPolicy, c.AckPolicy},
		{"filter subject (manifest)", events.SessionEndedSubject, c.FilterSubject},
		{"maxDeliver (jetfn: unlimited on the server)", -1, c.MaxDeliver},
		{"maxAckPending (manifest default)", impliedMaxAckPending, c.MaxAckPending},
		{"metadata jetfn.function (jetfn)", functionName, c.Metadata["jetfn.function"]},
		{"metadata jetfn.max_deliver (manifest)", strconv.Itoa(maxDeliver), c.Metadata["jetfn.max_deliver"]},
	}
}

// drifted lists the settings whose value on the server is not the one
// they should have.
func drifted(what string, ss []setting) []string {
	var out []string
	for _, s := range ss {
		if s.want != s.got {
			out = append(out, fmt.Sprintf("%s %s: want %s, saw %s", what, s.name, show(s.want), show(s.got)))
		}
	}
	return out
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// checkKept reports, after stage, every admin setting the server no longer
// has and every manifest field it has wrong. Then it tunes the admin
// settings back, as an operator would, so that the next stage is judged on
// what it does itself; when nothing drifted it changes nothing.
func checkKept(ctx context.Context, t *testing.T, admin jetstream.JetStream, stage string, wantAckWait time.Duration) {
	t.Helper()
	stream, err := admin.Stream(ctx, transcriptionStream)
	if err != nil {
		t.Fatalf("after %s: reading stream %s: %v", stage, transcriptionStream, err)
	}
	info, err := consumerInfo(ctx, admin)
	if err != nil {
		t.Fatalf("after %s: reading consumer %s: %v", stage, functionName, err)
	}
	sc, cc := stream.CachedInfo().Config, info.Config
	streamDrift := drifted("stream "+transcriptionStream, streamChecks(sc))
	consumerDrift := drifted("consumer "+functionName, consumerChecks(cc, wantAckWait))
	if len(streamDrift)+len(consumerDrift) == 0 {
		return
	}
	t.Errorf("after %s, %d settings are not what ops or the manifest set:\n  %s", stage,
		len(streamDrift)+len(consumerDrift), strings.Join(append(streamDrift, consumerDrift...), "\n  "))
	if _, err := admin.UpdateStream(ctx, opsStream(sc)); err != nil {
		t.Fatalf("after %s: admin tuning stream %s again: %v", stage, transcriptionStream, err)
	}
	if _, err := stream.UpdateConsumer(ctx, opsConsumer(cc)); err != nil {
		t.Fatalf("after %s: admin tuning consumer %s again: %v", stage, functionName, err)
	}
}

// deployRevision stores the harness's manifest with summarize-session's
// consumer settings c as a revision of adminDeployment, with `jetfn deploy
// --yes`; n only names the file.
func deployRevision(ctx context.Context, t *testing.T, f *deletedFixture, n int, c consumerSettings) {
	t.Helper()
	path := filepath.Join(f.dir, fmt.Sprintf("revision-%d.yaml", n))
	if err := writeManifest(path, manifestParams{window: dayWindow, quiet: deletedQuiet, consumer: c}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, f.bin, "deploy", "--manifest", path, "--deployment", adminDeployment, "--yes")
	cmd.Env = testkit.ChildEnv{NATSURL: f.stack.NATSURL(), MongoURI: f.stack.MongoURI(), MongoDatabase: f.db, Manifest: path}.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("jetfn deploy of revision %d (%s): %v\n%s", n, path, err, out)
	}
}

// appliedLine is what `jetfn run --deployment` logs once Apply has
// finished, the old binding drained included.
const appliedLine = `"msg":"applied deployment revision"`

// awaitApplied polls until the running child has applied the revision just
// stored: the consumer has its ackWait, and the child's log says Apply is
// done. The consumer changes first; the old binding drains after it.
func awaitApplied(ctx context.Context, t *testing.T, f *deletedFixture, want time.Duration) {
	t.Helper()
	logPath := filepath.Join(f.dir, fmt.Sprintf("jetfn-%d.log", f.runs))
	last := "nothing read yet"
	ok := pollUntil(ctx, applyWithin, 100*time.Millisecond, func(ctx context.Context) bool {
		info, err := consumerInfo(ctx, f.stack.js)
		if err != nil {
			last = err.Error()
			return false
		}
		raw, err := os.ReadFile(logPath)
		logged := err == nil && strings.Contains(string(raw), appliedLine)
		last = fmt.Sprintf("ackWait %s, %s logged: %t", info.Config.AckWait, appliedLine, logged)
		return info.Config.AckWait == want && logged
	})
	if !ok {
		t.Fatalf("live Apply: want consumer %s's ackWait %s and %s in %s within %s of storing the revision, saw %s",
			functionName, want, appliedLine, logPath, applyWithin, last)
	}
}
