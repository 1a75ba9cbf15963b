package httpguard

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/squallhq/squall/internal/logtest"
)

func TestClientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out logtest.Buffer
		logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c := NewClientErrors(logger, time.Minute)
		ctx := context.Background()
		for range 1000 {
			c.Record(ctx, 401, "UNAUTHORIZED", "request failed", "path", "/x")
		}
		c.Record(ctx, 404, "NOT_FOUND", "request failed")
		if s := out.String(); s != "" {
			t.Fatalf("logged at info before the interval ended:\n%s", s)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], `msg="client errors"`) || !strings.Contains(lines[0], "total=1001") ||
			!strings.Contains(lines[0], `by_code="401 UNAUTHORIZED=1000, 404 NOT_FOUND=1"`) {
			t.Fatalf("after one interval, want one summary line, got:\n%s", out.String())
		}
		// A quiet interval logs nothing; the next error starts a new one.
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		c.Record(ctx, 400, "BAD_REQUEST", "request failed")
		c.Close()
		lines = strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[1], "total=1") || !strings.Contains(lines[1], "400 BAD_REQUEST=1") {
			t.Fatalf("Close logs what is pending; got:\n%s", out.String())
		}
		c.Record(ctx, 400, "BAD_REQUEST", "request failed")
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := strings.Count(out.String(), "\n"); n != 2 {
			t.Fatalf("logged after Close:\n%s", out.String())
		}
	})
}

func TestClientErrors_Debug(t *testing.T) {
	var out logtest.Buffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := NewClientErrors(logger, time.Hour)
	defer c.Close()
	c.Record(context.Background(), 403, "FORBIDDEN", "request failed", "path", "/p")
	if s := out.String(); !strings.Contains(s, "level=DEBUG") || !strings.Contains(s, "path=/p") || !strings.Contains(s, "status=403") || !strings.Contains(s, "code=FORBIDDEN") {
		t.Fatalf("want the error at debug with its attributes, got %s", s)
	}
}
