package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantOut  string
	}{
		{name: "version says how it was built", args: []string{"version"}, wantCode: 0, wantOut: "jetfn (devel)\nrevision unknown: built without VCS stamping"},
		{name: "help", args: []string{"run", "--help"}, wantCode: 0, wantOut: "Usage: jetfn run"},
		{name: "unknown command", args: []string{"deploy-all"}, wantCode: 2, wantOut: `unknown command "deploy-all"`},
		{name: "missing settings name every variable", args: []string{"run"},
			env: map[string]string{"NATS_URL": "", "MONGO_URI": "", "JETFN_MANIFEST": ""}, wantCode: 2,
			wantOut: "NATS_URL: required"},
		{name: "bad duration names its variable", args: []string{"run"},
			env: map[string]string{"DRAIN_TIMEOUT": "soon"}, wantCode: 2, wantOut: "DRAIN_TIMEOUT: "},
		{name: "bad log level", args: []string{"check", "--manifest", "../../manifests/local.yaml"},
			env: map[string]string{"LOG_LEVEL": "loud"}, wantCode: 2, wantOut: `LOG_LEVEL: "loud" is not`},
		{name: "bad flag", args: []string{"check", "--manifets", "x"}, wantCode: 2, wantOut: "flag provided but not defined"},
		{name: "check passes the local manifest", args: []string{"check", "--manifest", "../../manifests/local.yaml"},
			wantCode: 0, wantOut: "ok (5 streams, 3 functions"},
		{name: "check passes the production manifest", args: []string{"check", "--manifest", "../../manifests/production.yaml"},
			wantCode: 0, wantOut: "ok (4 streams, 2 functions"},
		{name: "check refuses the field report's 2-minute window", args: []string{"check", "--manifest", "testdata/field-report-2m.yaml"},
			wantCode: 1, wantOut: "Set duplicates on TRANSCRIPTION to at least 5m40s"},
		{name: "allow-short-window makes it a warning", args: []string{"check", "--allow-short-window", "--manifest", "testdata/field-report-2m.yaml"},
			wantCode: 0, wantOut: "warning (--allow-short-window)"},
		{name: "permissions help names the deployment flags", args: []string{"permissions", "--help"},
			wantCode: 0, wantOut: "[--deployment NAME] [--prune]"},
		{name: "permissions for a deployment read its key", args: []string{"permissions", "--deployment", "app", "--manifest", "../../manifests/local.yaml"},
			wantCode: 0, wantOut: `"$JS.API.DIRECT.GET.KV_jetfn-manifests.$KV.jetfn-manifests.app"`},
		{name: "permissions refuse a wildcard deployment", args: []string{"permissions", "--deployment", "*", "--manifest", "../../manifests/local.yaml"},
			wantCode: 2, wantOut: "no wildcards"},
		{name: "check lists problems", args: []string{"check", "--manifest", "testdata/bad.yaml"},
			wantCode: 1, wantOut: `unknown function "summarise"`},
		{name: "check names a config typo, its manifest line and the key meant", args: []string{"check", "--manifest", "testdata/config-typo.yaml"},
			wantCode: 1, wantOut: "testdata/config-typo.yaml:45: functions[0] (summarize-session).config.quiett: unknown key; did you mean quiet?"},
		{name: "check refuses config on a function that takes none, in the same run", args: []string{"check", "--manifest", "testdata/config-typo.yaml"},
			wantCode: 1, wantOut: "testdata/config-typo.yaml:62: functions[1] (publish-recording-event).config.retries: unknown key; this block takes no keys"},
		{name: "check names a config value the function refuses and its manifest line", args: []string{"check", "--manifest", "testdata/config-negative.yaml"},
			wantCode: 1, wantOut: "testdata/config-negative.yaml:45: functions[0] (summarize-session).config.quiet: -5s is negative"},
		{name: "deploy refuses a config typo before connecting", args: []string{"deploy", "--manifest", "testdata/config-typo.yaml"},
			env: map[string]string{"NATS_URL": ""}, wantCode: 1, wantOut: "testdata/config-typo.yaml:45: functions[0] (summarize-session).config.quiett: unknown key; did you mean quiet?"},
		{name: "check lists a short window first of every stage's problems", args: []string{"check", "--manifest", "testdata/every-stage.yaml"},
			wantCode: 1, wantOut: "testdata/every-stage.yaml:9: streams[0] (TRANSCRIPTION).duplicates: duplicate window shorter than the redelivery horizon"},
		{name: "check lists a rule in the same run", args: []string{"check", "--manifest", "testdata/every-stage.yaml"},
			wantCode: 1, wantOut: "testdata/every-stage.yaml:14: functions[0] (summarize-session).version: \"v1\" is not a SemVer version"},
		{name: "check names the key a typo meant, in the same run", args: []string{"check", "--manifest", "testdata/every-stage.yaml"},
			wantCode: 1, wantOut: "testdata/every-stage.yaml:17: functions[0] (summarize-session).maxDelivery: unknown key; did you mean maxDeliver?\n" +
				"testdata/every-stage.yaml:18: functions[0] (summarize-session).ackWait: 6 has no unit; durations need a unit: 6s\n"},
		{name: "check lists a config typo in the same run", args: []string{"check", "--manifest", "testdata/every-stage.yaml"},
			wantCode: 1, wantOut: "testdata/every-stage.yaml:24: functions[0] (summarize-session).config.quiett: unknown key; did you mean quiet?\n" +
				"testdata/every-stage.yaml: 5 problems\n"},
		{name: "check reports a bad indent at its line", args: []string{"check", "--manifest", "testdata/bad-indent.yaml"},
			wantCode: 1, wantOut: "testdata/bad-indent.yaml:4: not valid YAML: did not find expected '-' indicator (check this line's indentation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			code := realMain(context.Background(), tt.args, &out, &out)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, out.String(), tt.wantCode, tt.wantOut)
			}
		})
	}
}
