package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// With raft mutual TLS, every raft connection is bound to the node id its
// peer's certificate names (its common name or a DNS name, as for joins):
//
//   - an accepted connection carries RPCs whose header names their sender
//     (the leader of an AppendEntries, the candidate of a vote): each RPC is
//     read and checked before raft reads it, and one whose sender the
//     certificate does not name closes the connection, so a holder of a
//     valid cluster certificate for one node cannot speak as another
//     member (identityConn);
//   - a dialled connection must present a certificate that names the node
//     id raft dials it for (streamLayer.Dial, from the id the transport
//     records before each RPC: streamLayer.expect).

// errPeerIdentity refuses a raft connection or RPC whose peer's certificate
// does not name the node it speaks for.
var errPeerIdentity = errors.New("the raft peer's certificate does not name the node it speaks for")

// The RPC types of raft's network transport (net_transport.go).
const (
	rpcAppendEntries uint8 = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

// identityConn is an accepted raft TLS connection that hands raft one RPC
// at a time, after checking its sender against the peer's certificate.
// Read is for one goroutine (raft's handler of the connection).
type identityConn struct {
	*serverConn

	in   frameReader
	dec  *codec.Decoder
	out  []byte // the checked bytes raft has not read yet
	data int64  // the snapshot bytes that follow an InstallSnapshot
	err  error  // the refusal, once an RPC was refused
}

func newIdentityConn(c *serverConn) *identityConn {
	ic := &identityConn{serverConn: c}
	ic.in.src = c
	ic.dec = codec.NewDecoder(&ic.in, &codec.MsgpackHandle{})
	return ic
}

// Read implements net.Conn.
func (c *identityConn) Read(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.out) == 0 && c.data > 0 {
		n, err := c.in.Read(b[:min(int64(len(b)), c.data)])
		c.in.discard()
		c.data -= int64(n)
		return n, err
	}
	if len(c.out) == 0 {
		if err := c.next(); err != nil {
			if errors.Is(err, errPeerIdentity) {
				c.err = err
				_ = c.serverConn.Close()
			}
			return 0, err
		}
	}
	n := copy(b, c.out)
	c.out = c.out[n:]
	return n, nil
}

// next reads the next RPC, checks its sender and makes it the bytes to
// hand raft.
func (c *identityConn) next() error {
	typ, err := c.in.ReadByte()
	if err != nil {
		return err
	}
	var req raft.WithRPCHeader
	switch typ {
	case rpcAppendEntries:
		req = &raft.AppendEntriesRequest{}
	case rpcRequestVote:
		req = &raft.RequestVoteRequest{}
	case rpcInstallSnapshot:
		req = &raft.InstallSnapshotRequest{}
	case rpcTimeoutNow:
		req = &raft.TimeoutNowRequest{}
	case rpcRequestPreVote:
		req = &raft.RequestPreVoteRequest{}
	default:
		// raft refuses it too; a type a later raft adds must not pass
		// unchecked.
		return fmt.Errorf("%w: an rpc of unknown type %d", errPeerIdentity, typ)
	}
	if err := c.dec.Decode(req); err != nil {
		return fmt.Errorf("raft rpc: %w", err)
	}
	sender := string(req.GetRPCHeader().ID)
	if certs := c.peerCertificates(); !namesNode(certs, sender) {
		return fmt.Errorf("%w: an rpc from %q on a connection whose certificate is for %s", errPeerIdentity, sender, certNames(certs))
	}
	if s, ok := req.(*raft.InstallSnapshotRequest); ok {
		c.data = s.Size
	}
	c.out = c.in.drop()
	return nil
}

// peerCertificates returns the certificates the peer presented.
func (c *identityConn) peerCertificates() []*x509.Certificate {
	return c.serverConn.Conn.ConnectionState().PeerCertificates
}

// certNames describes whom a certificate chain names, for errors.
func certNames(certs []*x509.Certificate) string {
	if len(certs) == 0 {
		return "no one"
	}
	leaf := certs[0]
	return fmt.Sprintf("common name %q, DNS names %q", leaf.Subject.CommonName, leaf.DNSNames)
}

// frameReader reads from src and keeps what was read since the last drop,
// so that the bytes of one decoded RPC can be handed over as they came.
// It is an io.ByteScanner, so that the decoder reads exactly the bytes of
// a value and can give one back.
type frameReader struct {
	src io.Reader
	buf []byte // read from src, not dropped yet
	pos int    // buf[:pos] was consumed
}

// fill reads more from src.
func (f *frameReader) fill() error {
	if len(f.buf) == cap(f.buf) {
		f.buf = append(f.buf, make([]byte, max(4096, len(f.buf)))...)[:len(f.buf)]
	}
	n, err := f.src.Read(f.buf[len(f.buf):cap(f.buf)])
	f.buf = f.buf[:len(f.buf)+n]
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// Read implements io.Reader.
func (f *frameReader) Read(b []byte) (int, error) {
	if f.pos == len(f.buf) {
		if err := f.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(b, f.buf[f.pos:])
	f.pos += n
	return n, nil
}

// ReadByte implements io.ByteReader.
func (f *frameReader) ReadByte() (byte, error) {
	if f.pos == len(f.buf) {
		if err := f.fill(); err != nil {
			return 0, err
		}
	}
	f.pos++
	return f.buf[f.pos-1], nil
}

// UnreadByte implements io.ByteScanner.
func (f *frameReader) UnreadByte() error {
	if f.pos == 0 {
		return io.ErrNoProgress
	}
	f.pos--
	return nil
}

// drop returns a copy of the bytes consumed since the last drop and
// forgets them, keeping those read ahead.
func (f *frameReader) drop() []byte {
	out := append([]byte(nil), f.buf[:f.pos]...)
	f.discard()
	return out
}

// discard forgets the bytes consumed since the last drop.
func (f *frameReader) discard() {
	f.buf = append(f.buf[:0], f.buf[f.pos:]...)
	f.pos = 0
}

// checkOwn checks that this node's certificate names its id: the other
// masters refuse the RPCs of a node whose certificate does not.
func (l *streamLayer) checkOwn(id string) error {
	if l.server == nil || len(l.server.Certificates) == 0 {
		return nil
	}
	cert := l.server.Certificates[0]
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("raft tls certificate: %w", err)
		}
	}
	if !namesNode([]*x509.Certificate{leaf}, id) {
		return fmt.Errorf("raft tls certificate: it is for %s, not node %q: the other masters refuse raft connections from a node its certificate does not name (give it the node id as its common name or a DNS name)",
			certNames([]*x509.Certificate{leaf}), id)
	}
	return nil
}

// expect records that address is node id's, for the identity check of the
// connections dialled to it.
func (l *streamLayer) expect(address raft.ServerAddress, id raft.ServerID) {
	if l.client == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil {
		l.ids = make(map[raft.ServerAddress]raft.ServerID)
	}
	l.ids[address] = id
}

// expected returns the node id recorded for address.
func (l *streamLayer) expected(address raft.ServerAddress) (raft.ServerID, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, ok := l.ids[address]
	return id, ok
}

// checkDialled checks that a dialled TLS connection's certificate names
// the node id expected at address.
func (l *streamLayer) checkDialled(c *tls.Conn, address raft.ServerAddress) error {
	id, ok := l.expected(address)
	if !ok {
		return nil
	}
	if certs := c.ConnectionState().PeerCertificates; !namesNode(certs, string(id)) {
		return fmt.Errorf("%w: %s, dialled for node %q, presents a certificate for %s", errPeerIdentity, address, id, certNames(certs))
	}
	return nil
}

var _ net.Conn = (*identityConn)(nil)
