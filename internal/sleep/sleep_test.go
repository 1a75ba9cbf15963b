package sleep

import (
	"context"
	"testing"
	"time"
)

func TestForPasses(t *testing.T) {
	if !For(t.Context(), time.Millisecond) {
		t.Error("For with a live context: false, want true once d passed")
	}
}

func TestForEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	began := time.Now()
	if For(ctx, time.Hour) {
		t.Error("For with an ended context: true, want false")
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("For with an ended context took %s", took)
	}
}
