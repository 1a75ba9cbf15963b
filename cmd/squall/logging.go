package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/squallhq/squall/internal/tracing"
)

// newLogger returns the JSON logger of a role writing to w at the level
// named by level (debug, info, warn or error). Durations are written as
// strings such as "1.5s", not as integer nanoseconds. A line logged with a
// context holding a span carries its trace_id and span_id.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(tracing.NewLogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l, ReplaceAttr: durationText}))), nil
}

// durationText writes a duration attribute as its text.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
