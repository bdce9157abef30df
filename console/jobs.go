package console

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// maxJobs is how many finished replays the console remembers for their
// progress pages.
const maxJobs = 50

// job is a replay the console runs in the background, and its progress.
type job struct {
	ID      string
	Title   string
	User    string
	Started time.Time

	mu       sync.Mutex
	total    int
	replayed int
	failed   int
	lines    []jobLine
	finished time.Time
}

// jobLine is what happened to one dead letter.
type jobLine struct {
	Seq  uint64
	OK   bool
	Text string
}

// jobView is a consistent copy of a job's progress, for a page.
type jobView struct {
	ID, Title, User         string
	Started, Finished       time.Time
	Total, Replayed, Failed int
	Lines                   []jobLine
}

func (j *job) report(seq uint64, ok bool, text string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, jobLine{Seq: seq, OK: ok, Text: text})
	if ok {
		j.replayed++
	} else {
		j.failed++
	}
}

func (j *job) finish() {
	j.mu.Lock()
	j.finished = time.Now()
	j.mu.Unlock()
}

func (j *job) view() jobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	return jobView{ID: j.ID, Title: j.Title, User: j.User, Started: j.Started, Finished: j.finished,
		Total: j.total, Replayed: j.replayed, Failed: j.failed, Lines: append([]jobLine(nil), j.lines...)}
}

// Done is how many dead letters the job has dealt with.
func (v jobView) Done() int { return v.Replayed + v.Failed }

// jobs are the replays started since the console started, the last
// maxJobs of them.
type jobs struct {
	mu    sync.Mutex
	byID  map[string]*job
	order []string
}

func newJobs() *jobs { return &jobs{byID: map[string]*job{}} }

func (js *jobs) start(title, user string, total int) *job {
	var b [8]byte
	_, _ = rand.Read(b[:])
	j := &job{ID: hex.EncodeToString(b[:]), Title: title, User: user, Started: time.Now(), total: total}
	js.mu.Lock()
	defer js.mu.Unlock()
	js.byID[j.ID] = j
	js.order = append(js.order, j.ID)
	if len(js.order) > maxJobs {
		delete(js.byID, js.order[0])
		js.order = js.order[1:]
	}
	return j
}

func (js *jobs) get(id string) (*job, bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j, ok := js.byID[id]
	return j, ok
}
