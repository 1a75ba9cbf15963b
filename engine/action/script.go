package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/squallhq/squall/engine/tree"
)

// scriptWaitDelay bounds how long a run waits, after its program exited or
// was killed, for the output pipes to close (a grandchild may hold them).
const scriptWaitDelay = 2 * time.Second

// scriptExecutor runs a program from the allowed directory with the
// payload's arguments, as an argv vector: no shell ever sees them.
type scriptExecutor struct {
	allowedDir string
	timeout    time.Duration
	maxOutput  int
	env        []string
	log        *slog.Logger
}

var _ Executor = (*scriptExecutor)(nil)

func newScriptExecutor(cfg ScriptConfig, log *slog.Logger) *scriptExecutor {
	env := make([]string, 0, len(cfg.Env))
	for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
		env = append(env, k+"="+cfg.Env[k])
	}
	return &scriptExecutor{
		allowedDir: filepath.Clean(cfg.AllowedDir),
		timeout:    time.Duration(cfg.Timeout),
		maxOutput:  cfg.MaxOutput,
		env:        env,
		log:        log,
	}
}

// Execute runs the script. A program that cannot be run is a permanent
// failure; a non-zero exit status or a timeout is retriable.
func (s *scriptExecutor) Execute(ctx context.Context, a tree.Action) error {
	line, ok := a.Payload["script"].(string)
	if !ok {
		return payloadError(IDScript, "script", "must be a string")
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return payloadError(IDScript, "script", "names no program")
	}
	prog, err := s.resolve(fields[0])
	if err != nil {
		return err
	}
	args := slices.Clone(fields[1:])
	if v, ok := a.Payload["args"]; ok {
		if args, err = appendArgs(args, v); err != nil {
			return err
		}
	}

	runCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	began := time.Now()
	cmd, stdout, stderr, err := s.start(runCtx, prog, args, s.environ(a))
	if err != nil {
		err = fmt.Errorf("script %s: start: %w", fields[0], err)
		if errors.Is(err, syscall.ETXTBSY) {
			return NewRetriable(err)
		}
		return NewPermanent(err)
	}
	err = cmd.Wait()
	elapsed := time.Since(began)
	exitCode := -1
	if cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "script finished",
		slog.String(logKeyAction, a.ID), slog.String(logKeyScript, fields[0]),
		slog.Int(logKeyExitCode, exitCode), slog.Duration(logKeyDuration, elapsed),
		slog.String(logKeyStdout, stdout.String()), slog.String(logKeyStderr, stderr.String()))

	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return NewRetriable(fmt.Errorf("script %s: %w", fields[0], context.Cause(ctx)))
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return NewRetriable(fmt.Errorf("script %s: killed after the %s timeout: %w", fields[0], s.timeout, context.DeadlineExceeded))
	}
	// A non-zero exit status (*exec.ExitError), or output pipes held open
	// past the wait delay.
	return NewRetriable(fmt.Errorf("script %s: %w", fields[0], err))
}

// start starts the program with its output captured. While the start fails
// with "text file busy" (the program was just written, and a process forked
// meanwhile, by this engine or another, still holds it open for writing
// until its exec), it tries again a few times with a new Cmd: a Cmd starts
// only once.
func (s *scriptExecutor) start(ctx context.Context, prog string, args, env []string) (*exec.Cmd, *cappedBuffer, *cappedBuffer, error) {
	delay := 5 * time.Millisecond
	for try := 1; ; try++ {
		cmd := exec.CommandContext(ctx, prog, args...)
		cmd.Dir = s.allowedDir
		cmd.Env = env
		stdout := &cappedBuffer{max: s.maxOutput}
		stderr := &cappedBuffer{max: s.maxOutput}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.WaitDelay = scriptWaitDelay
		killProcessGroup(cmd)
		err := cmd.Start()
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || try == 5 {
			return cmd, stdout, stderr, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, nil, err
		case <-t.C:
		}
		delay *= 2
	}
}

