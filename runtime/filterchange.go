package runtime

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A consumer whose filter changes keeps its position: the server does not
// move it back. Narrowed, it passes over what the dropped subject gets
// meanwhile; widened, it never delivers what the added subject stored
// before the change. So jetfn keeps a note on the consumer for each subject
// it drops ("handled through sequence N"), and when a subject is added it
// creates a backfill consumer (backfill.go) that hands the function the
// added subject's messages the main consumer passed over: from just after
// the note, or for a subject the function never read from where its start
// says, up to where the main consumer was at the change. Messages above
// that, and those the old filter already delivered, the backfill acks
// without running the handler.

// Consumer metadata keys of that bookkeeping.
const (
	// handledThroughPrefix + subject: the last stream sequence up to which
	// the subject's messages were handled before the filter dropped it.
	handledThroughPrefix = "jetfn.handled_through."
	// backfillKey names the main consumer's backfill consumer while one
	// runs.
	backfillKey = "jetfn.backfill"
	// On the backfill consumer: the main consumer it catches up for, the
	// first sequence it hands over per subject (JSON), the filter the main
	// consumer delivered before the change (JSON), and the last sequence
	// it hands over (set when it is first bound: the main consumer's
	// position after the change).
	backfillOfKey      = "jetfn.backfill_of"
	backfillFromKey    = "jetfn.backfill_from"
	backfillSkipKey    = "jetfn.backfill_skip"
	backfillThroughKey = "jetfn.backfill_through"
)

// filterChange is how a consumer's filter changes.
type filterChange struct {
	added, removed []string
}

func (c filterChange) empty() bool { return len(c.added) == 0 && len(c.removed) == 0 }

// diffFilters lists the subjects of want that no subject of have covers,
// and those of have that no subject of want covers.
func diffFilters(have, want []string) filterChange {
	var c filterChange
	for _, s := range want {
		if !manifest.CoveredByAny(s, have) {
			c.added = append(c.added, s)
		}
	}
	for _, s := range have {
		if !manifest.CoveredByAny(s, want) {
			c.removed = append(c.removed, s)
		}
	}
	return c
}

// filtersOf is a consumer config's filter, whichever field holds it.
func filtersOf(cfg jetstream.ConsumerConfig) []string {
	if cfg.FilterSubject != "" {
		return append([]string{cfg.FilterSubject}, cfg.FilterSubjects...)
	}
	return cfg.FilterSubjects
}

// backfillPlan is the backfill consumer a widening needs.
type backfillPlan struct {
	// from is, per added subject, the first sequence to hand over; a
	// subject whose start is "new" is not in it.
	from map[string]uint64
	// skip are messages handled already: the main consumer's old filter
	// delivered its subjects', and a dropped subject's note covers its
	// own up to the noted sequence.
	skip []skipRange
	// through is the last sequence handed over when it is known as the
	// backfill is made (a creation's hand-over: just before where the new
	// consumer begins); 0 for a filter change, which fixes it after
	// (changeFilterHeld).
	through uint64
}

// skipRange is a subject's messages from From to Through (0: no bound)
// that the function handled before.
type skipRange struct {
	Subject string `json:"subject"`
	From    uint64 `json:"from,omitempty"`
	Through uint64 `json:"through,omitempty"`
}

// covers reports whether the range holds the message at seq on subject.
func (r skipRange) covers(subject string, seq uint64) bool {
	return seq >= r.From && (r.Through == 0 || seq <= r.Through) && manifest.SubjectCovered(subject, r.Subject)
}

// planFilterChange notes, in meta (the main consumer's new metadata), the
// position of every subject the change drops (delivered: the last stream
// sequence through which the function handled everything, the consumer's
// ack floor), consumes the notes of subjects it
// adds back, and returns the backfill the added subjects need, or nil.
// An added subject inside a noted one resumes after that note; one the
// function never read starts at start (0: not at all, for start new).
func planFilterChange(c filterChange, have []string, meta map[string]string, delivered uint64, start uint64) *backfillPlan {
	for _, s := range c.removed {
		if _, noted := meta[handledThroughPrefix+s]; !noted {
			meta[handledThroughPrefix+s] = strconv.FormatUint(delivered, 10)
		}
	}
	plan := &backfillPlan{from: map[string]uint64{}}
	for _, s := range have {
		plan.skip = append(plan.skip, skipRange{Subject: s})
	}
	notes := handledNotes(meta)
	for _, s := range c.added {
		from, read := uint64(0), false
		for k, through := range notes {
			switch {
			case manifest.SubjectCovered(s, k):
				from, read = max(from, through+1), true
			case manifest.SubjectCovered(k, s):
				plan.skip = append(plan.skip, skipRange{Subject: k, Through: through})
				delete(meta, handledThroughPrefix+k)
			}
		}
		delete(meta, handledThroughPrefix+s)
		if !read {
			from = start
		}
		if from > 0 {
			plan.from[s] = from
		}
	}
	if len(plan.from) == 0 {
		return nil
	}
	return plan
}

// handledNotes are the consumer's handled-through notes by subject.
func handledNotes(meta map[string]string) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range meta {
		subject, ok := strings.CutPrefix(k, handledThroughPrefix)
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			out[subject] = n
		}
	}
	return out
}

