package action

import (
	"context"
	"log/slog"

	"github.com/squallhq/squall/engine/tree"
)

// loggerExecutor logs every action at info level with its id and payload,
// and, when its event id is known, the event id, its position and its
// idempotency key. Any payload is valid.
type loggerExecutor struct {
	log *slog.Logger
}

var _ Executor = (*loggerExecutor)(nil)

// Execute logs the action.
func (l *loggerExecutor) Execute(ctx context.Context, a tree.Action) error {
	if a.EventID == "" {
		l.log.LogAttrs(ctx, slog.LevelInfo, "action",
			slog.String(logKeyAction, a.ID), slog.Any(logKeyPayload, a.Payload))
		return nil
	}
	l.log.LogAttrs(ctx, slog.LevelInfo, "action",
		slog.String(logKeyAction, a.ID), slog.Any(logKeyPayload, a.Payload),
		slog.String(logKeyEventID, a.EventID), slog.String(logKeyPosition, a.Position),
		slog.String(logKeyKey, a.IdempotencyKey()))
	return nil
}
