package intake

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/internal/logtest"
)

// rawAnswer is an answer read off a raw connection.
type rawAnswer struct {
	resp *http.Response
	body []byte
	// closed reports that the server closed the connection after it.
	closed bool
}

// rawCall writes req on a new connection to addr and reads one answer; with
// waitClose, it then waits (10 s at most) for the server to close the
// connection.
func rawCall(t *testing.T, addr, req string, waitClose bool) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatalf("write: %v", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", req, err)
	}
	body, _ := io.ReadAll(resp.Body)
	a := rawAnswer{resp: resp, body: body}
	if waitClose {
		_, err := br.ReadByte()
		var ne net.Error
		a.closed = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	return a
}

// satelliteMux is the intake registered on a mux with a JSON 404 for other
// paths, as the satellite's.
func satelliteMux(in *Intake) *http.ServeMux {
	mux := http.NewServeMux()
	in.Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"code":"NOT_FOUND","params":{},"message":"no such endpoint"}`+"\n")
	})
	return mux
}

// TestFronts_SameAnswers: the fasthttp front end gives the answers of the
// net/http mux, byte for byte (status, body, the headers the intake sets),
// to requests on and around the webhook route, event ids aside.
func TestFronts_SameAnswers(t *testing.T) {
	t.Parallel()
	servers := map[string]*testServer{}
	for _, front := range []string{frontNetHTTP, frontFastHTTP} {
		in, err := New(Config{TenantID: "site-a", Source: "sat-1", RetryAfter: 7 * time.Second},
			testDirectory(t), &recorder{}, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		servers[front] = serveFront(t, front, in, satelliteMux(in), ServerConfig{})
	}
	post := func(target, body string, head ...string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\n" + strings.Join(head, "") +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	big := `{"x": "` + strings.Repeat("a", 1100) + `"}`
	uuid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)
	for _, req := range []string{
		post("/engine/webhook/event/plain?token=tok-0123456789abc", `{"n": 1}`),
		post("/engine/webhook/event/plain?token=tok-0123456789abc&x=%41", `{"n": 1}`),
		post("/engine/webhook/event/pl%61in?token=tok-0123456789abc", `{"n": 1}`),
		post("/engine/webhook/event/a%2Fb?token=tok-0123456789abc", `{}`),
		post("/engine/webhook/event/nope?token=tok-0123456789abc", `{}`),
		post("/engine/webhook/event/plain?token=bad", `{}`),
		post("/engine/webhook/event/plain", `{}`),
		post("/engine/webhook/event/plain?token=tok-0123456789abc", big),
		post("/engine/webhook/event/plain?token=tok-0123456789abc", `{"n": `),
		post("/engine/webhook/event/tenant?token=tok-0123456789abc", `{"kind": 3}`),
		post("/engine/webhook/event/signed?token=tok-0123456789abc", `{"ref": "x"}`, "X-Hub-Signature-256: sha256=00\r\n"),
		post("/engine/webhook/event/signed?token=tok-0123456789abc", `{"ref": "x"}`, "X-Hub-Signature-256: zz\r\n"),
		post("/engine/webhook/event/plain/?token=tok-0123456789abc", `{}`),
		post("/engine/webhook/event/?token=tok-0123456789abc", `{}`),
		post("/engine/webhook/event/./plain?token=tok-0123456789abc", `{}`),
		post("/engine/webhook/event/x/../plain?token=tok-0123456789abc", `{}`),
		post("/elsewhere", `{}`),
		post("/engine/webhook/event/%zz?token=tok-0123456789abc", `{}`),
		"GET /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST http://x/engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}",
		"POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
		"DELETE /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n0\r\n\r\n",
	} {
		var answers []string
		for _, front := range []string{frontNetHTTP, frontFastHTTP} {
			a := rawCall(t, servers[front].Addr, req, false)
			h := a.resp.Header
			answers = append(answers, fmt.Sprintf("%d ct=%q ra=%q allow=%q loc=%q id=%q close=%v server=%q\n%s", a.resp.StatusCode,
				h.Get("Content-Type"), h.Get("Retry-After"), h.Get("Allow"), h.Get("Location"),
				uuid.ReplaceAllString(h.Get("Squall-Event-Id"), "UUID"), a.resp.Close, h.Get("Server"),
				uuid.ReplaceAllString(string(a.body), "UUID")))
		}
		if answers[0] != answers[1] {
			t.Errorf("%q:\nnet/http: %s\nfasthttp: %s", req, answers[0], answers[1])
		}
	}
}

// TestServer_Framing: requests whose body framing is ambiguous, a request
// smuggling attempt, and HTTP/1.1 requests without Host are refused with
// 400 and the connection closed; none reaches the sink.
func TestServer_Framing(t *testing.T) {
	t.Parallel()
	sink := &recorder{}
	_, srv := newTestServer(t, frontFastHTTP, sink)
	const target = "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\n"
	const next = "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
	for _, tc := range []struct{ name, req string }{
		{"length and chunked", target + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + next},
		{"chunked and length", target + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + next},
		{"two lengths, same value", target + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}" + next},
		{"two lengths", target + "Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}" + next},
		{"identity", target + "Transfer-Encoding: identity\r\n\r\n" + next},
		{"identity and length", target + "Transfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}" + next},
		{"gzip, chunked", target + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + next},
		{"two encodings", target + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + next},
		{"chunked in HTTP/1.0", strings.Replace(target, "HTTP/1.1", "HTTP/1.0", 1) + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + next},
		{"bad length", target + "Content-Length: +2\r\n\r\n{}" + next},
		{"no host", "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}" + next},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := rawCall(t, srv.Addr, tc.req, true)
			if a.resp.StatusCode != http.StatusBadRequest || !a.closed || a.resp.Header.Get("Server") != "" {
				t.Fatalf("answer %d (closed %v, server %q) %s; want 400 and the connection closed", a.resp.StatusCode, a.closed,
					a.resp.Header.Get("Server"), a.body)
			}
		})
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.records) != 0 {
		t.Fatalf("%d events from refused requests", len(sink.records))
	}
}

// TestServer_Limits: headers over MaxHeaderBytes are answered 431; a
// multipart body is not parsed ahead (a wrong token is refused before it,
// and with the right one it is no JSON); a signature in a chunked body's
// trailer is not a header; chunked bodies are read.
func TestServer_Limits(t *testing.T) {
	t.Parallel()
	sink := &recorder{}
	in, err := New(Config{TenantID: "site-a", Source: "sat-1"}, testDirectory(t), sink, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := serveFront(t, frontFastHTTP, in, satelliteMux(in), ServerConfig{MaxHeaderBytes: 8 << 10})
	const target = "POST /engine/webhook/event/%s HTTP/1.1\r\nHost: x\r\n"

	a := rawCall(t, srv.Addr, fmt.Sprintf(target, "plain?token=tok-0123456789abc")+"X-Pad: "+strings.Repeat("p", 9<<10)+"\r\nContent-Length: 2\r\n\r\n{}", true)
	if a.resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !a.closed {
		t.Errorf("large headers: %d (closed %v) %s", a.resp.StatusCode, a.closed, a.body)
	}
	// A signature header of 4096 bytes fits (and is refused by the
	// intake as malformed, not by the server).
	a = rawCall(t, srv.Addr, fmt.Sprintf(target, "signed?token=tok-0123456789abc")+"X-Hub-Signature-256: "+strings.Repeat("0", 4097)+"\r\nContent-Length: 2\r\n\r\n{}", false)
	if a.resp.StatusCode != http.StatusBadRequest || !bytes.Contains(a.body, []byte(CodeBadSignatureHeader)) {
		t.Errorf("long signature header: %d %s", a.resp.StatusCode, a.body)
	}

	multipart := "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\n" + strings.Repeat("m", 500) + "\r\n--b--\r\n"
	head := "Content-Type: multipart/form-data; boundary=b\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(multipart))
	if a := rawCall(t, srv.Addr, fmt.Sprintf(target, "plain?token=no")+head+multipart, false); a.resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("multipart, wrong token: %d %s", a.resp.StatusCode, a.body)
	}
	if a := rawCall(t, srv.Addr, fmt.Sprintf(target, "plain?token=tok-0123456789abc")+head+multipart, false); a.resp.StatusCode != http.StatusBadRequest ||
		!bytes.Contains(a.body, []byte(CodeBodyNotJSON)) {
		t.Errorf("multipart: %d %s", a.resp.StatusCode, a.body)
	}

	body := `{"ref": "main"}`
	sig := testDirectory(t)["signed"].Signature.Sign([]byte(body), time.Now(), "").Get("X-Hub-Signature-256")
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Hub-Signature-256: %s\r\n\r\n", len(body), body, sig)
	a = rawCall(t, srv.Addr, fmt.Sprintf(target, "signed?token=tok-0123456789abc")+"Transfer-Encoding: chunked\r\nTrailer: X-Hub-Signature-256\r\n\r\n"+chunked, false)
	if a.resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(a.body, []byte("missing signature")) {
		t.Errorf("signature in the trailer: %d %s", a.resp.StatusCode, a.body)
	}
	a = rawCall(t, srv.Addr, fmt.Sprintf(target, "signed?token=tok-0123456789abc")+"X-Hub-Signature-256: "+sig+"\r\nTransfer-Encoding: chunked\r\n\r\n"+
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body), false)
	if a.resp.StatusCode != http.StatusOK {
		t.Errorf("chunked, signed: %d %s", a.resp.StatusCode, a.body)
	}
}

// TestServer_Panic: a handler's panic is answered 500 and logged; the
// server (and the process) go on.
func TestServer_Panic(t *testing.T) {
	t.Parallel()
	in, err := New(Config{Source: "sat-1"}, testDirectory(t), &recorder{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := satelliteMux(in)
	mux.HandleFunc("GET /panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	var logs logtest.Buffer
	srv := serveFront(t, frontFastHTTP, in, mux, ServerConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := rawCall(t, srv.Addr, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n", true)
	if a.resp.StatusCode != http.StatusInternalServerError || !a.closed {
		t.Fatalf("panic: %d (closed %v) %s", a.resp.StatusCode, a.closed, a.body)
	}
	var e struct {
		Code   string            `json:"code"`
		Params map[string]string `json:"params"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil || e.Code != httpguard.CodeInternal || strings.Contains(string(a.body), "boom") {
		t.Fatalf("the answer is not a JSON 500 naming a request id only: %s (%v)", a.body, err)
	}
	if id := e.Params["request_id"]; id == "" || !strings.Contains(logs.String(), "request_id="+id) || !strings.Contains(logs.String(), "boom") {
		t.Errorf("the panic is not logged under request id %q: %s", id, logs.String())
	}
	if a := rawCall(t, srv.Addr, "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", false); a.resp.StatusCode != http.StatusOK {
		t.Fatalf("after the panic: %d %s", a.resp.StatusCode, a.body)
	}
}

