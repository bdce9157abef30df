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
// (Inspect reports the same problems as file:line: key: problem.) It
// touches no server. A name no function has, a function without a
// CheckConfig and a remote function are skipped: the first and the last
// are Validate's to report.
func CheckConfigs(m *Manifest, functions []jetfn.Function) error {
	var errs []error
	m.eachConfigProblem(functions, func(i int, spec FunctionSpec, err error) {
		errs = append(errs, fmt.Errorf("functions[%d] (%s).config: %w", i, spec.Name, err))
	})
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n%w", ErrInvalidConfig, errors.Join(errs...))
}

// checkConfigs is CheckConfigs' problems as Problems, for Inspect.
func (m *Manifest) checkConfigs(functions []jetfn.Function) []error {
	var errs []error
	m.eachConfigProblem(functions, func(i int, spec FunctionSpec, err error) {
		errs = append(errs, m.configProblem(at("functions").Index(i, spec.Name).Key("config"), err))
	})
	return errs
}

// eachConfigProblem calls fn with every problem the functions' checks find
// in their config blocks.
func (m *Manifest) eachConfigProblem(functions []jetfn.Function, fn func(i int, spec FunctionSpec, err error)) {
	checks := make(map[string]func(jetfn.Config) error, len(functions))
	for _, f := range functions {
		if f.CheckConfig != nil {
			checks[f.Name] = f.CheckConfig
		}
	}
	for i, spec := range m.Functions {
		check, ok := checks[spec.Name]
		if !ok || spec.IsRemote() {
			continue
		}
		for _, p := range problems.Split(check(spec.Config)) {
			fn(i, spec, p)
		}
	}
}

// configProblem places one problem of a config block: a *jetfn.ConfigError
// carries its key and line (none when a default broke a rule: then the
// block's line); any other error is the block's.
func (m *Manifest) configProblem(cat place, err error) *Problem {
	var ce *jetfn.ConfigError
	if !errors.As(err, &ce) {
		return m.problem(cat, err)
	}
	kat := cat
	if ce.Key != "" {
		kat = cat.Key(ce.Key)
	}
	line := ce.Line
	if line == 0 {
		line = m.lineOf(cat.Path)
	}
	return m.problemAt(kat, line, ce.Err)
}
