package nettest

import (
	"context"
	"errors"
	"net"
	"sync"
)

// ErrPartitioned is the error of a dial through a cut Partition.
var ErrPartitioned = errors.New("partitioned")

// Partition is a TCP network whose traffic can be cut, as a network
// partition cuts it: while cut it makes and accepts no connection, and
// cutting closes the open ones. It has the methods of the masters' raft
// network (store.Network), and one Partition can follow a node across
// restarts. The zero value is connected.
type Partition struct {
	mu    sync.Mutex
	cut   bool
	conns map[*partitionConn]struct{}
}

// Cut cuts the network: open connections are closed, new ones refused.
func (p *Partition) Cut() {
	p.mu.Lock()
	p.cut = true
	open := make([]*partitionConn, 0, len(p.conns))
	for c := range p.conns {
		open = append(open, c)
	}
	p.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// Heal lets connections through again.
func (p *Partition) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Listen listens on address; while the network is cut, the connections
// it accepts are closed at once.
func (p *Partition) Listen(address string) (net.Listener, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	return &partitionListener{Listener: ln, p: p}, nil
}

// Dial connects to address with d, or fails with ErrPartitioned while the
// network is cut.
func (p *Partition) Dial(ctx context.Context, d *net.Dialer, address string) (net.Conn, error) {
	if p.isCut() {
		return nil, ErrPartitioned
	}
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	return p.track(c)
}

func (p *Partition) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// track registers c so that Cut closes it, or closes it when the network
// is cut already.
func (p *Partition) track(c net.Conn) (net.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = c.Close()
		return nil, ErrPartitioned
	}
	if p.conns == nil {
		p.conns = make(map[*partitionConn]struct{})
	}
	pc := &partitionConn{Conn: c, p: p}
	p.conns[pc] = struct{}{}
	return pc, nil
}

type partitionListener struct {
	net.Listener
	p *Partition
}

// Accept implements net.Listener.
func (l *partitionListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if pc, err := l.p.track(c); err == nil {
			return pc, nil
		}
	}
}

type partitionConn struct {
	net.Conn
	p *Partition
}

// Close implements net.Conn.
func (c *partitionConn) Close() error {
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	return c.Conn.Close()
}
