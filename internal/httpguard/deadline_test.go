package httpguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// dial opens a raw connection to srv and sends head.
func dial(t *testing.T, srv *httptest.Server, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestBodyDeadline(t *testing.T) {
	t.Parallel()
	readErr := make(chan error, 10)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /body", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		if err != nil {
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		<-release // answers late, after the deadline: lifted at EOF
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /poll", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
			readErr <- r.Context().Err()
		}
	})
	const d = 200 * time.Millisecond
	srv := httptest.NewUnstartedServer(BodyDeadline(mux, d))
	srv.Start()
	defer srv.Close()

	t.Run("slow body cut", func(t *testing.T) {
		conn := dial(t, srv, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
		start := time.Now()
		// Dribble a byte at a time until the server gives up; bounded.
		var err error
		for i := 0; i < 1000 && err == nil; i++ {
			select {
			case err = <-readErr:
			case <-time.After(20 * time.Millisecond):
				_, _ = conn.Write([]byte("x"))
			}
		}
		if !IsTimeout(err) {
			t.Fatalf("handler's read: %v, want a deadline error", err)
		}
		if el := time.Since(start); el > 10*d {
			t.Fatalf("cut after %v, want about %v", el, d)
		}
	})
	t.Run("deadline lifted at the end of the body", func(t *testing.T) {
		conn := dial(t, srv, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
		if err := <-readErr; err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * d) // the deadline would have passed; the handler still answers
		release <- struct{}{}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("answer after the deadline: %v %v", resp, err)
		}
	})
	t.Run("no body, no deadline", func(t *testing.T) {
		conn := dial(t, srv, "GET /poll HTTP/1.1\r\nHost: x\r\n\r\n")
		time.Sleep(3 * d)
		select {
		case err := <-readErr:
			t.Fatalf("long poll cancelled: %v", err)
		default:
		}
		release <- struct{}{}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("long poll answer: %v %v", resp, err)
		}
	})
}

func TestDiscard(t *testing.T) {
	t.Parallel()
	const limit = 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Discard(w, r.Body, 2*limit, 2*time.Second)
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		size    int
		answers bool
	}{
		{"within the bound", 2 * limit, true},
		{"far over the bound", 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The client writes its whole body before it reads.
			conn := dial(t, srv, fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", tc.size))
			_, werr := conn.Write([]byte(strings.Repeat("x", tc.size)))
			if tc.answers {
				if werr != nil {
					t.Fatalf("write: %v", werr)
				}
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
					t.Fatalf("answer %v %v, want 413 and Connection: close", resp, err)
				}
				return
			}
			if werr == nil {
				// The write may fit the socket buffers; the server closes anyway.
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err := io.ReadAll(conn)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("connection not closed")
				}
			}
		})
	}
}
