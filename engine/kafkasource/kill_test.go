package kafkasource

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"net"
	"sync"
)

// Kafka request API keys the kill points name.
const (
	apiFetch       int16 = 1
	apiOffsetFetch int16 = 9
	apiJoinGroup   int16 = 11
	apiHeartbeat   int16 = 12
	apiSyncGroup   int16 = 14
)

// killPoint is the moment a member dies: when it sends its n-th request
// of an API (1: the first), before the request leaves or just after.
type killPoint struct {
	api  int16
	n    int
	sent bool
}

// errKilled is what the connections of a killed member return.
var errKilled = errors.New("member process killed")

// memberProcess stands for the process of one group member: a kill closes
// every connection it has to the brokers at once and refuses new ones,
// as the kernel does for a process SIGKILLed. It reads the requests the
// member writes (kafka-go writes each one whole, from a frame boundary)
// to die at its kill point.
type memberProcess struct {
	at killPoint

	mu     sync.Mutex
	conns  map[*memberConn]struct{}
	sent   map[int16]int // requests by API key
	dead   bool
	killed chan struct{}
}

func newMemberProcess(at killPoint) *memberProcess {
	return &memberProcess{at: at, conns: map[*memberConn]struct{}{}, sent: map[int16]int{}, killed: make(chan struct{})}
}

// dial is the member's SourceConfig.netDial.
func (p *memberProcess) dial(ctx context.Context, network, address string) (net.Conn, error) {
	p.mu.Lock()
	dead := p.dead
	p.mu.Unlock()
	if dead {
		return nil, errKilled
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	mc := &memberConn{Conn: c, p: p}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		_ = c.Close()
		return nil, errKilled
	}
	p.conns[mc] = struct{}{}
	return mc, nil
}

// request counts a request of api and reports whether it is the kill
// point.
func (p *memberProcess) request(api int16) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent[api]++
	return !p.dead && api == p.at.api && p.sent[api] == p.at.n
}

// requests returns the requests the member sent, by API key.
func (p *memberProcess) requests() map[int16]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.sent)
}

// kill closes every connection of the member and refuses new ones.
func (p *memberProcess) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
	p.dead = true
	for c := range p.conns {
		_ = c.Conn.Close()
	}
	close(p.killed)
}

// memberConn is a connection of a memberProcess.
type memberConn struct {
	net.Conn
	p *memberProcess

	mu   sync.Mutex
	rest int // bytes of the current request still to come
	// killAfter: the kill point's request is being written; the member
	// dies once it left whole.
	killAfter bool
}

func (c *memberConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for off := 0; off < len(b); {
		if c.rest > 0 {
			n := min(c.rest, len(b)-off)
			c.rest -= n
			off += n
			continue
		}
		if len(b)-off < 6 {
			break // not a request kafka-go writes
		}
		size := int(binary.BigEndian.Uint32(b[off:]))
		if c.p.request(int16(binary.BigEndian.Uint16(b[off+4:]))) {
			if !c.p.at.sent {
				n, _ := c.Conn.Write(b[:off])
				c.p.kill()
				return n, errKilled
			}
			c.killAfter = true
		}
		c.rest = 4 + size
	}
	n, err := c.Conn.Write(b)
	if c.killAfter && c.rest == 0 {
		c.p.kill()
	}
	return n, err
}

func (c *memberConn) Close() error {
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	return c.Conn.Close()
}

// killStages are the points of joining a group at which a member dies.
var killStages = []struct {
	name string
	at   killPoint
}{
	{"before its JoinGroup left", killPoint{apiJoinGroup, 1, false}},
	{"waiting for its JoinGroup answer", killPoint{apiJoinGroup, 1, true}},
	{"before its SyncGroup left", killPoint{apiSyncGroup, 1, false}},
	{"waiting for its SyncGroup answer", killPoint{apiSyncGroup, 1, true}},
	{"fetching its offsets", killPoint{apiOffsetFetch, 1, true}},
	{"at its first heartbeat", killPoint{apiHeartbeat, 1, true}},
	{"at its first fetch", killPoint{apiFetch, 1, true}},
}
