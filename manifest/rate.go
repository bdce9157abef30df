package manifest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// LeasesBucket is the KV bucket that holds each singleton function's
// lease: which instance pulls its messages now, and until when.
const LeasesBucket = "jetfn-leases"

// RatesBucket is the KV bucket that holds each rate-limited function's
// schedule, shared by all its instances, so a rate limit holds for the
// function, not for each instance.
const RatesBucket = "jetfn-rates"

// RatesTTL is how long RatesBucket keeps a schedule not written to: a rate
// may space its messages no further apart.
const RatesTTL = 24 * time.Hour

// Rate is a rate limit: at most N messages per Per. In a manifest it reads
// "100/s", "5/m", "1/h" or "10/250ms".
type Rate struct {
	N   int
	Per time.Duration
}

// KeyRateKeys is the RatesBucket key (a wildcard) under which function's
// per-key schedules are kept, one for each key: function.key.<hash>.
func KeyRateKeys(function string) string { return function + ".key.*" }

// rateBounds says which rates valid accepts.
const rateBounds = "want at least 1 message per at least 1ms, at most 1,000,000 a second and at least 1 a day"

// valid says whether jetfn can keep the rate: its schedule counts in
// microseconds, and RatesBucket forgets a schedule after a day.
func (r Rate) valid() bool {
	return r.N >= 1 && r.Per >= time.Millisecond && r.Interval() >= time.Microsecond && r.Interval() <= RatesTTL
}

// UnmarshalText reads a rate such as 100/s.
func (r *Rate) UnmarshalText(text []byte) error {
	n, per, ok := strings.Cut(string(text), "/")
	if !ok {
		return fmt.Errorf("want messages per time, such as 100/s, 5/m or 10/250ms")
	}
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return fmt.Errorf("%q is not a whole number of messages", n)
	}
	per = strings.TrimSpace(per)
	if !strings.ContainsAny(per, "0123456789") {
		per = "1" + per // s, m, h: one of them
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		return fmt.Errorf("%q is not a time such as s, m, h or 250ms", per)
	}
	*r = Rate{N: count, Per: d}
	return nil
}

// MarshalText writes the rate as UnmarshalText reads it.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r Rate) String() string {
	per := r.Per.String()
	switch r.Per {
	case time.Second:
		per = "s"
	case time.Minute:
		per = "m"
	case time.Hour:
		per = "h"
	}
	return strconv.Itoa(r.N) + "/" + per
}

// Interval is the time one message of the allowance takes: Per / N.
func (r Rate) Interval() time.Duration { return r.Per / time.Duration(r.N) }
