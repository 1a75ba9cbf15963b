//go:build !unix

package secretfile

import "io/fs"

func groupReadsForService(fs.FileInfo) bool { return false }
