package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/cmd/squall/internal/webhookload"
	"github.com/squallhq/squall/internal/joinmute"
	"github.com/squallhq/squall/internal/nettest"
	"github.com/squallhq/squall/internal/polltest"
)

// The load of TestDistributed: one call per e2eInterval and satellite, at
// most e2eInFlight in flight per satellite, each within e2eCallTimeout. It
// runs until the failures are over, e2eStepCalls calls (all satellites)
// between two failures and e2eTailCalls after the last one, and stops at
// e2eMaxPerSatellite calls to each satellite whatever happens.
const (
	e2eSatellites      = 2
	e2eHooksPerSat     = 3
	e2eStepCalls       = 100
	e2eTailCalls       = 300
	e2eMaxPerSatellite = 2000
	e2eInterval        = 40 * time.Millisecond
	e2eInFlight        = 32
	e2eCallTimeout     = 20 * time.Second
	e2ePartitions      = 4
	e2eTopic           = "squall.events"
	e2eDLQTopic        = "squall.events.dlq"
	e2eGroup           = "squall-e2e"
	e2eStartupTimeout  = 30 * time.Second
	// e2eAckedWhileDown is how many webhooks are acknowledged (spooled)
	// while the broker is down before it is started again: about 2 s.
	e2eAckedWhileDown = 100
)

