// Package manifest is the deployable description of a jetfn runtime: the
// streams it keeps and the functions it binds, parsed from YAML (Load,
// Parse), checked without a server (Validate, CheckConfigs,
// CheckDuplicateWindows, or Inspect for all of them in one round), compared
// between revisions (PlanChange) and turned into the NATS permissions a
// runtime needs (Permissions).
//
// Every problem is a *Problem that names the key and, for a parsed
// manifest, its line (and file): decoding walks the YAML tree key by key
// instead of stopping at yaml.v3's first strict error, so a typo does not
// hide the problems after it.
//
// It knows no NATS client: package runtime turns a Manifest into streams,
// consumers and bindings. manifest.schema.json in manifests/ is the same
// contract for editors, kept in agreement by a test.
package manifest
