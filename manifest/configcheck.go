package manifest

import (
	"errors"
	"fmt"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/problems"
)

// CheckConfigs runs the CheckConfig of every function m binds on its
// config block, so `jetfn check`, deploy and a live Apply refuse a typo or a
// bad value that would otherwise surface only when the constructor runs. It
// reports every problem at once (ErrInvalidConfig), each prefixed with the
// function like Validate's problems and carrying its manifest line:
//
//	functions[0] (summarize-session).config: line 45: quiett: unknown key; did you mean quiet?
//
// It touches no server. A name no function has, and a function without a
// CheckConfig, are skipped: the first is Validate's to report.
func CheckConfigs(m *Manifest, functions []jetfn.Function) error {
	checks := make(map[string]func(jetfn.Config) error, len(functions))
	for _, f := range functions {
		if f.CheckConfig != nil {
			checks[f.Name] = f.CheckConfig
		}
	}
	var errs []error
	for i, spec := range m.Functions {
		check, ok := checks[spec.Name]
		if !ok {
			continue
		}
		for _, p := range problems.Split(check(spec.Config)) {
			errs = append(errs, fmt.Errorf("functions[%d] (%s).config: %w", i, spec.Name, p))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n%w", ErrInvalidConfig, errors.Join(errs...))
}
