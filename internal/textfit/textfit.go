// Package textfit fits text into the columns of a terminal table or a web
// page, counting runes rather than bytes so a name in any script is cut
// between characters.
package textfit

// Truncate is s cut to at most n runes, its last one an ellipsis when it
// was cut.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
