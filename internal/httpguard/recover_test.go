package httpguard

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/logtest"
)

func TestRecover(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "panics_total", Help: "h"})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Half-Done", "1")
		panic("secret internal detail")
	})
	mux.HandleFunc("GET /abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	mux.HandleFunc("GET /late", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic("after the answer started")
	})
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // streaming handlers still flush through the wrapper
		_, _ = io.WriteString(w, "fine")
	})
	srv := httptest.NewServer(Recover(mux, slog.New(slog.NewJSONHandler(&logs, nil)), counter))
	t.Cleanup(srv.Close)

	resp, err := calltest.Client().Get(srv.URL + "/panic")
	if err != nil {
		t.Fatalf("a panicking handler must be answered, not dropped: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp.Header.Get("X-Half-Done") != "" {
		t.Error("the answer kept a header the panicking handler set")
	}
	var e struct {
		Code   string            `json:"code"`
		Params map[string]string `json:"params"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code != CodeInternal {
		t.Fatalf("body %s: %v", body, err)
	}
	id := e.Params["request_id"]
	if len(id) != 16 || resp.Header.Get(HeaderRequestID) != id {
		t.Errorf("request id %q, header %q", id, resp.Header.Get(HeaderRequestID))
	}
	if strings.Contains(string(body), "secret") {
		t.Errorf("the answer tells the panic: %s", body)
	}
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, id) {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line["panic"] != "secret internal detail" || line["level"] != "ERROR" || !strings.Contains(line["stack"].(string), "TestRecover") {
		t.Errorf("log line for request %s: %v\nlogs: %s", id, line, logs.String())
	}

	if _, err := calltest.Client().Get(srv.URL + "/abort"); err == nil {
		t.Error("http.ErrAbortHandler must abort the answer")
	}
	resp, err = calltest.Client().Get(srv.URL + "/late")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("a panic after the answer started must abort the connection, not end the answer as if complete")
	}
	resp, err = calltest.Client().Get(srv.URL + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "fine" {
		t.Errorf("a handler that does not panic: %d %q", resp.StatusCode, body)
	}
	if got := testutil.ToFloat64(counter); got != 2 {
		t.Errorf("counted %v panics, want 2 (/panic and /late; an abort is not a panic)", got)
	}
}
