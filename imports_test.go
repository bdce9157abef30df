package jetfn_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportPicture keeps the three audiences apart: functions import the
// contract, the manifest and runtime import it too, and nothing points back
// up. A function's build then drags in no JetStream engine.
func TestImportPicture(t *testing.T) {
	const module = "github.com/jetfn/jetfn"
	tests := []struct {
		name      string
		packages  string
		forbidden []string
	}{
		{name: "the contract", packages: module, forbidden: []string{"github.com/nats-io/", module + "/manifest", module + "/runtime"}},
		{name: "the test kit", packages: module + "/jetfntest", forbidden: []string{"github.com/nats-io/", module + "/runtime"}},
		{name: "the manifest", packages: module + "/manifest", forbidden: []string{"github.com/nats-io/", module + "/runtime"}},
		{name: "the wire contracts", packages: module + "/events", forbidden: []string{"github.com/nats-io/", module + "/runtime", module + "/functions"}},
		{name: "the wire contract", packages: module + "/wire", forbidden: []string{"github.com/nats-io/", module + "/runtime"}},
		{name: "every function", packages: module + "/functions/...", forbidden: []string{"github.com/nats-io/nats.go/jetstream", "github.com/nats-io/nats.go/micro", module + "/runtime"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", tt.packages).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", tt.packages, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, f := range tt.forbidden {
					if dep == f || strings.HasPrefix(dep, f+"/") || strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f) {
						t.Errorf("%s depends on %s", tt.packages, dep)
					}
				}
			}
		})
	}
}

// TestContractHoldsNoEngine keeps the module root the contract alone: the
// JSON Schema engine (internal/schema) and the YAML decoder
// (internal/yamldecode) are reached through the contract's small API, and
// the root's own files import neither library behind them.
func TestContractHoldsNoEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/jetfn/jetfn").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	engine := []string{"github.com/santhosh-tekuri/jsonschema/", "github.com/go-json-experiment/json"}
	for _, imp := range strings.Fields(string(out)) {
		for _, e := range engine {
			if strings.HasPrefix(imp, e) {
				t.Errorf("the module root imports %s; the engine belongs behind internal/schema", imp)
			}
		}
	}
}

// TestToolsReadTheWire keeps the ops tools and the console on the wire
// contract (package wire) for header names and the status and runs JSON,
// rather than on the runtime that writes them. (They still reach the
// runtime through deploy, whose Follow runs an instance.)
func TestToolsReadTheWire(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`,
		"github.com/jetfn/jetfn/ops/...", "github.com/jetfn/jetfn/console").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if imp == "github.com/jetfn/jetfn/runtime" {
				t.Errorf("%s imports the runtime; read the wire package instead", fields[0])
			}
		}
	}
}
