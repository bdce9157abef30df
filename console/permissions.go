package console

import (
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/dlq"
)

// PermissionOptions shape the console's permissions.
type PermissionOptions struct {
	// InboxPrefix is the connection's inbox prefix (default _INBOX).
	InboxPrefix string
	// Deployment is the key of the manifests bucket the deploys page shows.
	Deployment string
	// Actions adds what replaying dead letters and rolling back need; the
	// read-only set cannot change anything.
	Actions bool
}

// Permissions are the NATS rights a console needs for the functions of m,
// read-only unless o.Actions: every subject is one the console's code
// calls (tested in permissions_test.go against a server user that has
// exactly these).
func Permissions(m *manifest.Manifest, o PermissionOptions) manifest.Permissions {
	inbox := o.InboxPrefix
	if inbox == "" {
		inbox = "_INBOX"
	}
	dl := m.DeadLetter.Stream
	pub := []string{
		"$SRV.STATS", // the functions page (ops/status)
		// The dead letters (ops/dlq: message gets by sequence; a stream
		// with allow_direct answers on DIRECT.GET instead).
		"$JS.API.STREAM.INFO." + dl, "$JS.API.STREAM.MSG.GET." + dl, "$JS.API.DIRECT.GET." + dl,
		// A replay's confirmation is its dry run: the replay record, and
		// the check that the original subject is still the stream's.
		"$JS.API.STREAM.INFO.KV_" + dlq.Bucket, "$JS.API.DIRECT.GET.KV_" + dlq.Bucket + ".>", "$JS.API.STREAM.NAMES",
	}
	pub = append(pub, manifestHistory(o.Deployment)...)
	for _, f := range m.Functions {
		pub = append(pub, manifest.RunsSubject(f.Name), "$JS.API.CONSUMER.INFO."+f.Stream+"."+f.Durable)
	}
	if o.Actions {
		pub = append(pub, actionSubjects(m, o.Deployment)...)
	}
	return manifest.Permissions{Publish: unique(pub), Subscribe: []string{inbox + ".>"}}
}

// manifestHistory reads a deployment's revisions: the bucket's info, and
// an ordered consumer on the key (created, then deleted; the client names
// it at random).
func manifestHistory(deployment string) []string {
	stream, subject := "KV_"+manifest.ManifestBucket, "$KV."+manifest.ManifestBucket+"."+deployment
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".*." + subject,
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
	}
}

// actionSubjects are what the actions add: a replay republishes to the
// original subject (one of a function's filter subjects), records itself in
// the replay bucket (created by the first replay) and deletes the dead
// letter; a rollback puts the previous manifest as a new revision and
// records which revision it restored.
func actionSubjects(m *manifest.Manifest, deployment string) []string {
	bucket := "KV_" + dlq.Bucket
	out := []string{
		"$JS.API.STREAM.MSG.DELETE." + m.DeadLetter.Stream,
		"$JS.API.INFO", "$JS.API.STREAM.CREATE." + bucket, "$KV." + dlq.Bucket + ".>",
		"$KV." + manifest.ManifestBucket + "." + deployment,
	}
	out = append(out, rollbackRecord(deployment)...)
	for _, f := range m.Functions {
		out = append(out, f.FilterSubjects()...)
	}
	return out
}

// rollbackRecord reads and writes the record of which revision each
// rollback restored (deploy.Rollback), so a second rollback goes on back.
func rollbackRecord(deployment string) []string {
	key := "$KV." + manifest.ManifestBucket + "._rollbacks." + deployment
	return []string{key, "$JS.API.DIRECT.GET.KV_" + manifest.ManifestBucket + "." + key}
}

func unique(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
