// Package scheduledst tests a schedule across a daylight-saving change on
// a real embedded server. It needs a process of its own: the test makes a
// time zone whose clock falls back ten seconds a few seconds from now, and
// points ZONEINFO at it before anything in the process loads a zone (Go
// reads ZONEINFO once).
package scheduledst

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// zoneName is the made-up zone: UTC+10s until fallBack, UTC after it, so
// its local seconds from fallBack-10s to fallBack happen twice.
const zoneName = "JetfnFallBack"

var (
	fallBack time.Time
	// tickSecond is the local second of the pattern: the one the clock
	// shows 3s before fallBack and again 7s after it.
	tickSecond int
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zoneinfo")
	if err != nil {
		panic(err)
	}
	// Soon, but after the runtime has started: local time is UTC+10s
	// before it, so 3s before it the clock shows the second it shows
	// again 7s after it.
	fallBack = time.Now().UTC().Add(15 * time.Second).Truncate(time.Second)
	tickSecond = fallBack.Add(7 * time.Second).Second()
	if err := os.WriteFile(filepath.Join(dir, zoneName), tzif(fallBack), 0o600); err != nil {
		panic(err)
	}
	os.Setenv("ZONEINFO", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tzif is a version 1 TZif file (RFC 8536) with two zones, +10s and UTC,
// and one transition between them at at.
func tzif(at time.Time) []byte {
	var b bytes.Buffer
	b.WriteString("TZif")
	b.Write(make([]byte, 16)) // version 1, then 15 unused bytes
	for _, n := range []uint32{0, 0, 0, 1, 2, 8} {
		binary.Write(&b, binary.BigEndian, n) // isut, isstd, leap, transitions, types, designation bytes
	}
	binary.Write(&b, binary.BigEndian, int32(at.Unix()))
	b.WriteByte(1) // the transition goes to type 1
	for _, t := range []struct {
		offset int32
		name   byte
	}{{10, 0}, {0, 4}} {
		binary.Write(&b, binary.BigEndian, t.offset)
		b.Write([]byte{0, t.name}) // not DST, designation index
	}
	b.WriteString("JMP\x00STD\x00")
	return b.Bytes()
}

// TestCronAcrossAFallBack: a cron tick at a local time that happens twice
// because the clock falls back runs twice; the pattern "S * * * * *"
// (second S of every minute, local) ticks once a minute otherwise, and
// here twice within about ten seconds.
func TestCronAcrossAFallBack(t *testing.T) {
	loc, err := time.LoadLocation(zoneName)
	if err != nil {
		t.Fatal(err)
	}
	if before, after := fallBack.Add(-3*time.Second).In(loc), fallBack.Add(7*time.Second).In(loc); before.Second() != tickSecond || after.Second() != tickSecond {
		t.Fatalf("the made-up zone reads %s and %s around the fall-back, want second %d twice", before, after, tickSecond)
	}
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	m, err := manifest.Parse([]byte(`
streams:
  - name: TICKS
    subjects: ["tick.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: ticker
    version: 1.0.0
    stream: TICKS
    subject: tick.now
    schedule: {cron: "` + strconv.Itoa(tickSecond) + ` * * * * *", timeZone: ` + zoneName + `}
`))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ticks []time.Time
	ticker := jetfn.Function{Name: "ticker", New: func(jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(_ context.Context, msg jetfn.Msg) error {
			mu.Lock()
			defer mu.Unlock()
			ticks = append(ticks, msg.Published)
			return nil
		}), nil
	}}
	rt, err := runtime.New(nc, m, []jetfn.Function{ticker})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	t.Logf("the clock falls back 10s at %s", fallBack.Format(time.RFC3339))
	var got []time.Time
	runtimetest.Eventually(t, time.Until(fallBack)+30*time.Second, "the ticks around the fall-back", func() bool {
		mu.Lock()
		defer mu.Unlock()
		got = nil
		for _, tick := range ticks {
			if tick.After(fallBack.Add(-8*time.Second)) && tick.Before(fallBack.Add(12*time.Second)) {
				got = append(got, tick)
			}
		}
		return len(got) >= 2
	})
	for _, tick := range got {
		if local := tick.In(loc); local.Second() != tickSecond {
			t.Errorf("tick stored at local %s, want second %d", local.Format(time.RFC3339Nano), tickSecond)
		}
	}
	if gap := got[1].Sub(got[0]); gap < 8*time.Second || gap > 12*time.Second {
		t.Fatalf("ticks %s apart, want the local second %d twice, about 10s apart", gap, tickSecond)
	}
}
