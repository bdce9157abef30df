package textfit

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Table writes a terminal table: header, then one line per item as row
// renders it, columns tab-separated in both and aligned two spaces apart.
// With no items it writes none alone, a sentence rather than an empty
// table.
func Table[T any](w io.Writer, none, header string, items []T, row func(T) string) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, none)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}
