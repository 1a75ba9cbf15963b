package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/internal/secretfile"
)

// Limits of credentials (tokens and secrets).
const (
	// MaxCredentials bounds the entries of "tokens" and of "secrets".
	MaxCredentials = 16
	// MaxSecretFileSize bounds a token or secret file.
	MaxSecretFileSize = 64 << 10
)

// ErrSecretFileMode reports a token or secret file that users other than
// its owner may read (the rule of every secret file: see
// internal/secretfile).
var ErrSecretFileMode = secretfile.ErrMode

// Source resolves the "file" and "env" entries of tokens and secrets.
type Source struct {
	// Dir is the directory relative "file" paths start from (the webhook
	// directory for [LoadDir]); "" is the working directory.
	Dir string
	// LookupEnv reads an environment variable; nil reads none (an "env"
	// entry is then an error).
	LookupEnv func(string) (string, bool)
	// Opened, when not nil, is called with the path of every token or
	// secret file before it is read, so that a watcher can reload when one
	// changes.
	Opened func(path string)
}

// osSource resolves files from dir and variables from the process
// environment.
func osSource(dir string) Source { return Source{Dir: dir, LookupEnv: os.LookupEnv} }

// credential is one entry of "tokens" or "secrets".
type credential struct {
	value    []byte
	notAfter time.Time
}

// decodeCredentials reads the credential list of o: the member single (one
// string, the form of older files) or the member list (an array of
// entries), exactly one of them. Each entry is a string, or an object with
// exactly one of "value", "file" and "env" and an optional "not_after"
// (RFC 3339). Errors never contain a credential.
func decodeCredentials(o *object, single, list string, src Source) ([]credential, error) {
	switch {
	case o.present(single) && o.present(list):
		return nil, &ValidationError{Field: o.field(list), Err: fmt.Errorf("give %s or %s, not both", single, list)}
	case o.present(single):
		s, err := o.str(single, true)
		if err != nil {
			return nil, err
		}
		return []credential{{value: []byte(s)}}, nil
	case !o.present(list):
		return nil, &ValidationError{Field: o.field(single), Err: ErrRequired}
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(o.fields[list], &entries); err != nil {
		return nil, &ValidationError{Field: o.field(list), Err: errors.New("must be an array of strings or objects")}
	}
	switch {
	case len(entries) == 0:
		return nil, &ValidationError{Field: o.field(list), Err: errEmpty}
	case len(entries) > MaxCredentials:
		return nil, &ValidationError{Field: o.field(list), Err: fmt.Errorf("more than %d entries", MaxCredentials)}
	}
	creds := make([]credential, len(entries))
	var errs []error
	for i, raw := range entries {
		field := o.field(list) + "[" + strconv.Itoa(i) + "]"
		c, err := decodeCredential(raw, field, src)
		creds[i] = c
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return creds, nil
}

// decodeCredential reads one entry of a credential list.
func decodeCredential(raw json.RawMessage, field string, src Source) (credential, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return credential{}, &ValidationError{Field: field, Err: errEmpty}
		}
		return credential{value: []byte(s)}, nil
	}
	o, err := decodeObject(raw, field, "value", "file", "env", "not_after")
	if err != nil {
		return credential{}, err
	}
	var c credential
	if o.present("not_after") {
		na, err := o.str("not_after", true)
		if err != nil {
			return c, err
		}
		if c.notAfter, err = time.Parse(time.RFC3339, na); err != nil {
			return c, &ValidationError{Field: o.field("not_after"), Value: na, Err: errors.New("must be an RFC 3339 time")}
		}
	}
	var given []string
	for _, k := range []string{"value", "file", "env"} {
		if o.present(k) {
			given = append(given, k)
		}
	}
	if len(given) != 1 {
		return c, &ValidationError{Field: field, Err: errors.New(`needs exactly one of "value", "file" and "env"`)}
	}
	key := given[0]
	v, err := o.str(key, true)
	if err != nil {
		return c, err
	}
	switch key {
	case "value":
		c.value = []byte(v)
	case "file":
		if c.value, err = readSecretFile(src, v); err != nil {
			return c, &ValidationError{Field: o.field("file"), Value: v, Err: err}
		}
	case "env":
		val, ok := "", false
		if src.LookupEnv != nil {
			val, ok = src.LookupEnv(v)
		}
		if val = strings.TrimSpace(val); !ok || val == "" {
			return c, &ValidationError{Field: o.field("env"), Value: v, Err: errors.New("environment variable unset or empty")}
		}
		c.value = []byte(val)
	}
	return c, nil
}

// readSecretFile reads a token or secret file: at most MaxSecretFileSize
// bytes, surrounding white space (a final newline) trimmed, readable by
// its owner only.
func readSecretFile(src Source, name string) ([]byte, error) {
	if !filepath.IsAbs(name) && src.Dir != "" {
		name = filepath.Join(src.Dir, name)
	}
	if src.Opened != nil {
		src.Opened(name)
	}
	// Check the type before opening, so that a FIFO cannot block.
	if info, err := os.Stat(name); err == nil && !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := os.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the ValidationError already
		}
		return nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if err := secretfile.Check(name, info); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(b) > MaxSecretFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSecretFileSize)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return nil, errors.New("empty")
	}
	return b, nil
}
