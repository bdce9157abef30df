package status

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// writeKeys prints, under the functions, each keyed function's partitions
// as every instance sees them (with the messages waiting for their key's
// turn under keyRateLimit), then every stuck key by name: a key whose
// head message keeps failing holds its partition, and the operator must
// find it without reading logs. Nothing when no function is keyed.
func writeKeys(w io.Writer, instances []Instance, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header, stuckHeader := false, false
	for _, in := range instances {
		s := in.Stats
		if s.Partitions == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "\nKEYED FUNCTION\tINSTANCE\tPARTITIONS\tPER KEY\tKEY RATE\tKEYS ACTIVE\tHELD BY KEY\tOLDEST KEY\tWAITING\tROUTER")
			header = true
		}
		oldest, waiting := "-", "-"
		if s.OldestKey != "" {
			oldest, waiting = s.OldestKey, formatUptime(time.Duration(s.OldestKeyWaitSeconds*float64(time.Second)))
		}
		keyRate := "-"
		if s.KeyRateLimit != "" {
			keyRate = fmt.Sprintf("%s, %d waiting", s.KeyRateLimit, s.KeyRateWaiting)
		}
		router := "-" // the server partitions a subject token's key
		if s.Router != "" {
			router = fmt.Sprintf("%s, %d to copy", s.Router, s.RouterPending)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", in.Function, in.ID, s.Partitions, s.PerKey, keyRate, s.KeysActive,
			s.HeldByKey, oldest, waiting, router)
	}
	writeDebounced(tw, instances)
	for _, in := range instances {
		for _, k := range in.Stats.StuckKeys {
			if !stuckHeader {
				fmt.Fprintln(tw, "\nSTUCK KEY\tFUNCTION\tINSTANCE\tPARTITION\tDELIVERIES\tFAILING FOR\tLAST ERROR")
				stuckHeader = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", k.Key, in.Function, in.ID, k.Partition, k.Deliveries,
				formatUptime(now.Sub(k.Since)), truncate(k.LastError, maxErrorWidth))
		}
	}
	return tw.Flush()
}

// writeDebounced prints each debounced function's period, the input its
// debouncer has not taken yet and the runs come due that wait for the
// handler.
func writeDebounced(tw io.Writer, instances []Instance) {
	header := false
	for _, in := range instances {
		s := in.Stats
		if s.Debounce == "" {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "\nDEBOUNCED FUNCTION\tINSTANCE\tPERIOD\tTO DEBOUNCE\tDUE RUNS")
			header = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", in.Function, in.ID, s.Debounce, s.DebouncePending, s.DueRuns)
	}
}
