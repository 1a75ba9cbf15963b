package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// TLSConfig enables mutual TLS on the raft port: every master presents its
// certificate and accepts only peers whose certificate the CA signed.
// Either all three files are set, or none.
type TLSConfig struct {
	// CertFile and KeyFile are this node's PEM certificate and key, used
	// both to accept and to dial; the certificate needs the server and
	// client auth extended key usages (or none).
	CertFile string
	KeyFile  string
	// CAFile is the PEM bundle of the CA that signs the masters' certificates.
	CAFile string
	// ServerName is the name a peer's certificate must carry (a DNS SAN),
	// e.g. one name shared by all masters, as Nomad's server.<region>.nomad.
	// Empty means the host of the address being dialled (a DNS or IP SAN).
	ServerName string
}

// Enabled reports whether TLS is configured.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" }

func (c TLSConfig) validate() error {
	if c.Enabled() && (c.CertFile == "" || c.KeyFile == "" || c.CAFile == "") {
		return errors.New("tls needs a certificate, a key and a CA file")
	}
	return nil
}

// load reads the files and returns the server and client configurations.
func (c TLSConfig) load() (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("load tls key pair: %w", err)
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("load tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("load tls ca: no certificate in %s", c.CAFile)
	}
	server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   c.ServerName, // empty: tls.Dialer uses the dialled host
	}
	return server, client, nil
}

// tlsHandshakeTimeout bounds the handshake of an accepted connection.
const tlsHandshakeTimeout = 10 * time.Second

// Network makes the connections of the raft transport, which runs TLS
// over them when it is configured (Config.Network). TCPNetwork is the
// operating system's TCP; a test can give a network it partitions.
type Network interface {
	// Listen listens on address ("host:port").
	Listen(address string) (net.Listener, error)
	// Dial connects to address with d (its source address), within ctx.
	Dial(ctx context.Context, d *net.Dialer, address string) (net.Conn, error)
}

// TCPNetwork is the Network of TCP connections.
type TCPNetwork struct{}

// Listen implements Network.
func (TCPNetwork) Listen(address string) (net.Listener, error) { return net.Listen("tcp", address) }

// Dial implements Network.
func (TCPNetwork) Dial(ctx context.Context, d *net.Dialer, address string) (net.Conn, error) {
	return d.DialContext(ctx, "tcp", address)
}

// streamLayer is the raft.StreamLayer of the store's network transport:
// plain TCP, or mutual TLS over TCP.
type streamLayer struct {
	ln        net.Listener
	network   Network
	advertise net.Addr
	server    *tls.Config // nil without TLS
	client    *tls.Config
	// source is the local address outbound connections are made from;
	// nil lets the operating system choose (Config.SourceIP).
	source net.Addr

	// The open connections, closed when the store closes.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// handlers counts the accepted connections whose raft handler has not
	// returned yet (it closes its connection when it does).
	handlers int
	// ids are the node ids of the addresses raft dials, with TLS
	// (expect).
	ids map[raft.ServerAddress]raft.ServerID
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// advertiseAddr is the address other nodes dial; a host name is allowed.
type advertiseAddr string

// Network implements net.Addr.
func (a advertiseAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a advertiseAddr) String() string { return string(a) }

// newStreamLayer listens on bind through network (nil: TCPNetwork).
// advertise is the address peers dial; if empty it is the listener's
// address, which must then be a specific IP.
func newStreamLayer(bind, advertise string, tc TLSConfig, network Network) (*streamLayer, error) {
	if network == nil {
		network = TCPNetwork{}
	}
	l := &streamLayer{network: network}
	if tc.Enabled() {
		var err error
		if l.server, l.client, err = tc.load(); err != nil {
			return nil, err
		}
	}
	ln, err := network.Listen(bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen: %w", err)
	}
	l.ln = ln
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			ln.Close()
			return nil, fmt.Errorf("advertise address %q: %w", advertise, err)
		}
		l.advertise = advertiseAddr(advertise)
		return l, nil
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft bind address %s cannot be advertised: set an advertise address", ln.Addr())
	}
	l.advertise = tcp
	return l, nil
}

// Accept implements net.Listener. A TLS connection does its handshake on
// first use, in raft's per-connection goroutine, within tlsHandshakeTimeout.
func (l *streamLayer) Accept() (net.Conn, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, err
	}
	if l.server != nil {
		c = newIdentityConn(&serverConn{Conn: tls.Server(c, l.server)})
	}
	tc := l.track(c)
	l.mu.Lock()
	tc.accepted = true
	l.handlers++
	l.mu.Unlock()
	return tc, nil
}

// Close implements net.Listener.
func (l *streamLayer) Close() error { return l.ln.Close() }

// Addr implements net.Listener: the advertised address.
func (l *streamLayer) Addr() net.Addr { return l.advertise }

// Dial implements raft.StreamLayer. With TLS the handshake, which verifies
// the peer's certificate, is part of the dial and of its timeout.
func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c, err := l.dial(ctx, string(address))
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*tls.Conn); ok {
		if err := l.checkDialled(tc, address); err != nil {
			_ = tc.Close()
			return nil, err
		}
	}
	return l.track(c), nil
}

