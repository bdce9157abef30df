package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestRecreatedStreamKeepsIdentitiesApart is issue 29, item 4: a deleted
// stream that jetfn recreates restarts its sequences at 1, so an identity
// built on "<stream>:<seq>" names two different messages. Before the fix
// the second message's dead letter had the first one's Nats-Msg-Id
// (fn:TEST:1): DEADLETTER dropped it as a duplicate, jetfn took the
// duplicate PubAck for success and Term'd the message with no record; and
// the handler saw both messages under one Msg.ID, so an effect keyed by
// it was made once for two inputs.
func TestRecreatedStreamKeepsIdentitiesApart(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{result: func(jetfn.Msg) error { return jetfn.Permanent(errors.New("poison")) }}
	r := env.start(testManifest(t, "    ackWait: 2s\n"), rec)
	env.publish("test.in", "first")
	env.deadLetters(1)

	ctx := context.Background()
	if err := env.js.DeleteStream(ctx, "TEST"); err != nil {
		t.Fatal(err)
	}
	// The runtime notices at its next pull, or at the latest at its
	// consumer watch's look (consumerCheckEvery, 30 s), and recreates the
	// stream; the publish retries until then.
	runtimetest.Eventually(t, consumerCheckEvery+15*time.Second, "the stream recreated and the second message stored", func() bool {
		_, err := env.js.Publish(ctx, "test.in", []byte("second"))
		return err == nil
	})
	runtimetest.Eventually(t, 20*time.Second, "the second message handled", func() bool { return rec.count() == 2 })
	runtimetest.Eventually(t, 20*time.Second, "the second message settled", func() bool {
		s := r.rt.statsOf(t, "fn")
		return s.InFlight == 0 && s.Termed+s.Retried >= 2
	})
	seen := rec.all()
	if a, b := seen[0].msg.ID(), seen[1].msg.ID(); a == b {
		t.Errorf("two messages, one on each incarnation of TEST, were both handled as %q", a)
	}
	letters := runtimetest.StreamMessages(t, env.js, "DEADLETTER")
	if len(letters) != 2 {
		ids := []string{}
		for _, l := range letters {
			ids = append(ids, l.Header.Get(jetstream.MsgIDHeader))
		}
		t.Fatalf("DEADLETTER holds %d dead letters %v, want 2: one per message", len(letters), ids)
	}
	if a, b := letters[0].Header.Get(jetstream.MsgIDHeader), letters[1].Header.Get(jetstream.MsgIDHeader); a == b {
		t.Errorf("both dead letters have the ID %q", a)
	}
}

// TestDeadLetterDuplicateChecked: a dead letter the stream acknowledges as
// a duplicate is success only if the dead letter it holds under that ID is
// the same message's. Before the fix every duplicate was success, and the
// caller Term'd the message.
func TestDeadLetterDuplicateChecked(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	msg := jetfn.Msg{Subject: "test.in", Data: []byte("x"), Stream: "TEST", StreamIdentity: "Ab3dEf9x", StreamSequence: 3, NumDelivered: 1}
	dl := newDeadLetter("fn", "fn", msg, errors.New("refused"))
	other := msg
	other.Subject, other.StreamSequence = "test.other", 4
	impostor := newDeadLetter("fn", "fn", other, errors.New("refused"))
	tests := []struct {
		name   string
		stored func(subject string) *nats.Msg // what the stream already holds under dl's ID
		remove bool                           // deleted after it was stored, as a replay does
		want   error
	}{
		{name: "nothing stored before", want: nil},
		{name: "the same message's dead letter", stored: dl.natsMsg, want: nil},
		{name: "another message under the same ID", want: ErrDeadLetterIDTaken,
			stored: func(subject string) *nats.Msg { return withMsgID(impostor.natsMsg(subject), dl.msgID()) }},
		{name: "the same message's, replayed and deleted since", stored: dl.natsMsg, remove: true, want: nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A stream of its own per case: a fresh duplicate memory.
			name, subject := fmt.Sprintf("DL%d", i), fmt.Sprintf("dl%d.fn", i)
			stream, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.stored != nil {
				ack, err := env.js.PublishMsg(ctx, tt.stored(subject))
				if err != nil {
					t.Fatal(err)
				}
				if tt.remove {
					if err := stream.DeleteMsg(ctx, ack.Sequence); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := publishDeadLetter(ctx, env.js, subject, dl); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("publishDeadLetter = %v, want %v", err, tt.want)
			}
		})
	}
}

func withMsgID(m *nats.Msg, id string) *nats.Msg {
	m.Header.Set(jetstream.MsgIDHeader, id)
	return m
}

// streamIdentityOf is the identity of the stream as it is now.
func streamIdentityOf(t *testing.T, js jetstream.JetStream, name string) string {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return StreamIdentity(s.CachedInfo().Created)
}

// TestInputStreamRetentionOnServer (issue 29, item 8): a stream an
// administrator made with interest retention, which the manifest does not
// override, is refused at bind with the reason: every message published
// while the function's consumer is missing would be dropped with a
// PubAck. Before the fix the function was bound.
func TestInputStreamRetentionOnServer(t *testing.T) {
	env := newEnv(t)
	if _, err := env.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "TEST", Subjects: []string{"test.>"},
		Retention: jetstream.InterestPolicy}); err != nil {
		t.Fatal(err)
	}
	rt, err := New(env.nc, testManifest(t, ""), recorderFunctions(&recorder{}), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = rt.Run(ctx)
	if !errors.Is(err, ErrServerRefused) || !strings.Contains(err.Error(), "retention interest") {
		t.Fatalf("Run = %v, want a refusal naming the retention", err)
	}
}
