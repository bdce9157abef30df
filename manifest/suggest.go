package manifest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/jetfn/jetfn/internal/yamlkeys"
)

// unknownKey says that no field takes key, naming the key the author most
// likely meant, or else the keys there are.
func unknownKey(key string, keys map[string]reflect.StructField) error {
	known := make([]string, 0, len(keys))
	for k := range keys {
		known = append(known, k)
	}
	slices.Sort(known)
	if best := yamlkeys.Closest(key, known); best != "" {
		return fmt.Errorf("unknown key; did you mean %s?", best)
	}
	return fmt.Errorf("unknown key; the keys here are %s", strings.Join(known, ", "))
}
