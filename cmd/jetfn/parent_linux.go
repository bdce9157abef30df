package main

import (
	"fmt"
	"os"
	"syscall"
)

// exitWithParent asks the kernel to send this process SIGTERM when its
// parent exits, which main's signal context turns into a drain and exit 0.
// go-task forwards no signal to the commands it runs: it catches SIGINT and
// SIGTERM, prints "task: Signal received" and waits, and exits on the third
// signal leaving its children behind, as it does when it is killed. With
// this, `jetfn dev` under `go tool task run` still frees its ports then.
//
// The kernel sends the signal when the thread that started this process
// exits; the go runtime keeps its threads for the life of the process.
func exitWithParent() error {
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return fmt.Errorf("--exit-with-parent: %w", errno)
	}
	if os.Getppid() != parent { // the parent exited before the request took effect
		return syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
	return nil
}
