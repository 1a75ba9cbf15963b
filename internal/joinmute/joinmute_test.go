package joinmute

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// frame is a request of API key with a body of n bytes.
func frame(key int16, n int) []byte {
	b := make([]byte, 6+n)
	binary.BigEndian.PutUint32(b, uint32(2+n))
	binary.BigEndian.PutUint16(b[4:], uint16(key))
	return b
}

// connPair is a client's connection to a Listen listener and the
// broker's side of it, both closed when the test ends.
func connPair(t *testing.T) (client, broker net.Conn) {
	t.Helper()
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	broker, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	return client, broker
}

// readByte reads one byte of conn in a goroutine and delivers the read's
// error.
func readByte(conn net.Conn) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1))
		ch <- err
	}()
	return ch
}

// TestWrap: after a whole JoinGroup, the broker's side reads nothing, not
// even the client's close, until it has answered it; the answer to an
// earlier request, written after the JoinGroup was read, does not count.
func TestWrap(t *testing.T) {
	t.Parallel()
	client, broker := connPair(t)

	// An ApiVersions request, then a JoinGroup sent in two writes, then
	// the client dies.
	join := frame(joinGroupKey, 300)
	for _, b := range [][]byte{frame(18, 10), join[:3], join[3:]} {
		if _, err := client.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	client.Close()
	if _, err := io.ReadFull(broker, make([]byte, 16+306)); err != nil {
		t.Fatal(err)
	}

	eof := readByte(broker)
	notYet := func(what string) {
		t.Helper()
		select {
		case err := <-eof:
			t.Fatalf("the broker read %v %s", err, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	notYet("before answering anything")
	if _, err := broker.Write([]byte("answer to ApiVersions")); err != nil {
		t.Fatal(err)
	}
	notYet("after answering only the ApiVersions")
	_, _ = broker.Write([]byte("answer to JoinGroup")) // the client is gone: it may fail
	select {
	case err := <-eof:
		if err == nil { // EOF, or a reset: the answer found the client gone
			t.Fatal("the broker read bytes the client never sent")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the broker's read still waits after the JoinGroup's answer")
	}
}

// TestWrap_close: a muted read ends when the broker closes the
// connection.
func TestWrap_close(t *testing.T) {
	t.Parallel()
	client, broker := connPair(t)
	if _, err := client.Write(frame(joinGroupKey, 20)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(broker, make([]byte, 26)); err != nil {
		t.Fatal(err)
	}
	done := readByte(broker)
	broker.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the muted read outlived the connection")
	}
}

// TestWrap_tls: a TLS connection is left alone, whatever its bytes look
// like.
func TestWrap_tls(t *testing.T) {
	t.Parallel()
	client, broker := connPair(t)
	// A handshake record's first byte, then what would be a JoinGroup.
	if _, err := client.Write(append([]byte{tlsHandshake}, frame(joinGroupKey, 20)...)); err != nil {
		t.Fatal(err)
	}
	client.Close()
	if _, err := io.ReadFull(broker, make([]byte, 27)); err != nil {
		t.Fatal(err)
	}
	done := readByte(broker)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the broker read bytes the client never sent")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a TLS connection's read waits for an answer")
	}
}
