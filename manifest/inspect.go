package manifest

import (
	"slices"

	"github.com/jetfn/jetfn"
)

// Report is everything Inspect found, each problem with its file and line.
type Report struct {
	// Problems refuse the manifest: its YAML, its keys and values,
	// Validate's rules and the functions' config blocks, in line order.
	Problems []*Problem
	// ShortWindows are duplicate windows shorter than twice a redelivery
	// horizon (CheckDuplicateWindows): refusals too, unless the caller
	// accepts the risk (--allow-short-window).
	ShortWindows []*Problem
	// Warnings are OutputStreamWarnings.
	Warnings []string
}

// Inspect runs every check that needs no server on a manifest's text in one
// round, so a typo does not hide the rest: decoding (unknown and repeated
// keys, values of the wrong kind), Validate against functions, their
// config blocks (CheckConfigs) and the duplicate windows. Problems name file
// (empty for text from elsewhere) and their line.
//
// Only a text that is not YAML at all stops it early: the manifest is then
// nil. Otherwise the manifest is decoded as far as it could be, a bad value
// left at its default, and is fit to run only when the report has no
// problems and no short windows.
func Inspect(file string, raw []byte, functions []jetfn.Function) (*Manifest, Report) {
	m, errs := decodeManifest(file, raw)
	if m == nil {
		return nil, Report{Problems: asProblems(errs)}
	}
	names := make([]string, 0, len(functions))
	for _, f := range functions {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	errs = append(errs, m.validate(names)...)
	errs = append(errs, m.checkConfigs(functions)...)
	r := Report{Problems: asProblems(errs), Warnings: append(m.OutputStreamWarnings(), m.ShortWindowsAccepted()...)}
	if !m.AllowShortWindow {
		r.ShortWindows = asProblems(m.shortWindows())
	}
	sortProblems(r.Problems)
	return m, r
}
