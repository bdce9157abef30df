package functions_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/functions"
	publishrecordingevent "github.com/jetfn/jetfn/functions/publish-recording-event"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
)

// TestFunctionsWordFaultsAlike sends the same faulty payloads to the two
// functions of the video-call app: each refuses them as malformed, and with
// the same words, since each decodes with its events Payload. A fault in a
// member both contracts share (conversationId) reads the same too. A
// function added later has contracts of its own, so only these two are
// asked.
func TestFunctionsWordFaultsAlike(t *testing.T) {
	// An unconnected client is enough: a malformed payload is refused
	// before any function touches the database.
	client, err := mongo.Connect()
	if err != nil {
		t.Fatal(err)
	}
	deps := jetfn.Deps{Mongo: client.Database("unused"), Publisher: nopPublisher{}}
	tests := []struct {
		name    string
		payload string
		want    string // the problem, as PayloadError lists it
	}{
		{name: "not JSON", payload: `not json`, want: `not JSON at byte 0: unexpected "not"`},
		{name: "empty", payload: ``, want: `empty`},
		{name: "an array", payload: `[{}]`, want: `want an object, got an array`},
		{name: "trailing data", payload: `{} {}`, want: `trailing data at byte 3 after the JSON value`},
		{name: "duplicate name", payload: `{"conversationId":"c","conversationId":"d"}`, want: `conversationId: appears more than once`},
		{name: "invalid UTF-8", payload: "{\"conversationId\":\"\xff\"}", want: `conversationId: invalid UTF-8 at byte 19`},
		{name: "a subject token in an ID", payload: `{"conversationId":"c.1"}`, want: `conversationId: must not contain '.' (got "c.1")`},
		{name: "null", payload: `{"conversationId":null}`, want: `conversationId: want a string, got null`},
		{name: "a case variant", payload: `{"ConversationID":"c"}`, want: `conversationId: missing (the payload has "ConversationID"; names are case-sensitive)`},
	}
	for _, fn := range functions.All() {
		if fn.Name != summarizesession.Name && fn.Name != publishrecordingevent.Name {
			continue
		}
		h, err := fn.New(deps)
		if err != nil {
			t.Fatalf("%s: %v", fn.Name, err)
		}
		for _, tt := range tests {
			t.Run(fn.Name+"/"+tt.name, func(t *testing.T) {
				err := h.Handle(context.Background(), jetfn.Msg{Subject: "recording.started", Data: []byte(tt.payload)})
				var pe *jetfn.PayloadError
				if !errors.Is(err, jetfn.ErrMalformed) || !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a malformed PayloadError", err)
				}
				if !slices.Contains(pe.Problems, tt.want) {
					t.Errorf("problems %q, want one to read %q", pe.Problems, tt.want)
				}
				if strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "jsonschema") {
					t.Errorf("reason %q speaks of Go or the validator", err)
				}
			})
		}
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, string, []byte, string) error { return nil }

func (nopPublisher) PublishAt(context.Context, string, []byte, string, time.Time) error { return nil }