// TestDistributed runs the distributed shape with the real binary on
// loopback: three masters (one bootstraps, two join), two engines in one
// consumer group, two satellites with their own webhook folders and spools,
// and a Kafka-protocol broker (kfake, in this process, persisted in a data
// dir). A tree is deployed through the API; its rule posts every event to a
// receiver in this process. Webhooks go to both satellites at a steady rate
// while the master leader is killed (a changed tree is then deployed through
// the new leader, and the killed master restarts from its data and catches
// up), the broker is stopped and restarted on the same port with
// its data (meanwhile a satellite with events in its spool is killed and
// started again), and one engine is killed. Every acknowledged webhook must
// produce its action at least once; duplicates are counted and reported,
// not failed.
func TestDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test of the distributed shape: skipped in -short mode")
	}
	began := time.Now()
	dir := t.TempDir()

	keyFile, admin, engineToken := clusterTokens(t, dir, "e2e")

	// Cleanups run last-registered first: satellites, engines, masters,
	// the broker, the receiver.
	rx := newActionReceiver(t)
	broker := newRestartableBroker(t, filepath.Join(dir, "kafka"))

	// Masters: m1 bootstraps, m2 and m3 join through it.
	auth := []string{"--token-hmac-key-file", keyFile}
	masters := startMasterCluster(t, dir, admin, auth...)
	m1, m2, m3 := masters[0], masters[1], masters[2]

	// Deploy the tree through a follower (forwarded to the leader).
	tree := bytes.ReplaceAll(mustRead(t, "testdata/e2e/tree.json"), []byte("RECEIVER_URL"), []byte(rx.url))
	apitest.DeployTree(t, m2.Base, admin, tree)

	// Engines: both know every master and share the consumer group.
	actionsConfig := filepath.Join(dir, "actions.json")
	writeFile(t, actionsConfig, `{"http": {"timeout": "5s", "allowed_hosts": ["127.0.0.1"]}, "retry": {"max_attempts": 10, "base_delay": "100ms", "max_delay": "1s", "jitter": 0.5}}`)
	masterURLs := strings.Join([]string{m1.Base, m2.Base, m3.Base}, ",")
	var engines []*proctest.Proc
	for i := 1; i <= 2; i++ {
		engines = append(engines, startE2E(t, fmt.Sprintf("e%d", i),
			"engine", "--master", masterURLs, "--token-file", engineToken, "--kafka-brokers", broker.addr,
			"--group", e2eGroup, "--http", "127.0.0.1:0", "--actions-config", actionsConfig,
			"--kafka-session-timeout", "6s", "--kafka-heartbeat-interval", "1s", "--kafka-rebalance-timeout", "6s"))
	}
	proctest.Wait(t, e2eStartupTimeout, "both engines ready with a share of the partitions", engines, func() bool {
		return engineShares(engines)
	})

	// Satellites, each with its own webhook folder and spool.
	satArgs := func(name, httpAddr string) []string {
		return []string{"satellite", "--http", httpAddr, "--name", name, "--webhooks-dir", filepath.Join(dir, name, "webhooks"),
			"--kafka-brokers", broker.addr, "--spool-dir", filepath.Join(dir, name, "spool")}
	}
	var sats []*proctest.Proc
	for s := range e2eSatellites {
		name := fmt.Sprintf("sat%d", s)
		hooks := filepath.Join(dir, name, "webhooks")
		if err := os.MkdirAll(hooks, 0o755); err != nil {
			t.Fatal(err)
		}
		for h := range e2eHooksPerSat {
			id := webhookload.HookID(s, h)
			writeFile(t, filepath.Join(hooks, id+".json"), fmt.Sprintf(`{"id": %q, "token": %q, "tenant_id": "tenant-%s",
			  "collector_config": {"event_type": "e2e", "payload": {"id": "${id}"}}}`, id, "token-0123456789-"+id, id))
		}
		sats = append(sats, startE2E(t, name, satArgs(name, "127.0.0.1:0")...))
	}
	proctest.Wait(t, e2eStartupTimeout, "both satellites ready", sats, func() bool {
		return satelliteStatus(sats[0]).Ready && satelliteStatus(sats[1]).Ready
	})
	t.Logf("cluster up in %s", time.Since(began).Round(time.Millisecond))

	// The load runs in its own goroutines while this one breaks things.
	load := webhookload.New(webhookload.Config{Interval: e2eInterval, InFlight: e2eInFlight, MaxPerSatellite: e2eMaxPerSatellite,
		HooksPerSatellite: e2eHooksPerSat, CallTimeout: e2eCallTimeout, Token: func(hook string) string { return "token-0123456789-" + hook }})
	ctx, cancel := context.WithCancel(t.Context())
	var senders sync.WaitGroup
	t.Cleanup(func() { cancel(); senders.Wait() }) // before the processes stop
	failuresOver := make(chan struct{})
	for s, sat := range sats {
		base := sat.Base
		senders.Go(func() { load.Send(ctx, s, func() string { return base }, failuresOver) })
	}
	all := append(append(append([]*proctest.Proc{}, masters...), engines...), sats...)
	sentMore := func(n int64) {
		t.Helper()
		target := load.Sent() + n
		proctest.Wait(t, time.Minute, fmt.Sprintf("%d more webhooks sent", n), nil, func() bool { return load.Sent() >= target })
	}

	// 1. Kill the master leader; the other two elect a new one.
	sentMore(e2eStepCalls)
	leaderID := agreedLeader(masters, admin, "")
	if leaderID == "" {
		t.Fatal("no agreed master leader")
	}
	var leader *proctest.Proc
	var survivors []*proctest.Proc
	for _, m := range masters {
		if m.Name == leaderID {
			leader = m
		} else {
			survivors = append(survivors, m)
		}
	}
	if leader == nil {
		t.Fatalf("leader %q is none of the masters", leaderID)
	}
	leader.Kill()
	killedAt := time.Now()
	proctest.Wait(t, 30*time.Second, "a new master leader", all, func() bool {
		return agreedLeader(survivors, admin, leaderID) != ""
	})
	t.Logf("master leader %s killed; %s leads after %s", leaderID, agreedLeader(survivors, admin, leaderID), time.Since(killedAt).Round(time.Millisecond))
	if code, body := apitest.Call(t.Context(), http.MethodGet, survivors[0].Base+"/api/v2_beta/config/active/tree/info/all", admin, nil, ""); code != http.StatusOK ||
		!bytes.Contains(body, []byte(`"rules_count":1`)) {
		t.Fatalf("active tree after the failover: %d %s", code, body)
	}
	// The new leader deploys a changed tree; the engines, whose first
	// master may be the dead one, follow it.
	treeIndex := engineStatus(engines[0]).TreeIndex
	apitest.DeployTree(t, survivors[0].Base, admin, bytes.ReplaceAll(tree, []byte(`"name": "notify"`), []byte(`"name": "notify_v2"`)))
	proctest.Wait(t, 30*time.Second, "both engines on the tree deployed after the failover", all, func() bool {
		a, b := engineStatus(engines[0]), engineStatus(engines[1])
		return a.TreeIndex > treeIndex && a.TreeIndex == b.TreeIndex
	})
	t.Logf("tree redeployed through %s: the engines moved from index %d to %d", survivors[0].Name, treeIndex, engineStatus(engines[0]).TreeIndex)
	// The killed master comes back from its data dir on its addresses
	// and catches up with the tree deployed without it.
	view, _ := clusterView(survivors[0], admin)
	i := slices.IndexFunc(view.Members, func(m e2eMember) bool { return m.ID == leaderID })
	if i < 0 {
		t.Fatalf("%s is no longer a member: %+v", leaderID, view)
	}
	back := startE2E(t, leaderID+"-restarted", e2eMasterArgs(dir, leaderID, leader.Addr, view.Members[i].RaftAddr, auth, e2eJoinSecret(dir))...)
	all = append(all, back)
	proctest.Wait(t, 30*time.Second, "the restarted master in the cluster with the redeployed tree", all, func() bool {
		a, okA := clusterView(back, admin)
		b, okB := clusterView(survivors[0], admin)
		return okA && okB && agreedLeader([]*proctest.Proc{back, survivors[0], survivors[1]}, admin, "") != "" &&
			a.ActiveIndex > 0 && a.ActiveIndex == b.ActiveIndex
	})
	t.Logf("master %s restarted from its data and caught up", leaderID)

	// 2. Stop the broker; the satellites spool. Restart it on the same
	// port with its data once both took events into their spools.
	sentMore(e2eStepCalls)
	broker.stop()
	stoppedAt := time.Now()
	ackedAtStop := load.Acked()
	proctest.Wait(t, 30*time.Second, "both satellites spooling events", all, func() bool {
		for _, s := range sats {
			if st := satelliteStatus(s); st.Mode != "spooling" || st.Spool.Records == 0 {
				return false
			}
		}
		return load.Acked() >= ackedAtStop+e2eAckedWhileDown
	})
	spooled := satelliteStatus(sats[0]).Spool.Records + satelliteStatus(sats[1]).Spool.Records
	// A satellite that crashes with acknowledged events in its spool
	// sends them once it is back: kill one and start it again on its
	// address with its spool. Calls meanwhile fail, unacknowledged.
	crashed := sats[1]
	crashed.Kill()
	sats[1] = startE2E(t, crashed.Name+"-restarted", satArgs(crashed.Name, crashed.Addr)...)
	all = append(all, sats[1])
	proctest.Wait(t, e2eStartupTimeout, "the restarted satellite ready with the spool of its first run", all, func() bool {
		st := satelliteStatus(sats[1])
		return st.Ready && st.Mode == "spooling" && st.Spool.Records > 0
	})
	broker.start()
	restartedAt := time.Now()
	t.Logf("broker down for %s; %d webhooks acknowledged meanwhile, %d events in the spools when %s was killed and restarted",
		time.Since(stoppedAt).Round(time.Millisecond), load.Acked()-ackedAtStop, spooled, crashed.Name)

	// Usually 4-5 s with a 6 s session timeout; once in about 45 runs
	// it took 41 s, as if the group waited for kafka-go's 30 s rebalance
	// timeout.
	proctest.Wait(t, 60*time.Second, "both engines back in the group with a share of the partitions", all, func() bool {
		return engineShares(engines)
	})
	t.Logf("engines back in the group %s after the broker restart", time.Since(restartedAt).Round(time.Millisecond))

	// 3. Kill one engine; the other takes its partitions over.
	sentMore(e2eStepCalls)
	victim := engines[1]
	t.Logf("killing engine %s (partitions %v)", victim.Name, engineStatus(victim).Partitions)
	victim.Kill()
	engineKilledAt := time.Now()

	sentMore(e2eTailCalls)
	close(failuresOver)
	senders.Wait()
	t.Logf("load done: %d sent, %d acknowledged, %s after start", load.Sent(), load.Acked(), time.Since(began).Round(time.Millisecond))

	// Every acknowledged webhook produced its action at least once.
	ids := load.AckedIDs()
	if !polltest.Until(t.Context(), 75*time.Second, func() bool { return len(rx.missing(ids)) == 0 }) {
		missing := rx.missing(ids)
		t.Fatalf("%d of %d acknowledged webhooks produced no action within 75s, e.g. %v\n%s",
			len(missing), len(ids), missing[:min(len(missing), 20)], proctest.Tails(all))
	}
	proctest.Wait(t, 30*time.Second, "the surviving engine owning every partition", all, func() bool {
		return len(engineStatus(engines[0]).Partitions) == e2ePartitions
	})
	t.Logf("engine %s owns every partition %s after %s was killed", engines[0].Name, time.Since(engineKilledAt).Round(time.Millisecond), victim.Name)
	proctest.Wait(t, 30*time.Second, "both satellites drained their spools", all, func() bool {
		for _, s := range sats {
			if st := satelliteStatus(s); st.Mode != "direct" || st.Spool.Records != 0 {
				return false
			}
		}
		return true
	})
	actions, distinct, dups := rx.counts()
	if dups > 0 {
		dupIDs := rx.duplicated()
		t.Logf("events with more than one action (at-least-once delivery): %d, e.g. %v", len(dupIDs), dupIDs[:min(len(dupIDs), 10)])
	}
	t.Logf("webhooks: %d sent, %d acknowledged (not acknowledged: %v); actions: %d for %d events, %d duplicates; %s in all",
		load.Sent(), len(ids), load.Failures(), actions, distinct, dups, time.Since(began).Round(time.Millisecond))
	if wrong := rx.wrongTenants(); len(wrong) > 0 {
		t.Errorf("%d actions carry the wrong tenant, e.g. %v", len(wrong), wrong[:min(len(wrong), 10)])
	}
	if sent := load.Sent(); int64(len(ids)) < sent/2 {
		t.Errorf("only %d of %d webhooks acknowledged", len(ids), sent)
	}
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startE2E starts the binary with args as startRole does, and stops it
// with SIGTERM when the test ends, checking that it exits cleanly.
func startE2E(t testing.TB, name string, args ...string) *proctest.Proc {
	t.Helper()
	p := startRole(t, name, squallCmd(t, nil, args...))
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// e2eCluster is a master's GET /squall/v1/cluster.
type e2eCluster struct {
	NodeID      string      `json:"node_id"`
	LeaderID    string      `json:"leader_id"`
	ActiveIndex uint64      `json:"active_index"`
	Members     []e2eMember `json:"members"`
}

type e2eMember struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

// clusterView returns m's view of the cluster; false if m did not answer.
func clusterView(m *proctest.Proc, token string) (e2eCluster, bool) {
	var info e2eCluster
	code, body := apitest.Call(context.Background(), http.MethodGet, m.Base+"/squall/v1/cluster", token, nil, "")
	return info, code == http.StatusOK && json.Unmarshal(body, &info) == nil
}

// e2eMasterArgs is the command line of master id of a test cluster: its
// data in dir/id, its addresses httpAddr and raftAddr, auth (the flags by
// which it checks tokens), then more.
func e2eMasterArgs(dir, id, httpAddr, raftAddr string, auth []string, more ...string) []string {
	args := []string{"master", "--node-id", id, "--data-dir", filepath.Join(dir, id), "--http", httpAddr, "--raft", raftAddr}
	return append(append(args, auth...), more...)
}

// e2eJoinSecret is the flag that hands a master the join secret m1 of
// the test cluster in dir wrote into its data dir.
func e2eJoinSecret(dir string) string {
	return "--join-token-file=" + filepath.Join(dir, "m1", "join.token")
}

// clusterTokens writes into dir the HMAC key the masters of a test
// cluster sign tokens with and the engines' token file (view and
// fleet_report on the whole tree), and signs an admin token for user.
func clusterTokens(t testing.TB, dir, user string) (keyFile, admin, engineToken string) {
	t.Helper()
	keyFile = filepath.Join(dir, "hmac.key")
	writeFile(t, keyFile, user+"-0123456789abcdef0123456789abcdef\n")
	admin = strings.TrimSpace(mustRun(t, "token", "--user", user, "--auth", "all=root:admin", "--hmac-key-file", keyFile))
	engineToken = filepath.Join(dir, "engine.token")
	writeFile(t, engineToken, mustRun(t, "token", "--user", "engine", "--auth", "all=root:view,fleet_report", "--hmac-key-file", keyFile))
	return keyFile, admin, engineToken
}

// startMasterCluster starts three master processes, m1 to m3, on
// free addresses with their data under dir and auth (the flags by which
// they check tokens): m1 bootstraps, m2 and m3 join through it with the
// join secret m1 wrote. It returns them once all three agree on a leader
// (asked with admin's token).
func startMasterCluster(t *testing.T, dir, admin string, auth ...string) []*proctest.Proc {
	t.Helper()
	start := func(id string, more ...string) *proctest.Proc {
		return startE2E(t, id, e2eMasterArgs(dir, id, "127.0.0.1:0", "127.0.0.1:0", auth, more...)...)
	}
	m1 := start("m1", "--bootstrap")
	m2 := start("m2", "--join", m1.Base, e2eJoinSecret(dir))
	m3 := start("m3", "--join", m1.Base, e2eJoinSecret(dir))
	masters := []*proctest.Proc{m1, m2, m3}
	proctest.Wait(t, e2eStartupTimeout, "a 3-node master cluster", masters, func() bool { return agreedLeader(masters, admin, "") != "" })
	return masters
}

// agreedLeader returns the leader every master of ms reports, if they all
// report the same one, see three members, and the leader is not notID;
// else "".
func agreedLeader(ms []*proctest.Proc, token, notID string) string {
	leader := ""
	for _, m := range ms {
		info, ok := clusterView(m, token)
		if !ok || info.LeaderID == "" || info.LeaderID == notID || len(info.Members) != 3 || (leader != "" && info.LeaderID != leader) {
			return ""
		}
		leader = info.LeaderID
	}
	return leader
}

// engineShares reports whether both engines are ready and share the
// partitions.
func engineShares(engines []*proctest.Proc) bool {
	a, b := engineStatus(engines[0]), engineStatus(engines[1])
	return a.Ready && b.Ready && len(a.Partitions) > 0 && len(b.Partitions) > 0 &&
		len(a.Partitions)+len(b.Partitions) == e2ePartitions
}

func engineStatus(p *proctest.Proc) apitest.EngineStatus {
	var st apitest.EngineStatus
	apitest.Ready(p.Base, &st)
	return st
}

func satelliteStatus(p *proctest.Proc) apitest.SatelliteStatus {
	var st apitest.SatelliteStatus
	apitest.Ready(p.Base, &st)
	return st
}

// restartableBroker is a one-broker kfake cluster on a fixed loopback port
// whose data lives in a directory, so that it can be stopped and started
// again with its topics, records and committed offsets.
type restartableBroker struct {
	t       *testing.T
	addr    string
	dataDir string

	mu sync.Mutex
	c  *kfake.Cluster
}

func newRestartableBroker(t *testing.T, dataDir string) *restartableBroker {
	t.Helper()
	b := &restartableBroker{t: t, dataDir: dataDir}
	// The port was free when nettest.FixedPort looked; another test process may
	// take it before the broker listens. Nobody knows the address yet, so
	// the first start may move to another one.
	for attempt := 1; ; attempt++ {
		b.addr = nettest.FixedPort(t)
		err := b.listen()
		if err == nil {
			break
		}
		inUse := errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
		if !inUse || attempt == 10 {
			t.Fatalf("start broker on %s: %v", b.addr, err)
		}
	}
	t.Cleanup(b.stop)
	return b
}

// start starts the broker on its port, with the data of an earlier run.
func (b *restartableBroker) start() {
	b.t.Helper()
	if err := b.listen(); err != nil {
		b.t.Fatalf("start broker on %s: %v", b.addr, err)
	}
}

// listen starts the broker on b.addr.
func (b *restartableBroker) listen() error {
	_, portText, _ := net.SplitHostPort(b.addr)
	port, _ := strconv.Atoi(portText)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(b.dataDir),
		kfake.SeedTopics(e2ePartitions, e2eTopic, e2eDLQTopic),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return joinmute.Listen(network, b.addr) }))
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.c = c
	b.mu.Unlock()
	return nil
}

