package action

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
)

// maxJoinedErrors bounds the inner failures a foreach error quotes.
const maxJoinedErrors = 5

// foreachExecutor turns one action into one action per inner action and
// target item, and runs them through the registry, in order: for each
// inner action, for each item (Tornado's order).
type foreachExecutor struct {
	run      func(context.Context, tree.Action) error
	log      *slog.Logger
	maxDepth int
}

var _ Executor = (*foreachExecutor)(nil)

// depthKey is the context key of the foreach nesting depth.
type depthKey struct{}

// innerAction is a valid entry of the payload's actions.
type innerAction struct {
	id      string
	payload map[string]any
	// index is the action's index in the payload's actions.
	index int
}

// Execute runs the inner actions for every item of the target. Each
// produced action has the foreach's event id and its position followed by
// ".<index of the inner action>.<index of the item>". Inner
// actions without a string id or an object payload are skipped and logged.
// Inner actions are retried by the registry; when some still fail, the
// error is permanent (retrying the foreach would repeat those that
// succeeded) and joins the first few failures.
func (f *foreachExecutor) Execute(ctx context.Context, a tree.Action) error {
	depth, _ := ctx.Value(depthKey{}).(int)
	depth++
	if depth > f.maxDepth {
		return NewPermanent(fmt.Errorf("foreach: %w (foreach.max_depth %d)", ErrTooDeep, f.maxDepth))
	}
	target, ok := a.Payload["target"].([]any)
	if !ok {
		return payloadError(IDForeach, "target", "must be an array")
	}
	list, ok := a.Payload["actions"].([]any)
	if !ok {
		return payloadError(IDForeach, "actions", "must be an array")
	}
	var inner []innerAction
	for i, v := range list {
		ia, reason := parseInnerAction(v)
		if reason != "" {
			f.log.LogAttrs(ctx, slog.LevelWarn, "foreach: inner action skipped",
				slog.String(logKeyAction, a.ID), slog.Int(logKeyIndex, i), slog.String(logKeyReason, reason))
			continue
		}
		ia.index = i
		inner = append(inner, ia)
	}

	ctx = context.WithValue(ctx, depthKey{}, depth)
	r := newItemResolver()
	var errs []error
	failed, total := 0, 0
	for _, ia := range inner {
		for j, item := range target {
			if err := ctx.Err(); err != nil {
				return NewPermanent(fmt.Errorf("foreach: %d of %d actions run: %w",
					total, len(inner)*len(target), context.Cause(ctx)))
			}
			total++
			produced := tree.Action{
				ID:        ia.id,
				Payload:   r.resolveObject(ia.payload, item),
				CreatedMs: a.CreatedMs,
				Position:  a.Position + "." + strconv.Itoa(ia.index) + "." + strconv.Itoa(j),
				EventID:   a.EventID,
			}
			if err := f.run(ctx, produced); err != nil {
				failed++
				if len(errs) < maxJoinedErrors {
					errs = append(errs, err)
				}
			}
		}
	}
	if failed > 0 {
		return NewPermanent(fmt.Errorf("foreach: %d of %d actions failed: %w", failed, total, errors.Join(errs...)))
	}
	return nil
}

// parseInnerAction checks an entry of the actions array: an object with a
// string id and an object payload. reason tells why it is not one.
func parseInnerAction(v any) (ia innerAction, reason string) {
	m, ok := v.(map[string]any)
	if !ok {
		return ia, "not an object"
	}
	if ia.id, ok = m["id"].(string); !ok || ia.id == "" {
		return ia, "id missing or not a string"
	}
	if ia.payload, ok = m["payload"].(map[string]any); !ok {
		return ia, "payload missing or not an object"
	}
	return ia, ""
}

// itemResolver re-resolves payload strings against {"item": item}. It
// caches parsed strings for the duration of one foreach action (the same
// strings are resolved once per item).
type itemResolver struct {
	exprs map[string]*config.Expr // nil for strings that resolve to themselves
}

func newItemResolver() *itemResolver {
	return &itemResolver{exprs: make(map[string]*config.Expr)}
}

// resolveObject returns a copy of the payload with every string, at any
// depth, resolved. The payload is not modified; values that hold no string
// are shared.
func (r *itemResolver) resolveObject(m map[string]any, item any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = r.resolve(v, item)
	}
	return out
}

func (r *itemResolver) resolve(v any, item any) any {
	switch x := v.(type) {
	case string:
		if res, ok := r.resolveString(x, item); ok {
			return res
		}
		return x
	case map[string]any:
		return r.resolveObject(x, item)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.resolve(e, item)
		}
		return out
	}
	return v
}

// resolveString resolves one string. A string that is exactly ${item...}
// becomes the referenced value with its own type; an interpolated string
// becomes text. ok is false when the string stays as it is: it holds no
// ${item...}, it does not parse, or something in it cannot be resolved (a
// missing key, another root, an object or array inside text).
func (r *itemResolver) resolveString(s string, item any) (any, bool) {
	if !strings.Contains(s, "${") {
		return nil, false
	}
	e, seen := r.exprs[s]
	if !seen {
		parsed, err := config.ParseExpr(s)
		if err == nil && parsed.Kind != config.ExprConstant {
			e = parsed
		}
		r.exprs[s] = e
	}
	if e == nil {
		return nil, false
	}
	switch e.Kind {
	case config.ExprSingle:
		if e.Accessor.Root != config.RootItem {
			return nil, false
		}
		return config.Walk(item, e.Accessor.Path)
	case config.ExprInterpolated:
		var b []byte
		for _, p := range e.Parts {
			if p.Accessor == nil {
				b = append(b, p.Text...)
				continue
			}
			if p.Accessor.Root != config.RootItem {
				return nil, false
			}
			v, ok := config.Walk(item, p.Accessor.Path)
			if !ok {
				return nil, false
			}
			if b, ok = config.AppendText(b, v); !ok {
				return nil, false
			}
		}
		return string(b), true
	}
	return nil, false
}