// The environment variables a script receives when its event id is known,
// besides script.env: the event id, the action's position in the tree and
// the key derived from both ([tree.Action.IdempotencyKey]), which a script
// may record to skip the work a redelivered event asks again.
const (
	EnvEventID        = "SQUALL_EVENT_ID"
	EnvActionPosition = "SQUALL_ACTION_POSITION"
	EnvIdempotencyKey = "SQUALL_IDEMPOTENCY_KEY"
)

// environ returns the environment of a's run: script.env, and the
// action's identity when its event id is known (overriding script.env's
// variables of the same names).
func (s *scriptExecutor) environ(a tree.Action) []string {
	if a.EventID == "" {
		return s.env
	}
	env := make([]string, 0, len(s.env)+3)
	for _, kv := range s.env {
		name, _, _ := strings.Cut(kv, "=")
		if name != EnvEventID && name != EnvActionPosition && name != EnvIdempotencyKey {
			env = append(env, kv)
		}
	}
	return append(env, EnvEventID+"="+a.EventID, EnvActionPosition+"="+a.Position,
		EnvIdempotencyKey+"="+a.IdempotencyKey())
}

// resolve finds the program inside the allowed directory: a relative name
// is taken from it, an absolute one must lie in it, and symbolic links are
// followed before the check. It returns the resolved path, which is what
// runs: a link swapped after the check does not change what runs. (Whoever
// can write into the allowed directory decides what runs anyway.)
func (s *scriptExecutor) resolve(name string) (string, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.allowedDir, p)
	}
	dir, err := filepath.EvalSymlinks(s.allowedDir)
	if err != nil {
		return "", NewPermanent(fmt.Errorf("script: allowed_dir: %w", err))
	}
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", NewPermanent(fmt.Errorf("script %s: %w", name, fs.ErrNotExist))
		}
		return "", NewPermanent(fmt.Errorf("script %s: %w", name, err))
	}
	rel, err := filepath.Rel(dir, target)
	if err != nil || !filepath.IsLocal(rel) {
		return "", NewPermanent(fmt.Errorf("script %s: %w: not inside script.allowed_dir", name, ErrPathEscape))
	}
	fi, err := os.Stat(target)
	if err != nil {
		return "", NewPermanent(fmt.Errorf("script %s: %w", name, err))
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", NewPermanent(fmt.Errorf("script %s: not an executable file", name))
	}
	return target, nil
}

// appendArgs flattens an args value into arguments (Tornado's rules): a
// string is one argument; a number or a bool its text; an array each
// element in turn; an object, for each key in sorted order, "--key" then the
// value's arguments; null nothing.
func appendArgs(args []string, v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return args, nil
	case string:
		return append(args, x), nil
	case json.Number:
		return append(args, x.String()), nil
	case bool:
		return append(args, strconv.FormatBool(x)), nil
	case float64:
		return append(args, strconv.FormatFloat(x, 'f', -1, 64)), nil
	case int:
		return append(args, strconv.Itoa(x)), nil
	case int64:
		return append(args, strconv.FormatInt(x, 10)), nil
	case []any:
		var err error
		for _, e := range x {
			if args, err = appendArgs(args, e); err != nil {
				return nil, err
			}
		}
		return args, nil
	case map[string]any:
		var err error
		for _, k := range slices.Sorted(maps.Keys(x)) {
			args = append(args, "--"+k)
			if args, err = appendArgs(args, x[k]); err != nil {
				return nil, err
			}
		}
		return args, nil
	}
	return nil, payloadError(IDScript, "args", fmt.Sprintf("holds a %T, not a JSON value", v))
}

// cappedBuffer keeps the first max bytes written to it and counts the rest.
// It never fails a write, so that a chatty program is not killed by EPIPE.
type cappedBuffer struct {
	max     int
	buf     []byte
	dropped int
}

// Write keeps what fits.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	n := min(len(p), b.max-len(b.buf))
	b.buf = append(b.buf, p[:n]...)
	b.dropped += len(p) - n
	return len(p), nil
}

// String returns the kept output, with a note of what was dropped.
func (b *cappedBuffer) String() string {
	if b.dropped == 0 {
		return string(b.buf)
	}
	return string(b.buf) + "… (" + strconv.Itoa(b.dropped) + " more bytes)"
}
