package testkit

import "syscall"

// procAttr makes the kernel SIGKILL a child when the process that started
// it dies, so a harness killed by `go test -timeout` (which runs no
// Cleanup) or by SIGKILL leaves no nats-server or jetfn behind. The signal
// follows the thread that forked the child; Go keeps its threads for the
// life of the process unless a goroutine exits while locked to one, which
// no harness does.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
