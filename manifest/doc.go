// Package manifest is the deployable description of a jetfn runtime: the
// streams it keeps and the functions it binds, parsed from YAML (Load,
// Parse), checked without a server (Validate, CheckConfigs,
// CheckDuplicateWindows), compared between revisions (PlanChange) and turned
// into the NATS permissions a runtime needs (Permissions).
//
// It knows no NATS client: package runtime turns a Manifest into streams,
// consumers and bindings. manifest.schema.json in manifests/ is the same
// contract for editors, kept in agreement by a test.
package manifest
