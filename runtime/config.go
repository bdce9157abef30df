package runtime

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Config is a function's `config:` block, kept undecoded until the function
// says which type it wants.
type Config struct {
	node *yaml.Node
}

// ConfigFromYAML parses a config block, for tests and for callers that build
// Deps themselves.
func ConfigFromYAML(text string) (Config, error) {
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(text), &node); err != nil {
		return Config{}, fmt.Errorf("parsing config: %w", err)
	}
	if len(node.Content) == 0 {
		return Config{}, nil
	}
	return Config{node: node.Content[0]}, nil
}

// Decode fills v from the block. An unknown key is an error naming the key
// and its line, so a typo in a manifest cannot silently fall back to a
// default. Fields absent from the block keep the values v already has, which
// is how a function supplies its defaults.
func (c Config) Decode(v any) error {
	if c.node == nil {
		return nil
	}
	raw, err := yaml.Marshal(c.node)
	if err != nil {
		return fmt.Errorf("decoding config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding config: %w", err)
	}
	return nil
}

// UnmarshalYAML keeps the block as a node.
func (c *Config) UnmarshalYAML(node *yaml.Node) error {
	c.node = node
	return nil
}
