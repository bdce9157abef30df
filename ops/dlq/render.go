package dlq

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/jetfn/jetfn/internal/textfit"
)

// maxErrorWidth keeps the list readable; `show` prints the whole reason.
const maxErrorWidth = 70

// WriteList prints one row per dead letter, with ages measured at now.
func WriteList(w io.Writer, letters []Letter, now time.Time) error {
	return textfit.Table(w, "no dead letters", "SEQ\tFUNCTION\tORIGINAL SUBJECT\tORIGINAL\tDELIVERIES\tAGE\tERROR", letters,
		func(l Letter) string {
			return fmt.Sprintf("%d\t%s\t%s\t%s:%d\t%d\t%s\t%s", l.Seq, l.Function, l.OriginalSubject, l.OriginalStream,
				l.OriginalSeq, l.NumDelivered, now.Sub(l.Stored).Round(time.Second), textfit.Truncate(l.Error, maxErrorWidth))
		})
}

// WriteLetter prints one dead letter whole: where it came from, why it died,
// its headers and its payload (as text when it is UTF-8, else its size).
func WriteLetter(w io.Writer, l Letter) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "seq:\t%d (%s)\n", l.Seq, l.Subject)
	fmt.Fprintf(tw, "stored:\t%s\n", l.Stored.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "function:\t%s\n", l.Function)
	fmt.Fprintf(tw, "original:\t%s on %s, sequence %d\n", l.OriginalSubject, l.OriginalStream, l.OriginalSeq)
	if l.OriginalMsgID != "" {
		fmt.Fprintf(tw, "original msg id:\t%s\n", l.OriginalMsgID)
	}
	fmt.Fprintf(tw, "deliveries:\t%d\n", l.NumDelivered)
	fmt.Fprintf(tw, "error:\t%s\n", l.Error)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "headers:")
	keys := make([]string, 0, len(l.Header))
	for k := range l.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(l.Header[k], ", "))
	}
	if l.PayloadOmitted > 0 {
		_, err := fmt.Fprintf(w, "payload: left out, %d bytes too large to store with the dead letter; the original is message %d of stream %s\n",
			l.PayloadOmitted, l.OriginalSeq, l.OriginalStream)
		return err
	}
	if !utf8.Valid(l.Data) {
		_, err := fmt.Fprintf(w, "payload: %d bytes, not UTF-8 (use --json)\n", len(l.Data))
		return err
	}
	_, err := fmt.Fprintf(w, "payload (%d bytes):\n%s\n", len(l.Data), l.Data)
	return err
}

// WriteReplay prints one line about a replay or why it was refused.
func WriteReplay(w io.Writer, r Replay, err error) {
	switch {
	case err != nil:
		fmt.Fprintf(w, "%d: not replayed: %v\n", r.Seq, err)
	case r.DryRun:
		fmt.Fprintf(w, "%d: would replay to %s (stream %s) as %s\n", r.Seq, r.Subject, r.Stream, r.MsgID)
	case r.Duplicate:
		fmt.Fprintf(w, "%d: replayed to %s as %s (already stored as %s sequence %d by an earlier attempt); dead letter deleted\n",
			r.Seq, r.Subject, r.MsgID, r.Stream, r.StoredSeq)
	default:
		fmt.Fprintf(w, "%d: replayed to %s as %s (%s sequence %d); dead letter deleted\n",
			r.Seq, r.Subject, r.MsgID, r.Stream, r.StoredSeq)
	}
}

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
