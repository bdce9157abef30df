package jetfn

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/jetfn/jetfn/internal/problems"
	"github.com/jetfn/jetfn/internal/yamlkeys"
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
// key is close), a repeated key, or a value of the wrong type. A typo thus
// cannot silently fall back to a default. Fields absent from the block keep
// the values v already has, which is how a function supplies its defaults.
//
// Keys are checked against yaml tags (or lowercased field names, as yaml.v3
// does) in structs and, recursively, in struct fields; `,inline` structs are
// flattened. Anything else (maps, slices, types with their own UnmarshalYAML)
// is decoded by yaml.v3 without a key check, and an `,inline` map is not
// supported: its keys are refused as unknown. Merge keys (<<) are refused.
func (c Config) Decode(v any) error {
	if c.node == nil {
		return nil
	}
	out := reflect.ValueOf(v)
	if out.Kind() != reflect.Pointer || out.IsNil() {
		return fmt.Errorf("decoding config: want a non-nil pointer, got %T", v)
	}
	return errors.Join(decodeValue(c.node, out.Elem(), "", c.node.Line)...)
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

// decodeValue decodes node into out, the key at path on line. A mapping
// bound for a struct is decoded key by key: yaml.v3's Node.Decode has no
// KnownFields, and decoding value by value is what lets an error name its key.
func decodeValue(node *yaml.Node, out reflect.Value, path string, line int) []error {
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if st, ok := structTarget(node, out); ok {
		return decodeMapping(node, st, path)
	}
	err := node.Decode(out.Addr().Interface())
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []error{&ConfigError{Key: path, Line: line, Err: err}}
	}
	errs := make([]error, 0, len(te.Errors))
	for _, msg := range te.Errors {
		// yaml.v3 starts each with the line; keep it only where it differs
		// from the key's (an item further down a list).
		msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line))
		errs = append(errs, &ConfigError{Key: path, Line: line, Err: errors.New(msg)})
	}
	return errs
}

// structTarget is the struct a mapping node decodes into key by key: out
// itself, or what out points to (allocated if nil). It is false for
// anything else, and for a type that decodes itself.
func structTarget(node *yaml.Node, out reflect.Value) (reflect.Value, bool) {
	if node.Kind != yaml.MappingNode || decodesItself(out.Type()) {
		return reflect.Value{}, false
	}
	if out.Kind() == reflect.Pointer {
		if out.Type().Elem().Kind() != reflect.Struct || decodesItself(out.Type().Elem()) {
			return reflect.Value{}, false
		}
		if out.IsNil() {
			out.Set(reflect.New(out.Type().Elem()))
		}
		out = out.Elem()
	}
	return out, out.Kind() == reflect.Struct
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func decodesItself(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// decodeMapping decodes each key of node into its field of out.
func decodeMapping(node *yaml.Node, out reflect.Value, path string) []error {
	fields := fieldsOf(out.Type())
	seen := map[string]int{}
	var errs []error
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		at := joinKey(path, key.Value)
		if first, dup := seen[key.Value]; dup {
			errs = append(errs, &ConfigError{Key: at, Line: key.Line, Err: fmt.Errorf("also set at line %d", first)})
			continue
		}
		seen[key.Value] = key.Line
		f, ok := findField(fields, key.Value)
		if !ok {
			errs = append(errs, unknownKey(key, at, fields))
			continue
		}
		errs = append(errs, decodeValue(val, out.FieldByIndex(f.index), at, key.Line)...)
	}
	return errs
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// configField is a key a struct accepts and the field that holds it.
type configField struct {
	key   string
	index []int
}

// fieldsOf lists the keys yaml.v3 maps onto t's fields, in field order.
func fieldsOf(t reflect.Type) []configField {
	var fields []configField
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct:
			for _, sub := range fieldsOf(f.Type) {
				fields = append(fields, configField{key: sub.key, index: append([]int{i}, sub.index...)})
			}
		case !f.IsExported() || strings.Contains(opts, "inline"):
		case name == "":
			fields = append(fields, configField{key: strings.ToLower(f.Name), index: []int{i}})
		default:
			fields = append(fields, configField{key: name, index: []int{i}})
		}
	}
	return fields
}

func findField(fields []configField, key string) (configField, bool) {
	for _, f := range fields {
		if f.key == key {
			return f, true
		}
	}
	return configField{}, false
}

// unknownKey reports a key no field takes, with the key the author most
// likely meant, or the keys there are.
func unknownKey(key *yaml.Node, at string, fields []configField) error {
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.key
	}
	var err error
	switch best := yamlkeys.Closest(key.Value, known); {
	case best != "":
		err = fmt.Errorf("%w; did you mean %s?", ErrUnknownConfigKey, best)
	case len(known) == 0:
		err = fmt.Errorf("%w; this block takes no keys", ErrUnknownConfigKey)
	default:
		err = fmt.Errorf("%w; the keys are %s", ErrUnknownConfigKey, strings.Join(known, ", "))
	}
	return &ConfigError{Key: at, Line: key.Line, Err: err}
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
		k, v := yamlkeys.Entry(node, key)
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
