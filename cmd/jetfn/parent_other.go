//go:build !linux

package main

// exitWithParent does nothing off Linux, which has no PR_SET_PDEATHSIG:
// there, stop a `jetfn dev` that go-task started by signalling its process
// group, as Ctrl-C in a terminal does.
func exitWithParent() error { return nil }
