//go:build unix

package action

import (
	"os/exec"
	"syscall"
)

// killProcessGroup runs the program in a process group of its own and, when
// the run is canceled, kills the whole group: a shell script's children die
// with it instead of holding its output open.
func killProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
