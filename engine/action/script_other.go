//go:build !unix

package action

import "os/exec"

// killProcessGroup leaves the default: canceling the run kills the program.
func killProcessGroup(*exec.Cmd) {}
