package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// TestManifestSchemaAgreesWithLoader validates every manifest in the repo
// and a set of bad ones with both the JSON Schema that editors use and the
// Go loader: each must accept or refuse the same documents.
func TestManifestSchemaAgreesWithLoader(t *testing.T) {
	schema := compileManifestSchema(t)
	repo, err := filepath.Glob("../manifests/*.yaml")
	if err != nil || len(repo) < 2 {
		t.Fatalf("repo manifests %v, %v", repo, err)
	}
	for _, path := range repo {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(path), func(t *testing.T) { agree(t, schema, string(raw), true) })
	}
	bad := []struct{ name, edit, with string }{
		{"unknown key", "    concurrency: 4", "    concurency: 4"},
		{"duration as a number", "ackWait: 6s", "ackWait: 6"},
		{"duration without unit", "heartbeat: 2s", "heartbeat: two"},
		{"non-SemVer version", "version: 1.0.0", "version: v1"},
		{"unknown storage", "    subjects: [\"deadletter.>\"]", "    subjects: [\"deadletter.>\"]\n    storage: ssd"},
		{"too many replicas", "    subjects: [\"deadletter.>\"]", "    subjects: [\"deadletter.>\"]\n    replicas: 7"},
		{"negative concurrency", "    concurrency: 4", "    concurrency: -1"},
		{"rate limit without a period", "    concurrency: 4", "    concurrency: 4\n    rateLimit: \"100\""},
		{"priority header with a space", "    concurrency: 4", "    concurrency: 4\n    priorityHeader: \"Very Urgent\""},
		{"negative maxRetryAfter", "    concurrency: 4", "    concurrency: 4\n    maxRetryAfter: -1s"},
		{"stream name with a dot", "name: DEADLETTER", "name: DEAD.LETTER"},
		{"subject and subjects", "    subject: transcription.session-ended", "    subject: transcription.session-ended\n    subjects: [transcription.x]"},
		{"output without stream", "    concurrency: 4", "    concurrency: 4\n    outputs: [{subject: transcript.processed}]"},
		{"remote with a config block", "    concurrency: 4", "    concurrency: 4\n    remote: {subject: greeter.handle}"},
	}
	// A remote function under any name, without a config block.
	remote := strings.Replace(strings.Replace(validManifest, "name: summarize-session", "name: remote-greet", 1),
		"    config:\n      quiet: 2s\n", "    remote: {subject: greeter.handle}\n", 1)
	t.Run("remote function", func(t *testing.T) { agree(t, schema, remote, true) })
	for _, tt := range []struct{ name, with string }{
		{"remote without subject", "remote: {}"},
		{"remote with a wildcard", "remote: {subject: greeter.>}"},
		{"remote with an unknown key", "remote: {subject: greeter.handle, queue: q}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			agree(t, schema, strings.Replace(remote, "remote: {subject: greeter.handle}", tt.with, 1), false)
		})
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(validManifest, tt.edit, tt.with, 1)
			if doc == validManifest {
				t.Fatalf("edit %q did not apply", tt.edit)
			}
			agree(t, schema, doc, false)
		})
	}
}

// agree checks that the schema and the loader both give wantValid.
func agree(t *testing.T, schema *jsonschema.Schema, doc string, wantValid bool) {
	t.Helper()
	schemaErr := schema.Validate(yamlToJSON(t, doc))
	var loaderErr error
	m, loaderErr := Parse([]byte(doc))
	if loaderErr == nil {
		loaderErr = m.Validate(known)
	}
	if (schemaErr == nil) != wantValid || (loaderErr == nil) != wantValid {
		t.Fatalf("want valid=%v; schema says %v; loader says %v", wantValid, schemaErr, loaderErr)
	}
}

func compileManifestSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	s, err := c.Compile("../manifests/manifest.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlToJSON turns a YAML document into the value a JSON validator sees.
func yamlToJSON(t *testing.T, doc string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
