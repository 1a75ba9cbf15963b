package action_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/tree"
)

func ExampleRegistry_Run() {
	cfg, err := action.Parse(strings.NewReader(`{"retry": {"max_attempts": 3}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// Logs without the time, so that the output is stable.
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	r, err := action.NewRegistry(cfg, action.Deps{Logger: log})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	fmt.Println(r.IDs())
	err = r.Run(context.Background(), tree.Action{ID: "foreach", Payload: map[string]any{
		"target":  []any{"a", "b"},
		"actions": []any{map[string]any{"id": "logger", "payload": map[string]any{"msg": "item ${item}"}}},
	}})
	fmt.Println(err)
	// http is not enabled: the file names no allowed hosts.
	err = r.Run(context.Background(), tree.Action{ID: "http", Payload: map[string]any{"url": "http://169.254.169.254/"}})
	fmt.Println(err, errors.Is(err, action.ErrNoExecutor), action.Retriable(err))
	err = r.Run(context.Background(), tree.Action{ID: "pager"})
	fmt.Println(err)
	// Output:
	// [foreach logger]
	// level=INFO msg=action component=action action=logger payload="map[msg:item a]"
	// level=INFO msg=action component=action action=logger payload="map[msg:item b]"
	// <nil>
	// action "http": no executor for action: executor not enabled: set http.allowed_hosts (or "allow_any_host": true) in the actions settings file (--actions-config) true false
	// action "pager": no executor for action
}
