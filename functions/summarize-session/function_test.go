package summarizesession

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestNewConfig checks the config block: defaults, overrides, and errors
// that name the field.
func TestNewConfig(t *testing.T) {
	// An unconnected client is enough: New does not touch the database.
	client, err := mongo.Connect()
	if err != nil {
		t.Fatal(err)
	}
	db := client.Database("unused")
	var pub nopPublisher
	tests := []struct {
		name    string
		config  string
		mongo   *mongo.Database
		want    Config
		wantErr string
	}{
		{name: "defaults", mongo: db, want: Config{Quiet: 2 * time.Second, MaxRounds: 5}},
		{name: "override", config: "quiet: 200ms\nmaxRounds: 3\n", mongo: db, want: Config{Quiet: 200 * time.Millisecond, MaxRounds: 3}},
		{name: "partial", config: "maxRounds: 9\n", mongo: db, want: Config{Quiet: 2 * time.Second, MaxRounds: 9}},
		{name: "unknown key", config: "quite: 1s\n", mongo: db, wantErr: "quite"},
		{name: "bad duration", config: "quiet: soon\n", mongo: db, wantErr: "soon"},
		{name: "zero quiet is allowed", config: "quiet: 0s\n", mongo: db, want: Config{Quiet: 0, MaxRounds: 5}},
		{name: "negative quiet and zero rounds", config: "quiet: -1s\nmaxRounds: 0\n", mongo: db, wantErr: "line 1: quiet: -1s is negative\nline 2: maxRounds: 0 is below 1"},
		{name: "no mongo", wantErr: "needs Mongo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := jetfn.ConfigFromYAML(tt.config)
			if err != nil {
				t.Fatal(err)
			}
			h, err := New(jetfn.Deps{Config: cfg, Mongo: tt.mongo, Publisher: pub})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := h.(*Function).cfg; got != tt.want {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := New(jetfn.Deps{Mongo: db}); !errors.Is(err, jetfn.ErrNoPublisher) {
		t.Errorf("New without publisher = %v, want jetfn.ErrNoPublisher", err)
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, string, []byte, string) error { return nil }

func (nopPublisher) PublishAt(context.Context, string, []byte, string, time.Time) error { return nil }
