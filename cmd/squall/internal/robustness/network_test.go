package robustness

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Network is the raft network of a cluster: one TCP proxy in front of
// each node's raft port, which every other node dials (the node
// advertises the proxy's address). Nodes are told apart by the source IP
// of their connections (each node has its own loopback IP and dials from
// it), so a proxy knows which node a connection comes from and can refuse
// it. A partition blocks pairs of nodes in both directions: the proxy of
// each refuses the other's connections and cuts the open ones.
//
// Its methods are safe for concurrent use.
type Network struct {
	mu      sync.Mutex
	nodeOf  map[string]int     // source IP → node index
	blocked map[[2]int]bool    // (from, to) pairs that cannot connect
	proxies map[int]*proxy     // by the index of the node behind it
	pipes   map[*pipe]struct{} // open proxied connections
	closed  bool
}

// NewNetwork returns a network without proxies; the test's end closes it.
func NewNetwork(t *testing.T) *Network {
	n := &Network{
		nodeOf:  make(map[string]int),
		blocked: make(map[[2]int]bool),
		proxies: make(map[int]*proxy),
		pipes:   make(map[*pipe]struct{}),
	}
	t.Cleanup(n.close)
	return n
}

// proxy accepts the connections to one node's raft port.
type proxy struct {
	node   int
	ln     net.Listener
	target string
	wg     sync.WaitGroup
}

// pipe is one proxied connection, from node from to node to.
type pipe struct {
	from, to       int
	client, server net.Conn
}

func (p *pipe) close() {
	p.client.Close()
	p.server.Close()
}

// AddNode registers node (an index) whose connections come from ip and
// starts its proxy on ip (a free port), forwarding to target, the node's
// raft listen address. It returns the proxy's address, which the node
// advertises.
func (n *Network) AddNode(node int, ip, target string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	p := &proxy{node: node, ln: ln, target: target}
	n.mu.Lock()
	n.nodeOf[ip] = node
	n.proxies[node] = p
	n.mu.Unlock()
	p.wg.Add(1)
	go n.accept(p)
	return ln.Addr().String(), nil
}

func (n *Network) accept(p *proxy) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			n.serve(p, c)
		}()
	}
}

// serve proxies c to p's node unless its source is blocked.
func (n *Network) serve(p *proxy, c net.Conn) {
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	n.mu.Lock()
	from, known := n.nodeOf[host]
	if !known {
		from = -1
	}
	refused := n.closed || n.blocked[[2]int{from, p.node}]
	n.mu.Unlock()
	if refused {
		c.Close()
		return
	}
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close() // the node is down: the dialer sees the connection close
		return
	}
	pp := &pipe{from: from, to: p.node, client: c, server: s}
	n.mu.Lock()
	if n.closed || n.blocked[[2]int{from, p.node}] {
		n.mu.Unlock()
		pp.close()
		return
	}
	n.pipes[pp] = struct{}{}
	n.mu.Unlock()
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		pp.close()
		done <- struct{}{}
	}
	go copyHalf(s, c)
	copyHalf(c, s)
	<-done
	n.mu.Lock()
	delete(n.pipes, pp)
	n.mu.Unlock()
}

// Partition splits the nodes into groups that cannot reach each other in
// either direction; nodes within a group still can, and a node in no
// group is cut from every other node. It replaces the previous partition.
func (n *Network) Partition(groups ...[]int) {
	group := make(map[int]int)
	for g, nodes := range groups {
		for _, node := range nodes {
			group[node] = g + 1
		}
	}
	n.mu.Lock()
	clear(n.blocked)
	for a := range n.proxies {
		for b := range n.proxies {
			if a != b && (group[a] == 0 || group[a] != group[b]) {
				n.blocked[[2]int{a, b}] = true
			}
		}
	}
	var cut []*pipe
	for p := range n.pipes {
		if n.blocked[[2]int{p.from, p.to}] {
			cut = append(cut, p)
		}
	}
	n.mu.Unlock()
	for _, p := range cut {
		p.close()
	}
}

// Isolate cuts node from every other node; the others stay connected.
func (n *Network) Isolate(node int) {
	var rest []int
	n.mu.Lock()
	for other := range n.proxies {
		if other != node {
			rest = append(rest, other)
		}
	}
	n.mu.Unlock()
	n.Partition([]int{node}, rest)
}

// Heal removes every partition.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.blocked)
	n.mu.Unlock()
}

// Blocked reports whether node from cannot connect to node to.
func (n *Network) Blocked(from, to int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.blocked[[2]int{from, to}]
}

// close stops the proxies and closes every proxied connection.
func (n *Network) close() {
	n.mu.Lock()
	n.closed = true
	proxies := make([]*proxy, 0, len(n.proxies))
	for _, p := range n.proxies {
		proxies = append(proxies, p)
	}
	pipes := make([]*pipe, 0, len(n.pipes))
	for p := range n.pipes {
		pipes = append(pipes, p)
	}
	n.mu.Unlock()
	for _, p := range proxies {
		p.ln.Close()
	}
	for _, p := range pipes {
		p.close()
	}
	for _, p := range proxies {
		p.wg.Wait()
	}
}