// dial connects to address through the network, and completes the TLS
// handshake when TLS is on, within ctx.
func (l *streamLayer) dial(ctx context.Context, address string) (net.Conn, error) {
	c, err := l.network.Dial(ctx, l.dialer(), address)
	if err != nil || l.client == nil {
		return c, err
	}
	cfg := l.client
	if cfg.ServerName == "" { // verify the dialled host's name, as tls.Dial does
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// setSource makes outbound connections come from ip (Config.SourceIP);
// an empty ip lets the operating system choose.
func (l *streamLayer) setSource(ip string) error {
	if ip == "" {
		return nil
	}
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return fmt.Errorf("raft source ip %q: not an IP address", ip)
	}
	l.source = &net.TCPAddr{IP: parsed}
	return nil
}

// dialer returns the dialer of outbound connections: from the source IP
// when one is set.
func (l *streamLayer) dialer() *net.Dialer {
	d := &net.Dialer{}
	if l.source != nil {
		d.LocalAddr = l.source
	}
	return d
}

// closeConns closes every open connection (the store is closing). The
// socket is closed under the raft handler of an accepted connection, which
// then returns and closes its connection itself.
func (l *streamLayer) closeConns() {
	l.mu.Lock()
	open := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		open = append(open, c.(*trackedConn))
	}
	l.mu.Unlock()
	for _, c := range open {
		if c.accepted {
			c.Conn.Close()
		} else {
			c.Close()
		}
	}
}

// waitHandlers waits until the raft handlers of accepted connections have
// returned, or the timeout passes. A handler that was already past raft's
// shutdown check may still write the term or vote to the stable store;
// the store must stay open until it is done (raft panics on a failed write).
func (l *streamLayer) waitHandlers(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		n := l.handlers
		l.mu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// track registers c so that closeConns can close it.
func (l *streamLayer) track(c net.Conn) *trackedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		l.conns = make(map[net.Conn]struct{})
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc
}

// trackedConn removes itself from its stream layer when closed.
type trackedConn struct {
	net.Conn
	l *streamLayer
	// accepted is set for connections raft's handlers serve; released
	// records that the handler closed it.
	accepted, released bool
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	if c.accepted && !c.released {
		c.released = true
		c.l.handlers--
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// probe dials addr as raft would, completing the TLS handshake, checks
// that the certificate it presents names node id (with TLS), and hangs up.
func (l *streamLayer) probe(ctx context.Context, id, addr string) error {
	c, err := l.dial(ctx, addr)
	if err != nil {
		return err
	}
	return errors.Join(checkIdentity(c, id), c.Close())
}

// serverConn is an accepted TLS connection whose handshake runs with a
// deadline on first use, so a peer that never completes it cannot hold a
// raft connection goroutine forever.
type serverConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		if err := c.SetDeadline(time.Now().Add(tlsHandshakeTimeout)); err != nil {
			c.err = err
			return
		}
		if err := c.Handshake(); err != nil {
			c.err = err
			return
		}
		c.err = c.SetDeadline(time.Time{})
	})
	return c.err
}

// Read implements net.Conn.
func (c *serverConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// Write implements net.Conn.
func (c *serverConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// unpipelined is raft's network transport without pipelined replication:
// raft then sends a follower one AppendEntries at a time (each still
// carries up to raft's MaxAppendEntries entries) and waits for its
// answer. hashicorp/raft v1.7.3's pipeline can deadlock: when a follower
// answers with a newer term or a refusal, the goroutine that reads the
// answers stops, and the one that sends may already be blocked handing
// over its next request, while the pipeline's reader waits to hand over
// the previous answer. The leader then never replicates to that follower
// again, and raft's shutdown waits for the two goroutines for good (seen
// under load after elections and leadership transfers).
//
// It also records the node id of each address it sends an RPC to, for the
// identity check of raft mutual TLS (streamLayer.expect), and reports the
// outcome of every RPC, which logs the peers' outages (peerWatch).
type unpipelined struct {
	*raft.NetworkTransport
	peers *peerWatch
	layer *streamLayer
}

// AppendEntriesPipeline refuses: raft falls back to plain AppendEntries.
func (unpipelined) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// observe makes one RPC to the peer id at target: the stream layer
// expects id there, and the peer watch records the outcome.
func (t unpipelined) observe(id raft.ServerID, target raft.ServerAddress, rpc func() error) error {
	t.layer.expect(target, id)
	err := rpc()
	t.peers.result(id, target, err)
	return err
}

// AppendEntries implements raft.Transport (heartbeats too).
func (t unpipelined) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.observe(id, target, func() error { return t.NetworkTransport.AppendEntries(id, target, args, resp) })
}

// RequestVote implements raft.Transport.
func (t unpipelined) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.observe(id, target, func() error { return t.NetworkTransport.RequestVote(id, target, args, resp) })
}

// RequestPreVote implements raft.WithPreVote.
func (t unpipelined) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.observe(id, target, func() error { return t.NetworkTransport.RequestPreVote(id, target, args, resp) })
}

// InstallSnapshot implements raft.Transport.
func (t unpipelined) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.observe(id, target, func() error { return t.NetworkTransport.InstallSnapshot(id, target, args, resp, data) })
}

// TimeoutNow implements raft.Transport.
func (t unpipelined) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.observe(id, target, func() error { return t.NetworkTransport.TimeoutNow(id, target, args, resp) })
}

var (
	_ raft.Transport   = unpipelined{}
	_ raft.WithPreVote = unpipelined{}
)
