package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the KV bucket that records replays, one key per dead letter.
const Bucket = "jetfn-dlq-replays"

// Replay states: a claim is taken before the publish, replayed once the
// stream acknowledged it.
const (
	StateClaimed  = "claimed"
	StateReplayed = "replayed"
)

// Record is what the bucket keeps about one dead letter's replay.
type Record struct {
	DeadLetter string    `json:"dead_letter"` // <stream>:<sequence> of the dead letter
	Subject    string    `json:"subject"`     // where the replay went
	MsgID      string    `json:"msg_id"`
	Attempt    uint64    `json:"attempt"`
	State      string    `json:"state"`
	StoredSeq  uint64    `json:"stored_seq,omitempty"` // the replay's sequence on the original stream
	At         time.Time `json:"at"`
	revision   uint64
}

// recordKey is <stream>.<sequence>: KV keys cannot hold the colon of the
// dead letter's own <stream>:<sequence> ID, and a stream name cannot hold a
// dot, so the key is as unique.
func recordKey(stream string, seq uint64) string {
	return stream + "." + strconv.FormatUint(seq, 10)
}

// records is the replay bucket; a nil kv is a bucket that does not exist
// yet, which holds no records.
type records struct{ kv jetstream.KeyValue }

// openRecords looks up the bucket and, when create is set, creates it with
// the dead-letter stream's replication, since it guards the same messages.
func openRecords(ctx context.Context, js jetstream.JetStream, dl jetstream.Stream, create bool) (records, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil || !errors.Is(err, jetstream.ErrBucketNotFound) {
		if err != nil {
			return records{}, fmt.Errorf("opening KV bucket %s: %w", Bucket, err)
		}
		return records{kv: kv}, nil
	}
	if !create {
		return records{}, nil
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "jetfn dead-letter replays, by <dead-letter stream>.<sequence>",
		Replicas:    dl.CachedInfo().Config.Replicas,
		Storage:     jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, Bucket)
	}
	if err != nil {
		return records{}, fmt.Errorf("creating KV bucket %s: %w", Bucket, err)
	}
	return records{kv: kv}, nil
}

// get returns the record under key, or nil.
func (r records) get(ctx context.Context, key string) (*Record, error) {
	if r.kv == nil {
		return nil, nil
	}
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading replay record %s: %w", key, err)
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("decoding replay record %s: %w", key, err)
	}
	rec.revision = e.Revision()
	return &rec, nil
}

// put stores rec only if the key is still as it was read (absent when
// prev is nil, else at prev's revision), and returns the stored record.
func (r records) put(ctx context.Context, key string, prev *Record, rec Record) (*Record, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var rev uint64
	if prev == nil {
		rev, err = r.kv.Create(ctx, key, data)
	} else {
		rev, err = r.kv.Update(ctx, key, data, prev.revision)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return nil, fmt.Errorf("%s: %w", key, ErrReplayConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("writing replay record %s: %w", key, err)
	}
	rec.revision = rev
	return &rec, nil
}