// TestServer_Timeouts: headers that do not come in HeaderTimeout, a body
// that does not come in BodyTimeout, and a connection idle for IdleTimeout
// are cut.
func TestServer_Timeouts(t *testing.T) {
	t.Parallel()
	sink := &recorder{}
	in, err := New(Config{Source: "sat-1"}, testDirectory(t), sink, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const d = 200 * time.Millisecond
	srv := serveFront(t, frontFastHTTP, in, satelliteMux(in), ServerConfig{HeaderTimeout: d, BodyTimeout: d, IdleTimeout: d})
	dial := func(head string) (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		return conn, bufio.NewReader(conn)
	}
	// closedAfter reads what is left: the connection must end (EOF or a
	// reset), not the client's 10 s deadline.
	closed := func(br *bufio.Reader) bool {
		_, err := io.ReadAll(br)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}

	_, br := dial("POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\n")
	if resp, err := http.ReadResponse(br, nil); err == nil && resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("slow headers: %d", resp.StatusCode)
	}
	if !closed(br) {
		t.Error("slow headers: the connection stayed open")
	}

	_, br = dial("POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("cannot read the body")) || !closed(br) {
		t.Errorf("slow body: %d %s", resp.StatusCode, body)
	}

	_, br = dial("POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %v %v", resp, err)
	}
	if !closed(br) {
		t.Error("idle connection: still open")
	}
}

