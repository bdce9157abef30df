package events

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jetfn/jetfn"
)

// Schemas holds one JSON Schema (draft 2020-12) per payload. They are the
// contract: a publisher in another language validates against them, and
// the Payload values below decode and check with them, so every rule lives
// in one place.
//
//go:embed schemas/*.schema.json
var Schemas embed.FS

// The payload contracts, each a schema of Schemas with its Go type. A
// function decodes with one (Handler, Decode); a Go publisher encodes with
// it (Encode), so neither can send or take what the other refuses.
var (
	SegmentPayload             = jetfn.MustPayload[Segment](schema("segment.schema.json"))
	SessionEndedPayload        = jetfn.MustPayload[SessionEnded](schema("session-ended.schema.json"))
	TranscriptProcessedPayload = jetfn.MustPayload[TranscriptProcessed](schema("transcript-processed.schema.json"))
	RecordingEventPayload      = jetfn.MustPayload[RecordingEvent](schema("recording-event.schema.json"))
	RecordingNoticePayload     = jetfn.MustPayload[RecordingNotice](schema("recording-notice.schema.json"))
	SummariesReportPayload     = jetfn.MustPayload[SummariesReport](schema("summaries-report.schema.json"))
)

func schema(name string) []byte {
	raw, err := fs.ReadFile(Schemas, "schemas/"+name)
	if err != nil {
		panic(err) // embedded: only a typo in a name above gets here
	}
	return raw
}

// CompileSchema compiles the named schema file from Schemas, for tests and
// tools that validate payloads with the schema alone, as another language
// would.
func CompileSchema(name string) (*jsonschema.Schema, error) {
	raw, err := fs.ReadFile(Schemas, "schemas/"+name)
	if err != nil {
		return nil, fmt.Errorf("reading schema %s: %w", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("parsing schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name, doc); err != nil {
		return nil, fmt.Errorf("loading schema %s: %w", name, err)
	}
	s, err := c.Compile(name)
	if err != nil {
		return nil, fmt.Errorf("compiling schema %s: %w", name, err)
	}
	return s, nil
}
