package store

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// noCtx is the context of raft's log records: hclog passes none, and slog
// handlers only read values from it, so nothing is detached from a
// cancellation here.
var noCtx = context.Background()

// raftLogger adapts a *slog.Logger to the hclog.Logger that raft logs to,
// so raft's output goes wherever the store's logger goes.
type raftLogger struct {
	l    *slog.Logger
	name string
	args []any // implied arguments, kept for ImpliedArgs
}

var _ hclog.Logger = (*raftLogger)(nil)

func newRaftLogger(l *slog.Logger, name string) *raftLogger {
	return &raftLogger{l: l.With("component", name), name: name}
}

// slogLevel maps hclog levels to slog levels; Trace is below Debug.
func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (r *raftLogger) enabled(level hclog.Level) bool {
	return r.l.Enabled(noCtx, slogLevel(level))
}

// Log implements hclog.Logger. The failed RPCs to a peer go to debug:
// the transport reports them once per outage (peerWatch).
func (r *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level > hclog.Debug && level < hclog.Off && isPeerUnreachable(msg, args) {
		level = hclog.Debug
	}
	if level == hclog.Off || !r.enabled(level) {
		return
	}
	r.l.Log(noCtx, slogLevel(level), msg, formatArgs(args)...)
}

// formatArgs renders hclog.Fmt values, which slog does not know, and
// values that describe themselves (fmt.Stringer: raft passes its *Raft,
// which JSON would write as {}). Raft's key "node" becomes "raft_node":
// the store's logger names its node under "node" already.
func formatArgs(args []any) []any {
	for i, a := range args {
		if i%2 == 0 {
			if a == "node" {
				args[i] = "raft_node"
			}
			continue
		}
		switch v := a.(type) {
		case hclog.Format:
			if len(v) > 0 {
				if format, ok := v[0].(string); ok {
					args[i] = fmt.Sprintf(format, v[1:]...)
				}
			}
		case fmt.Stringer:
			args[i] = v.String()
		}
	}
	return args
}

// Trace implements hclog.Logger.
func (r *raftLogger) Trace(msg string, args ...any) { r.Log(hclog.Trace, msg, args...) }

// Debug implements hclog.Logger.
func (r *raftLogger) Debug(msg string, args ...any) { r.Log(hclog.Debug, msg, args...) }

// Info implements hclog.Logger.
func (r *raftLogger) Info(msg string, args ...any) { r.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (r *raftLogger) Warn(msg string, args ...any) { r.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (r *raftLogger) Error(msg string, args ...any) { r.Log(hclog.Error, msg, args...) }

// IsTrace implements hclog.Logger.
func (r *raftLogger) IsTrace() bool { return r.enabled(hclog.Trace) }

// IsDebug implements hclog.Logger.
func (r *raftLogger) IsDebug() bool { return r.enabled(hclog.Debug) }

// IsInfo implements hclog.Logger.
func (r *raftLogger) IsInfo() bool { return r.enabled(hclog.Info) }

// IsWarn implements hclog.Logger.
func (r *raftLogger) IsWarn() bool { return r.enabled(hclog.Warn) }

// IsError implements hclog.Logger.
func (r *raftLogger) IsError() bool { return r.enabled(hclog.Error) }

// ImpliedArgs implements hclog.Logger.
func (r *raftLogger) ImpliedArgs() []any { return r.args }

// With implements hclog.Logger.
func (r *raftLogger) With(args ...any) hclog.Logger {
	return &raftLogger{l: r.l.With(args...), name: r.name, args: append(r.args[:len(r.args):len(r.args)], args...)}
}

// Name implements hclog.Logger.
func (r *raftLogger) Name() string { return r.name }

// Named implements hclog.Logger.
func (r *raftLogger) Named(name string) hclog.Logger {
	if r.name != "" {
		name = r.name + "." + name
	}
	return r.ResetNamed(name)
}

// ResetNamed implements hclog.Logger.
func (r *raftLogger) ResetNamed(name string) hclog.Logger {
	return &raftLogger{l: r.l.With("subcomponent", name), name: name, args: r.args}
}

// SetLevel implements hclog.Logger; the level is the slog handler's.
func (r *raftLogger) SetLevel(hclog.Level) {}

// GetLevel implements hclog.Logger.
func (r *raftLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if r.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

// StandardLogger implements hclog.Logger.
func (r *raftLogger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(r.l.Handler(), slog.LevelInfo)
}

// StandardWriter implements hclog.Logger.
func (r *raftLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return r.StandardLogger(nil).Writer()
}
