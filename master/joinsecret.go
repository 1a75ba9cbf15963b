package master

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/squallhq/squall/internal/secretfile"
	"github.com/squallhq/squall/master/store"
)

// JoinSecretFile is the name of the join secret a node writes into its
// data dir when it bootstraps a cluster (or restarts with state) and no
// Config.JoinTokenFile is configured. Joining nodes read a copy of it
// with Config.JoinTokenFile.
const JoinSecretFile = "join.token"

// minJoinToken is the shortest join secret accepted.
const minJoinToken = 16

// joinSecret is the cluster's join secret as this node knows it.
type joinSecret struct {
	secret []byte            // sent by this node when it joins
	sum    [sha256.Size]byte // compared, in constant time, with the sum of a request's
}

func newJoinSecret(b []byte) *joinSecret {
	return &joinSecret{secret: b, sum: sha256.Sum256(b)}
}

// loadJoinToken reads the join secret: the file's bytes, surrounding
// whitespace removed; at least 16 bytes, readable by its owner only
// (secretfile.Check).
func loadJoinToken(path string) ([]byte, error) {
	b, err := secretfile.Read(path, maxJoinBody)
	if err != nil {
		return nil, fmt.Errorf("read join token (--join-token-file, SQUALL_JOIN_TOKEN_FILE): %w", err)
	}
	if len(b) < minJoinToken {
		return nil, fmt.Errorf("join token %s (--join-token-file, SQUALL_JOIN_TOKEN_FILE): %d bytes, want at least %d", path, len(b), minJoinToken)
	}
	return b, nil
}

// dataDirJoinSecret returns the join secret of a node configured without
// Config.JoinTokenFile: the one in its data dir (JoinSecretFile), else a
// new one written there when the node bootstraps a cluster or restarts
// with raft state (a cluster formed before joins were always
// authenticated). A node that is about to join has no way to make up
// the cluster's secret: that is an error saying where to find it.
func (s *Server) dataDirJoinSecret() (*joinSecret, error) {
	path := filepath.Join(s.cfg.DataDir, JoinSecretFile)
	b, err := loadJoinToken(path)
	if err == nil {
		s.logger.Info("join secret read from the data dir", keyPath, path)
		return newJoinSecret(b), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	existing, err := store.HasState(s.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if !existing && !s.cfg.Bootstrap {
		return nil, fmt.Errorf("joining a cluster needs its join secret: give the cluster's secret file with --join-token-file (SQUALL_JOIN_TOKEN_FILE), mode 0600: the file the cluster's first node was given with --join-token-file, or, if it had none, the %s it wrote in its data dir (--data-dir)", JoinSecretFile)
	}
	b, err = writeJoinSecret(s.cfg.DataDir, path)
	if err != nil {
		return nil, err
	}
	if existing {
		s.logger.Warn("no join secret configured for this existing member: generated one; every member must use the same secret, see docs/operations.md (upgrading)", keyPath, path)
	} else {
		s.logger.Info("generated the cluster's join secret: nodes joining this cluster need a copy of this file (--join-token-file)", keyPath, path)
	}
	return newJoinSecret(b), nil
}

// writeJoinSecret writes a new random secret (32 bytes, hex) to path,
// mode 0600, refusing to replace an existing file.
func writeJoinSecret(dir, path string) ([]byte, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate join secret: %w", err)
	}
	b := []byte(hex.EncodeToString(raw))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("generate join secret: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("generate join secret: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return nil, fmt.Errorf("generate join secret %s: %w", path, err)
	}
	return b, nil
}
