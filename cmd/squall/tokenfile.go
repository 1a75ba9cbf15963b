package main

import (
	"fmt"

	"github.com/squallhq/squall/internal/secretfile"
)

// maxTokenFile bounds the size of an API token file.
const maxTokenFile = 64 << 10

// readTokenFile reads the API token file given by --flag: one token,
// surrounding white space trimmed. It refuses, as every secret file
// (internal/secretfile), a file that group or others may read, with the
// mode and the chmod to run, and an empty file.
func readTokenFile(flag, path string) (string, error) {
	b, err := secretfile.Read(path, maxTokenFile)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flag, err)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("--%s: %s is empty", flag, path)
	}
	return string(b), nil
}
