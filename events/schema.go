package events

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schemas holds one JSON Schema (draft 2020-12) per payload. They are the
// contract a publisher in another language validates against.
//
//go:embed schemas/*.schema.json
var Schemas embed.FS

// CompileSchema compiles the named schema file from Schemas, for tests and
// tools that validate payloads.
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
