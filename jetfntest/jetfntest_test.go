package jetfntest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/jetfntest"
)

func TestPublisherAppliesTheRuntimeRules(t *testing.T) {
	down := errors.New("nats down")
	tests := []struct {
		name      string
		declared  []string
		err       error
		subject   string
		key       string
		wantErr   error
		wantMsgID string
	}{
		{name: "scoped message ID", subject: "greetings.sent", key: "GREETINGS:1", wantMsgID: "jetfn:greeter:greetings.sent:GREETINGS:1"},
		{name: "no dedup on purpose", subject: "greetings.sent", key: jetfn.NoDedup},
		{name: "empty key", subject: "greetings.sent", key: "", wantErr: jetfn.ErrNoOutputKey},
		{name: "undeclared output", declared: []string{"greetings.*"}, subject: "other.sent", key: "k", wantErr: jetfn.ErrUndeclaredOutput},
		{name: "declared output", declared: []string{"greetings.*"}, subject: "greetings.sent", key: "k", wantMsgID: "jetfn:greeter:greetings.sent:k"},
		{name: "a failure the test injects", err: down, subject: "greetings.sent", key: "k", wantErr: down},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deps, pub := jetfntest.Deps(t, "greeter", "")
			pub.Declared, pub.Err = tt.declared, tt.err
			err := deps.Publisher.Publish(context.Background(), tt.subject, []byte("hi"), tt.key)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(pub.Outputs()) != 0 {
					t.Fatalf("err = %v, outputs %v; want %v and nothing recorded", err, pub.Outputs(), tt.wantErr)
				}
				return
			}
			out := pub.Outputs()
			if err != nil || len(out) != 1 || out[0].MsgID != tt.wantMsgID || string(out[0].Data) != "hi" {
				t.Fatalf("err = %v, outputs %+v; want one with ID %q", err, out, tt.wantMsgID)
			}
		})
	}
}

func TestDepsCarriesTheConfigBlock(t *testing.T) {
	deps, _ := jetfntest.Deps(t, "greeter", "greeting: hello\n")
	var cfg struct {
		Greeting string `yaml:"greeting"`
	}
	if err := deps.Config.Decode(&cfg); err != nil || cfg.Greeting != "hello" {
		t.Fatalf("Decode = %+v, %v", cfg, err)
	}
}
