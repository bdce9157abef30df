//go:build !linux

package testkit

import "syscall"

// procAttr sets nothing where the kernel cannot tie a child's life to its
// parent's: Cleanup stops the children.
func procAttr() *syscall.SysProcAttr { return nil }