// foldBackfill carries an unfinished backfill into the plan of the next
// filter change, so no change loses what it had still to hand over. The
// old backfill handed everything of its subjects up to floor (its ack
// floor); the main consumer delivered them after through. A subject the
// new filter keeps is handed again from floor+1, skipping what the main
// consumer delivered; one it drops is noted as handled through floor.
// plan may be nil (the change itself needs no backfill); the result is
// nil when nothing is left to hand over.
func foldBackfill(plan *backfillPlan, old backfillRange, floor uint64, want []string, have []string, meta map[string]string) *backfillPlan {
	if plan == nil {
		plan = &backfillPlan{from: map[string]uint64{}}
		for _, s := range have {
			plan.skip = append(plan.skip, skipRange{Subject: s})
		}
	}
	for s, from := range old.from {
		resume := max(from, floor+1)
		if !manifest.CoveredByAny(s, want) {
			meta[handledThroughPrefix+s] = strconv.FormatUint(resume-1, 10)
			continue
		}
		if resume > old.through {
			continue // handed over completely
		}
		plan.from[s] = resume
		// The main consumer's old filter held s, so plan.skip says it
		// delivered all of s: only after old.through is that true.
		plan.skip = slices.DeleteFunc(plan.skip, func(r skipRange) bool { return r.Subject == s && r.From == 0 && r.Through == 0 })
		plan.skip = append(plan.skip, skipRange{Subject: s, From: old.through + 1})
	}
	for _, sk := range old.skip {
		if old.through == 0 {
			break // it ended before the first sequence: its skips cover nothing, and Through 0 would cover all
		}
		if sk.Through == 0 || sk.Through > old.through {
			sk.Through = old.through
		}
		plan.skip = append(plan.skip, sk)
	}
	if len(plan.from) == 0 {
		return nil
	}
	return plan
}

// first is the lowest sequence the plan hands over.
func (p *backfillPlan) first() uint64 {
	first := uint64(0)
	for _, seq := range p.from {
		if first == 0 || seq < first {
			first = seq
		}
	}
	return first
}

// subjects are the added subjects the backfill reads, sorted.
func (p *backfillPlan) subjects() []string {
	return slices.Sorted(maps.Keys(p.from))
}

// backfillName is the durable of the backfill consumer that follows prev
// (empty for none): the names alternate between two, so a binding still
// draining the one before cannot pull from its successor, and the
// permissions can name both (manifest.BackfillConsumers).
func backfillName(durable, prev string) string {
	names := manifest.BackfillConsumers(durable)
	if prev == names[0] {
		return names[1]
	}
	return names[0]
}

// config is the backfill consumer named name for f's main consumer: f's
// settings, the added subjects as its filter, starting at the plan's
// first sequence.
func (p *backfillPlan) config(name string, f manifest.FunctionSpec, digest string) (jetstream.ConsumerConfig, error) {
	from, err := json.Marshal(p.from)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	skip, err := json.Marshal(p.skip)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	cfg := consumerConfig(f, digest)
	cfg.Durable = name
	cfg.Description = "jetfn function " + f.Name + ": hands over what a subject filter change passed over"
	cfg.FilterSubject, cfg.FilterSubjects = "", p.subjects()
	if len(cfg.FilterSubjects) == 1 {
		cfg.FilterSubject, cfg.FilterSubjects = cfg.FilterSubjects[0], nil
	}
	cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, p.first()
	cfg.Metadata[backfillOfKey] = f.Durable
	cfg.Metadata[backfillFromKey] = string(from)
	cfg.Metadata[backfillSkipKey] = string(skip)
	if p.through > 0 {
		cfg.Metadata[backfillThroughKey] = strconv.FormatUint(p.through, 10)
	}
	return cfg, nil
}

// backfillRange is what a backfill consumer hands to the function; every
// other message it delivers is acked unhandled.
type backfillRange struct {
	from    map[string]uint64
	skip    []skipRange
	through uint64
}

// readBackfillRange reads the range from a backfill consumer's metadata;
// through is 0 until the backfill was first bound.
func readBackfillRange(meta map[string]string) (backfillRange, error) {
	var r backfillRange
	if err := json.Unmarshal([]byte(meta[backfillFromKey]), &r.from); err != nil {
		return r, fmt.Errorf("reading %s: %w", backfillFromKey, err)
	}
	if err := json.Unmarshal([]byte(meta[backfillSkipKey]), &r.skip); err != nil {
		return r, fmt.Errorf("reading %s: %w", backfillSkipKey, err)
	}
	if t := meta[backfillThroughKey]; t != "" {
		n, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return r, fmt.Errorf("reading %s: %w", backfillThroughKey, err)
		}
		r.through = n
	}
	return r, nil
}

// hands reports whether the message at seq on subject is one the main
// consumer passed over: not above through, not delivered by the old
// filter, and at or after its added subject's first sequence.
func (r backfillRange) hands(subject string, seq uint64) bool {
	if seq > r.through {
		return false
	}
	for _, sk := range r.skip {
		if sk.covers(subject, seq) {
			return false
		}
	}
	for s, from := range r.from {
		if seq >= from && manifest.SubjectCovered(subject, s) {
			return true
		}
	}
	return false
}

// keptMetadata are the keys of jetfn's bookkeeping that an update of the
// consumer's config must carry over.
func keptMetadata(key string) bool {
	return strings.HasPrefix(key, handledThroughPrefix) || key == backfillKey || key == scopeKey
}
