package robustness

import "syscall"

// procAttr makes the kernel SIGKILL a master when the test process dies
// (a test binary killed on timeout runs no cleanup), so that no master
// outlives its run.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