// stop closes the broker; its data stays.
func (b *restartableBroker) stop() {
	b.mu.Lock()
	c := b.c
	b.c = nil
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// actionReceiver is the target of the tree's http action: it counts the
// actions per event id, and the actions whose tenant is not the one of the
// webhook the id was sent to.
type actionReceiver struct {
	url string

	mu          sync.Mutex
	seen        map[string]int
	wrongTenant []string
}

func newActionReceiver(t *testing.T) *actionReceiver {
	t.Helper()
	rx := &actionReceiver{seen: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID     string `json:"id"`
			Tenant string `json:"tenant"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.ID == "" {
			http.Error(w, "want {\"id\": ...}", http.StatusBadRequest)
			return
		}
		rx.mu.Lock()
		defer rx.mu.Unlock()
		rx.seen[body.ID]++
		// An id is "<webhook>-<sequence>", its tenant "tenant-<webhook>".
		if i := strings.LastIndexByte(body.ID, '-'); i < 0 || body.Tenant != "tenant-"+body.ID[:i] {
			rx.wrongTenant = append(rx.wrongTenant, body.ID+": "+body.Tenant)
		}
	}))
	t.Cleanup(srv.Close)
	rx.url = srv.URL + "/action"
	return rx
}

// wrongTenants returns the actions seen with a tenant that is not their
// webhook's.
func (rx *actionReceiver) wrongTenants() []string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return slices.Clone(rx.wrongTenant)
}

// missing returns the ids of ids no action arrived for.
func (rx *actionReceiver) missing(ids []string) []string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	var out []string
	for _, id := range ids {
		if rx.seen[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// counts returns the actions received, the distinct ids among them, and
// the actions beyond the first of each id.
func (rx *actionReceiver) counts() (actions, distinct, duplicates int) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	for _, n := range rx.seen {
		actions += n
		distinct++
		duplicates += n - 1
	}
	return actions, distinct, duplicates
}

// duplicated returns, sorted, the ids with more than one action, each
// with its count ("id×n").
func (rx *actionReceiver) duplicated() []string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	var out []string
	for id, n := range rx.seen {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", id, n))
		}
	}
	slices.Sort(out)
	return out
}
