//go:build !linux

package robustness

import "syscall"

// procAttr is nil where the kernel cannot kill the masters with their
// test process: the test's cleanup kills them.
func procAttr() *syscall.SysProcAttr { return nil }