// TestHTTP11Only: the server's TLS configuration offers HTTP/1.1 alone,
// also through GetConfigForClient, and leaves the caller's configuration
// as it was.
func TestHTTP11Only(t *testing.T) {
	t.Parallel()
	inner := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	cfg := &tls.Config{NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return inner, nil }}
	got := http11Only(cfg)
	c, err := got.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.NextProtos, []string{"http/1.1"}) || !slices.Equal(c.NextProtos, []string{"http/1.1"}) {
		t.Fatalf("offered %v and %v", got.NextProtos, c.NextProtos)
	}
	if len(cfg.NextProtos) != 2 || len(inner.NextProtos) != 2 {
		t.Fatal("the caller's configurations changed")
	}
}

// TestRequestTarget checks that the path and query a call's target is
// split into without parsing its URI are those fasthttp's parse gives.
func TestRequestTarget(t *testing.T) {
	t.Parallel()
	for _, target := range []string{
		"/engine/webhook/event/x?token=a", "/engine/webhook/event/x", "/", "/p?", "/p?q?r", "/p?a=1&b=%20",
		"/a%2Fb/c?token=t", "/a?b#c", "/a#c?d", "//x/y?q", "http://h/p?q", "/p\x01?q", "/p?q\x7f", "/./../p?q",
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetHost("h")
		ctx.Request.Header.SetRequestURI(target)
		path, query := requestTarget(&ctx)
		var want fasthttp.RequestCtx
		want.Request.Header.SetHost("h")
		want.Request.Header.SetRequestURI(target)
		u := want.URI()
		if string(path) != string(u.PathOriginal()) || string(query) != string(u.QueryString()) {
			t.Errorf("%q: path %q query %q, want %q and %q", target, path, query, u.PathOriginal(), u.QueryString())
		}
	}
}
