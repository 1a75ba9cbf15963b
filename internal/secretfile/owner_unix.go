//go:build unix

package secretfile

import (
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// groupReadsForService reports whether the file is owned by another user
// and its group is one of this process's groups.
func groupReadsForService(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Getuid() {
		return false
	}
	gid := int(st.Gid)
	if gid == os.Getgid() {
		return true
	}
	groups, err := os.Getgroups()
	return err == nil && slices.Contains(groups, gid)
}
