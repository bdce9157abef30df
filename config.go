package jetfn

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/jetfn/jetfn/internal/problems"
	"github.com/jetfn/jetfn/internal/yamldecode"
	"go.yaml.in/yaml/v3"
)

// Config is a function's `config:` block, kept undecoded until the function
// says which type it wants. It keeps the node of the manifest's parse, whose
// lines are the manifest file's, so an error can point into the file.
type Config struct {
	node *yaml.Node
}

// ConfigFromYAML parses a config block, for tests and for callers that build
// Deps themselves. Its lines count from the text's first line.
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

// Decode fills v (a pointer) from the block and reports every problem at
// once, each a *ConfigError naming the key and its line in the manifest: an
// unknown key (ErrUnknownConfigKey, with a "did you mean" hint when a known
// key is close), a repeated key, or a value of the wrong kind. A typo thus
// cannot silently fall back to a default. Fields absent from the block keep
// the values v already has, which is how a function supplies its defaults.
//
// The block is read by the manifest's own decoder, so it reads the same:
// keys are yaml tags (or lowercased field names, as yaml.v3 has them),
// `,inline` structs are flattened, lists are checked item by item,
// durations need a unit, and a map or a type with its own UnmarshalYAML is
// decoded without a key check.
func (c Config) Decode(v any) error {
	if c.node == nil {
		return nil
	}
	out := reflect.ValueOf(v)
	if out.Kind() != reflect.Pointer || out.IsNil() {
		return fmt.Errorf("decoding config: want a non-nil pointer, got %T", v)
	}
	var errs []error
	for _, p := range yamldecode.Decode(c.node, out.Elem()) {
		errs = append(errs, &ConfigError{Key: p.Label, Line: p.Line, Err: p.Err})
	}
	return errors.Join(errs...)
}

// DecodeValid decodes the block into v, as Decode does, then runs v's
// Validate and gives each *ConfigError it reports without a line (see
// InvalidConfig) the line of its key, so a rule the function enforces points
// into the manifest as a typo does. Validate should return one such error or
// an errors.Join of them; other errors are returned as they are.
func (c Config) DecodeValid(v Validator) error {
	if err := c.Decode(v); err != nil {
		return err
	}
	return c.locate(v.Validate())
}

// ConfigError is one problem with one key of a config block.
type ConfigError struct {
	// Key is the key's dotted path inside the block; empty for the block.
	Key string
	// Line is the key's line in the manifest; 0 when the block does not set
	// the key (a default broke a rule).
	Line int
	Err  error
}

// Error reads "line 45: quiet: -5s is negative", the way yaml.v3 places its
// own errors.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the problem without its place.
func (e *ConfigError) Unwrap() error { return e.Err }

// InvalidConfig is a function's Validate reporting that the value of key (a
// dotted path inside the block) breaks one of its rules; DecodeValid adds
// the key's line.
func InvalidConfig(key, format string, args ...any) error {
	return &ConfigError{Key: key, Err: fmt.Errorf(format, args...)}
}

// locate gives each lineless *ConfigError in err the line of its key.
func (c Config) locate(err error) error {
	parts := problems.Split(err)
	for i, p := range parts {
		if ce, ok := p.(*ConfigError); ok && ce.Line == 0 {
			located := *ce
			located.Line = c.line(ce.Key)
			parts[i] = &located
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return errors.Join(parts...)
}

// line is the manifest line of the key at path (dotted; empty for the
// block), 0 if the block does not set it.
func (c Config) line(path string) int {
	if c.node == nil || path == "" {
		return c.blockLine()
	}
	node, line := c.node, 0
	for key := range strings.SplitSeq(path, ".") {
		k, v := yamldecode.Entry(node, key)
		if k == nil {
			return 0
		}
		node, line = v, k.Line
	}
	return line
}

func (c Config) blockLine() int {
	if c.node == nil {
		return 0
	}
	return c.node.Line
}

// UnmarshalYAML keeps the block as a node.
func (c *Config) UnmarshalYAML(node *yaml.Node) error {
	c.node = node
	return nil
}

// Equal reports whether two config blocks say the same thing, whatever their
// lines and layout; a manifest's plan compares blocks with it.
func (c Config) Equal(other Config) bool { return c.yamlText() == other.yamlText() }

// yamlText is the block as canonical YAML text.
func (c Config) yamlText() string {
	if c.node == nil {
		return ""
	}
	out, err := yaml.Marshal(c.node)
	if err != nil {
		return err.Error()
	}
	return string(out)
}
