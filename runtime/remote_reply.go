package runtime

// The reply half of the remote contract: what a micro endpoint's reply
// means for the delivery. The table in docs/remote.md is the reference.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

// remoteOutput is one output a reply asks jetfn to publish.
type remoteOutput struct {
	subject string
	data    []byte
	key     string
	// at, when set, is when the output is to be published (a delayed
	// output, delayed.go).
	at time.Time
}

// replyBody is a success reply's JSON. Members are matched exactly and an
// unknown one is refused: a misspelt "output" would otherwise ack the
// message and lose its outputs without a word.
type replyBody struct {
	Outputs []replyOutput `json:"outputs"`
}

type replyOutput struct {
	Subject    string         `json:"subject"`
	Data       jsontext.Value `json:"data"`
	DataBase64 *string        `json:"dataBase64"`
	Key        string         `json:"key"`
	// At (RFC 3339) or After (a Go duration, from when jetfn reads the
	// reply) delay the output.
	At    string `json:"at"`
	After string `json:"after"`
}

// readReply maps a reply to the outputs to publish, or to the error that
// settles the delivery: a micro error reply by its code (replyError, which
// clamps a Retry-After to maxRetryAfter), a body that breaks the contract
// as Malformed, since asking the remote again gives the same answer. The
// whole reply is checked before anything is published, so a bad third
// output publishes nothing.
func readReply(reply *nats.Msg, subject string, declared []string, maxRetryAfter time.Duration) ([]remoteOutput, error) {
	if err := replyError(reply, subject, maxRetryAfter); err != nil {
		return nil, err
	}
	if len(reply.Data) == 0 {
		return nil, nil
	}
	outputs, err := decodeOutputs(reply.Data, declared)
	if err != nil {
		return nil, jetfn.Malformed(fmt.Errorf("remote %s broke the reply contract: %w", subject, err))
	}
	return outputs, nil
}

// replyError is nil for a reply without Nats-Service-Error-Code. Otherwise:
// 400-499 except 408 and 429 is permanent (dead letter with the
// description); 429 and 503 with a Retry-After wait that long, at most
// maxRetryAfter; anything else is a failure retried on the backoff.
func replyError(reply *nats.Msg, subject string, maxRetryAfter time.Duration) error {
	code := reply.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	err := fmt.Errorf("remote %s replied %s: %s", subject, code, reply.Header.Get(micro.ErrorHeader))
	n, convErr := strconv.Atoi(strings.TrimSpace(code))
	if convErr != nil {
		return err
	}
	switch {
	case n == 429 || n == 503:
		return retryAfter(err, reply.Header.Get(wire.HeaderRetryAfter), maxRetryAfter)
	case n >= 400 && n <= 499 && n != 408:
		return jetfn.Permanent(err)
	}
	return err
}

// retryAfter is err with the delay a Retry-After header asks for: none
// (the backoff applies) without a readable one, and at most maxRetryAfter,
// which the duplicate-window horizon counts; a clamp is said in the error,
// so the log line and a dead letter's reason show it.
func retryAfter(err error, raw string, maxRetryAfter time.Duration) error {
	if raw == "" {
		return err
	}
	secs, ok := parseRetryAfter(raw)
	if !ok {
		return fmt.Errorf("%w (Retry-After %q is not a number of seconds; the backoff applies)", err, raw)
	}
	if secs > maxRetryAfter.Seconds() {
		return jetfn.RetryAfter(fmt.Errorf("%w (Retry-After %s s clamped to maxRetryAfter %s)", err, strings.TrimSpace(raw),
			maxRetryAfter), maxRetryAfter)
	}
	return jetfn.RetryAfter(err, time.Duration(secs*float64(time.Second)))
}

// parseRetryAfter reads a whole or decimal number of seconds. One too large
// for a float64 reads as +Inf, which the caller clamps like any delay past
// its bound.
func parseRetryAfter(raw string) (float64, bool) {
	secs, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(secs) || secs < 0 {
		return 0, false
	}
	return secs, true
}

// errNotReplyJSON is a success reply whose body is not an object with an
// outputs list.
var errNotReplyJSON = errors.New(`the body is not {"outputs":[{"subject":…,"data":…,"key":…}]}`)

// decodeOutputs reads and checks a success reply's outputs.
func decodeOutputs(body []byte, declared []string) ([]remoteOutput, error) {
	if jsontext.Value(body).Kind() != '{' {
		return nil, errNotReplyJSON
	}
	var b replyBody
	if err := json.Unmarshal(body, &b, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotReplyJSON, err)
	}
	out := make([]remoteOutput, 0, len(b.Outputs))
	var errs []error
	for i, o := range b.Outputs {
		ro, err := o.check(declared)
		if err != nil {
			errs = append(errs, fmt.Errorf("outputs[%d]: %w", i, err))
			continue
		}
		out = append(out, ro)
	}
	return out, errors.Join(errs...)
}

// check is the output as jetfn publishes it: data is the JSON value's text
// (compacted), or the decoded dataBase64.
func (o replyOutput) check(declared []string) (remoteOutput, error) {
	var errs []error
	switch {
	case o.Subject == "":
		errs = append(errs, errors.New("no subject"))
	case !manifest.IsLiteralSubject(o.Subject):
		errs = append(errs, fmt.Errorf("subject %q is not one to publish to (a wildcard, an empty token or whitespace)", o.Subject))
	case !manifest.CoveredByAny(o.Subject, declared):
		errs = append(errs, fmt.Errorf("%w: %q is not one of the function's outputs %v", jetfn.ErrUndeclaredOutput, o.Subject, declared))
	}
	switch {
	case o.Key == "":
		errs = append(errs, fmt.Errorf("%w: an output needs a key derived from the input (Jetfn-Msg-Id)", jetfn.ErrNoOutputKey))
	case hasControl(o.Key):
		errs = append(errs, errors.New("key holds a control character"))
	}
	data, err := o.payload()
	if err != nil {
		errs = append(errs, err)
	}
	at, err := o.when(time.Now())
	if err != nil {
		errs = append(errs, err)
	}
	return remoteOutput{subject: o.Subject, data: data, key: o.Key, at: at}, errors.Join(errs...)
}

// when is a delayed output's time (zero: publish now).
func (o replyOutput) when(now time.Time) (time.Time, error) {
	switch {
	case o.At != "" && o.After != "":
		return time.Time{}, errors.New("both at and after; give one")
	case o.At != "":
		at, err := time.Parse(time.RFC3339Nano, o.At)
		if err != nil {
			return time.Time{}, fmt.Errorf("at %q is not an RFC 3339 time", o.At)
		}
		return at, nil
	case o.After != "":
		d, err := time.ParseDuration(o.After)
		if err != nil || d < 0 {
			return time.Time{}, fmt.Errorf("after %q is not a duration such as 90s or 24h", o.After)
		}
		return now.Add(d), nil
	}
	return time.Time{}, nil
}

func (o replyOutput) payload() ([]byte, error) {
	switch {
	case o.Data != nil && o.DataBase64 != nil:
		return nil, errors.New("both data and dataBase64; give one")
	case o.DataBase64 != nil:
		data, err := base64.StdEncoding.DecodeString(*o.DataBase64)
		if err != nil {
			return nil, fmt.Errorf("dataBase64 is not standard base64: %w", err)
		}
		return data, nil
	case o.Data != nil:
		v := o.Data.Clone()
		if err := v.Compact(); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, errors.New("neither data nor dataBase64")
}
