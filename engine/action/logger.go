package action

import (
	"context"
	"log/slog"

	"github.com/squallhq/squall/engine/tree"
)

// loggerExecutor logs every action at info level with its id and payload.
// Any payload is valid.
type loggerExecutor struct {
	log *slog.Logger
}

var _ Executor = (*loggerExecutor)(nil)

// Execute logs the action.
func (l *loggerExecutor) Execute(ctx context.Context, a tree.Action) error {
	l.log.LogAttrs(ctx, slog.LevelInfo, "action",
		slog.String(logKeyAction, a.ID), slog.Any(logKeyPayload, a.Payload))
	return nil
}
