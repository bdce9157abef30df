package reportsummaries

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
)

// Name is the function's name in manifests and in the registry.
const Name = "report-summaries"

// Config is the function's `config:` block in the manifest.
type Config struct {
	// Window is how far back from each tick the report counts: the
	// schedule's interval, so consecutive reports cover time once.
	Window time.Duration `yaml:"window"`
}

// Validate names the field at fault (jetfn.InvalidConfig).
func (c Config) Validate() error {
	if c.Window <= 0 {
		return jetfn.InvalidConfig("window", "%s is not a positive duration", c.Window)
	}
	return nil
}

// CheckConfig is New's reading of the block, for `jetfn check`.
func CheckConfig(block jetfn.Config) error {
	_, err := decodeConfig(block)
	return err
}

func decodeConfig(block jetfn.Config) (Config, error) {
	cfg := Config{Window: time.Hour}
	if err := block.DecodeValid(&cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Function reports the summaries stored in the window before each tick.
type Function struct {
	cfg       Config
	summaries *mongo.Collection
	pub       jetfn.Publisher
}

// New builds the function from the runtime's dependencies.
func New(deps jetfn.Deps) (jetfn.Handler, error) {
	cfg, err := decodeConfig(deps.Config)
	if err != nil {
		return nil, err
	}
	if err := deps.Require(Name, jetfn.NeedMongo|jetfn.NeedPublisher); err != nil {
		return nil, err
	}
	return &Function{cfg: cfg, summaries: deps.Mongo.Collection(events.SummariesCollection), pub: deps.Publisher}, nil
}

// Handle counts the last whole window before the tick's time (windows
// are whole multiples of Window: 12:04 to 12:05 for a tick at 12:05:00.3,
// stored a moment after its time) and publishes the report under the
// window's end as its ID. Consecutive ticks so report consecutive windows
// however late each is stored, and two ticks in one window report once.
func (f *Function) Handle(ctx context.Context, msg jetfn.Msg) error {
	if msg.Published.IsZero() {
		return jetfn.Malformed(errors.New("the tick carries no time"))
	}
	to := msg.Published.UTC().Truncate(f.cfg.Window)
	report := events.SummariesReport{From: to.Add(-f.cfg.Window), To: to}
	window := bson.M{"updatedAt": bson.M{"$gte": report.From, "$lt": report.To}}
	var err error
	if report.Summaries, err = f.count(ctx, window); err != nil {
		return err
	}
	window["complete"] = true
	if report.Complete, err = f.count(ctx, window); err != nil {
		return err
	}
	data, err := events.SummariesReportPayload.Encode(report)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", events.SummariesReportSubject, err)
	}
	return f.pub.Publish(ctx, events.SummariesReportSubject, data, to.Format(time.RFC3339))
}

func (f *Function) count(ctx context.Context, filter bson.M) (int, error) {
	n, err := f.summaries.CountDocuments(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("counting summaries: %w", err)
	}
	return int(n), nil
}
