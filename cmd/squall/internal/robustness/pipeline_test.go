package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/cmd/squall/internal/webhookload"
	"github.com/squallhq/squall/internal/joinmute"
	"github.com/squallhq/squall/internal/nettest"
	"github.com/squallhq/squall/internal/polltest"
)

// The shape and load of TestPipeline.
const (
	pipeSatellites    = 2
	pipeEngines       = 2
	pipeHooksPerSat   = 2
	pipePartitions    = 4
	pipeTopic         = "squall.events"
	pipeDLQTopic      = "squall.events.dlq"
	pipeGroup         = "squall-pipeline"
	pipeInterval      = 10 * time.Millisecond // between two webhooks to one satellite
	pipeInFlight      = 32                    // webhooks in flight per satellite
	pipeCallTimeout   = 20 * time.Second
	pipeStartup       = 60 * time.Second
	pipeMaxPerSat     = 1_000_000 // the load's bound whatever the duration
	pipeAckedWhenDown = 400       // webhooks acknowledged (spooled) during an outage: about 2 s
	pipeStepCalls     = 200       // webhooks sent between two failures
	// The environment variables that make this test binary a broker
	// (TestPipelineBrokerProcess).
	envBrokerAddr = "SQUALL_PIPELINE_BROKER_ADDR"
	envBrokerData = "SQUALL_PIPELINE_BROKER_DATA"
)

// pipeTree posts every event's webhook id to the counting server
// (RECEIVER_URL) with an http action.
const pipeTree = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [{"Ruleset": {"name": "pipeline", "rules": [
    {"name": "count", "description": "every event reaches the counting server", "continue": true, "active": true,
     "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "pipeline"}, "WITH": {}},
     "actions": [{"id": "http", "payload": {"url": "RECEIVER_URL", "body": {"id": "${event.payload.id}"}}}]}
  ]}}]}}`

// TestPipelineBrokerProcess is the broker of TestPipeline when this test
// binary runs as one (the environment names its address and data
// directory): a one-broker kfake cluster persisted in its directory, until
// SIGTERM or the end of its standard input (its parent died).
func TestPipelineBrokerProcess(t *testing.T) {
	addr, data := os.Getenv(envBrokerAddr), os.Getenv(envBrokerData)
	if addr == "" || data == "" {
		t.Skip("the broker process of TestPipeline")
	}
	_, portText, _ := strings.Cut(addr, ":")
	port, _ := strconv.Atoi(portText)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(data),
		kfake.SeedTopics(pipePartitions, pipeTopic, pipeDLQTopic),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return joinmute.Listen(network, addr) }))
	if err != nil {
		t.Fatalf("start broker on %s: %v", addr, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	fmt.Printf(`{"msg": "broker listening", "addr": %q}`+"\n", c.ListenAddrs()[0])
	<-ctx.Done()
	c.Close()
	fmt.Println(`{"msg": "broker stopped"}`)
}

// pipeBroker is the broker process: stopped and started again on its port
// with its data.
type pipeBroker struct {
	t    *testing.T
	addr string
	data string
	n    int
	proc *proctest.Proc
}

func (b *pipeBroker) start() {
	b.t.Helper()
	b.n++
	cmd := exec.Command(os.Args[0], "-test.run=^TestPipelineBrokerProcess$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), envBrokerAddr+"="+b.addr, envBrokerData+"="+b.data)
	// Its standard input ends when this process dies.
	if _, err := cmd.StdinPipe(); err != nil {
		b.t.Fatal(err)
	}
	b.proc = startPipeProc(b.t, fmt.Sprintf("broker-%d", b.n), cmd, "broker listening", "addr")
}

func (b *pipeBroker) stop() {
	b.t.Helper()
	b.proc.Stop(b.t)
}

// TestPipeline runs the pipeline in separate processes on loopback: a
// master (the tree), two satellites with their spools, two engines in one
// consumer group, and a kfake broker (this test binary, persisted in a data
// directory, restarted on its port). A steady webhook load goes to both
// satellites while, each round, the broker is stopped (the satellites
// spool), a satellite with events in its spool is SIGKILLed and started
// again, the broker comes back, and an engine is SIGKILLed mid-stream (in
// the backlog the broker's return leaves, or in the steady load, in turn)
// and started again. Then every acknowledged webhook must be in Kafka and must
// have reached the counting server through the tree's http action: 0 lost.
// Duplicates are reported: records per webhook, actions per webhook raw and
// after the Idempotency-Key (which must be 0: a redelivered event carries
// the keys of its first delivery). Rounds repeat for -robustness.duration
// (at least one: about 25 s).
func TestPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("robustness suite: skipped in -short mode")
	}
	began := time.Now()
	bin := squallBin
	dir := t.TempDir()
	tally := NewPipelineTally()

	// The counting server.
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.ID == "" {
			http.Error(w, `want {"id": ...}`, http.StatusBadRequest)
			return
		}
		tally.Action(body.ID, r.Header.Get("Idempotency-Key"))
	}))
	t.Cleanup(counter.Close)

	keyFile := filepath.Join(dir, "hmac.key")
	writePipeFile(t, keyFile, "pipeline-0123456789abcdef0123456789abcdef\n")
	admin := strings.TrimSpace(pipeRun(t, bin, "token", "--user", "pipeline", "--auth", "all=root:admin", "--hmac-key-file", keyFile))
	engineToken := filepath.Join(dir, "engine.token")
	writePipeFile(t, engineToken, pipeRun(t, bin, "token", "--user", "engine", "--auth", "all=root:view", "--hmac-key-file", keyFile))

	broker := &pipeBroker{t: t, addr: nettest.FixedPort(t), data: filepath.Join(dir, "kafka")}
	broker.start()

	master := startPipeProc(t, "master", exec.Command(bin, "master", "--node-id", "m1", "--data-dir", filepath.Join(dir, "m1"),
		"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--token-hmac-key-file", keyFile, "--bootstrap"), "master started", "http_addr")
	master.WaitReady(t)
	apitest.DeployTree(t, master.Base, admin, []byte(strings.ReplaceAll(pipeTree, "RECEIVER_URL", counter.URL+"/action")))

	// Engines.
	actionsConfig := filepath.Join(dir, "actions.json")
	writePipeFile(t, actionsConfig, `{"http": {"timeout": "5s", "allowed_hosts": ["127.0.0.1"]},
		"retry": {"max_attempts": 10, "base_delay": "100ms", "max_delay": "1s", "jitter": 0.5}}`)
	engineNo := 0
	startEngine := func() *proctest.Proc {
		engineNo++
		return startPipeProc(t, fmt.Sprintf("engine-%d", engineNo), exec.Command(bin, "engine", "--master", master.Base,
			"--token-file", engineToken, "--kafka-brokers", broker.addr, "--group", pipeGroup, "--http", "127.0.0.1:0",
			"--actions-config", actionsConfig), "ops endpoints listening", "addr")
	}
	engines := make([]*proctest.Proc, pipeEngines)
	for i := range engines {
		engines[i] = startEngine()
	}
	shares := func() bool {
		total := 0
		for _, e := range engines {
			st := pipeStatus[apitest.EngineStatus](e)
			if !st.Ready || len(st.Partitions) == 0 {
				return false
			}
			total += len(st.Partitions)
		}
		return total == pipePartitions
	}

	// Satellites, each with its webhooks and spool; a restarted one
	// keeps its address.
	satNo := 0
	startSatellite := func(s int, addr string) *proctest.Proc {
		satNo++
		name := fmt.Sprintf("sat%d", s)
		return startPipeProc(t, fmt.Sprintf("%s-%d", name, satNo), exec.Command(bin, "satellite", "--http", addr, "--name", name,
			"--webhooks-dir", filepath.Join(dir, name, "webhooks"), "--kafka-brokers", broker.addr,
			"--spool-dir", filepath.Join(dir, name, "spool")), "satellite started", "http")
	}
	var satMu sync.Mutex
	sats := make([]*proctest.Proc, pipeSatellites)
	for s := range sats {
		for h := range pipeHooksPerSat {
			id := webhookload.HookID(s, h)
			writePipeFile(t, filepath.Join(dir, fmt.Sprintf("sat%d", s), "webhooks", id+".json"), fmt.Sprintf(
				`{"id": %q, "token": %q, "tenant_id": "tenant-%s", "collector_config": {"event_type": "pipeline", "payload": {"id": "${id}"}}}`,
				id, pipeToken(id), id))
		}
		// A port below the ephemeral range: no connection takes it while
		// the satellite restarts.
		sats[s] = startSatellite(s, nettest.FixedPort(t))
	}
	satBase := func(s int) func() string {
		return func() string {
			satMu.Lock()
			defer satMu.Unlock()
			return sats[s].Base
		}
	}
	all := func() []*proctest.Proc {
		satMu.Lock()
		defer satMu.Unlock()
		return append(append([]*proctest.Proc{master, broker.proc}, engines...), sats...)
	}
	proctest.Wait(t, pipeStartup, "satellites ready and engines sharing the partitions", all(), func() bool {
		for _, s := range sats {
			if !pipeStatus[apitest.SatelliteStatus](s).Ready {
				return false
			}
		}
		return shares()
	})
	t.Logf("pipeline up in %s", time.Since(began).Round(time.Millisecond))

	// The load.
	load := webhookload.New(webhookload.Config{Interval: pipeInterval, InFlight: pipeInFlight, MaxPerSatellite: pipeMaxPerSat,
		HooksPerSatellite: pipeHooksPerSat, CallTimeout: pipeCallTimeout, Token: pipeToken, Acked: tally.Acked})
	ctx, cancel := context.WithCancel(t.Context())
	var senders sync.WaitGroup
	stopLoad := make(chan struct{})
	t.Cleanup(func() { cancel(); senders.Wait() }) // before the processes stop
	for s := range sats {
		senders.Go(func() { load.Send(ctx, s, satBase(s), stopLoad) })
	}
	sentMore := func(n int64) {
		t.Helper()
		target := load.Sent() + n
		proctest.Wait(t, 2*time.Minute, fmt.Sprintf("%d more webhooks sent", n), nil, func() bool { return load.Sent() >= target })
	}

	loadBegan := time.Now()
	type roundStats struct {
		outage, rejoin, engineBack time.Duration
		spooled                    int64
		// Actions run again (raw duplicates) from the broker's stop to the
		// engine's kill, and from the kill to the next round.
		outageRepeats, killRepeats int
	}
	repeats := func() int { return tally.Counts().ActionDuplicates }
	var rounds []roundStats
	for round := 0; round == 0 || time.Since(loadBegan) < *flagDuration; round++ {
		var rs roundStats
		// 1. A broker outage: the satellites spool; one of them is
		// SIGKILLed with events in its spool and started again on its
		// address; the broker restarts with its data.
		sentMore(pipeStepCalls)
		atStop := repeats()
		if len(rounds) > 0 {
			rounds[len(rounds)-1].killRepeats = atStop - rounds[len(rounds)-1].killRepeats
		}
		broker.stop()
		stoppedAt := time.Now()
		ackedAtStop := load.Acked()
		proctest.Wait(t, time.Minute, "both satellites spooling events", all(), func() bool {
			for _, s := range sats {
				if st := pipeStatus[apitest.SatelliteStatus](s); st.Mode != "spooling" || st.Spool.Records == 0 {
					return false
				}
			}
			return load.Acked() >= ackedAtStop+pipeAckedWhenDown
		})
		for _, s := range sats {
			rs.spooled += pipeStatus[apitest.SatelliteStatus](s).Spool.Records
		}
		victim := round % pipeSatellites
		satMu.Lock()
		crashed := sats[victim]
		satMu.Unlock()
		crashed.Kill()
		back := startSatellite(victim, crashed.Addr)
		satMu.Lock()
		sats[victim] = back
		satMu.Unlock()
		proctest.Wait(t, pipeStartup, "the restarted satellite ready with the spool of its first run", all(), func() bool {
			st := pipeStatus[apitest.SatelliteStatus](back)
			return st.Ready && st.Mode == "spooling" && st.Spool.Records > 0
		})
		broker.start()
		rs.outage = time.Since(stoppedAt)
		restartedAt := time.Now()
		proctest.Wait(t, 90*time.Second, "the engines back in the group after the broker restart", all(), shares)
		rs.rejoin = time.Since(restartedAt)

		// 2. An engine SIGKILLed mid-stream, started again: in even
		// rounds at once, while the engines work through what the
		// satellites sent when the broker came back; in odd rounds in
		// the steady load.
		if round%2 == 1 {
			sentMore(pipeStepCalls)
		}
		e := round % pipeEngines
		atKill := repeats()
		rs.outageRepeats, rs.killRepeats = atKill-atStop, atKill
		engines[e].Kill()
		sentMore(pipeStepCalls / 2)
		engines[e] = startEngine()
		killedAt := time.Now()
		proctest.Wait(t, 90*time.Second, "the restarted engine sharing the partitions", all(), shares)
		rs.engineBack = time.Since(killedAt)
		rounds = append(rounds, rs)
		t.Logf("round %d: broker down %s (%d events in the spools, satellite %d killed and restarted), engines back in %s; engine %d killed, back in the group in %s; %d webhooks sent, %d acknowledged",
			round+1, rs.outage.Round(time.Millisecond), rs.spooled, victim, rs.rejoin.Round(time.Millisecond), e,
			rs.engineBack.Round(time.Millisecond), load.Sent(), load.Acked())
	}
	sentMore(pipeStepCalls)
	close(stopLoad)
	senders.Wait()
	defer func() {
		// After the last round: its kill's repeats, then every round's.
		if len(rounds) == 0 {
			return
		}
		last := &rounds[len(rounds)-1]
		last.killRepeats = repeats() - last.killRepeats
		var outage, backlog, steady []int
		for i, r := range rounds {
			outage = append(outage, r.outageRepeats)
			if i%2 == 0 {
				backlog = append(backlog, r.killRepeats)
			} else {
				steady = append(steady, r.killRepeats)
			}
		}
		t.Logf("actions run again per round: during the broker outage %v; after an engine kill in the backlog %v, in the steady load %v",
			outage, backlog, steady)
	}()

	// Every acknowledged webhook reaches the counting server, and the
	// spools drain.
	if !polltest.Until(t.Context(), 2*time.Minute, func() bool { return len(tally.MissingActions()) == 0 }) {
		missing := tally.MissingActions()
		t.Errorf("%d acknowledged webhooks produced no action within 2m, e.g. %v", len(missing), missing[:min(len(missing), 20)])
	}
	proctest.Wait(t, time.Minute, "both satellites drained their spools", all(), func() bool {
		for _, s := range sats {
			if st := pipeStatus[apitest.SatelliteStatus](s); st.Mode != "direct" || st.Spool.Records != 0 {
				return false
			}
		}
		return true
	})
	pipeReadEvents(t, broker.addr, tally)
	c := tally.Counts()
	t.Logf("%d rounds in %s; webhooks: %d sent, not acknowledged %v", len(rounds), time.Since(began).Round(time.Second),
		load.Sent(), load.Failures())
	t.Logf("%s", c)
	if len(c.LostInKafka) > 0 {
		t.Errorf("%d acknowledged webhooks not in Kafka, e.g. %v", len(c.LostInKafka), c.LostInKafka[:min(len(c.LostInKafka), 20)])
	}
	if len(c.LostActions) > 0 {
		t.Errorf("%d acknowledged webhooks without an action, e.g. %v", len(c.LostActions), c.LostActions[:min(len(c.LostActions), 20)])
	}
	if len(c.RecordIDMismatch) > 0 {
		t.Errorf("%d acknowledged webhooks whose records carry another event id than the one answered, e.g. %v",
			len(c.RecordIDMismatch), c.RecordIDMismatch[:min(len(c.RecordIDMismatch), 20)])
	}
	if c.KeyedDuplicates > 0 || c.Unkeyed > 0 {
		t.Errorf("actions a target honouring Idempotency-Key would apply twice: %d; actions without a key: %d", c.KeyedDuplicates, c.Unkeyed)
	}
	if sent := load.Sent(); int64(c.Acked) < sent/2 {
		t.Errorf("only %d of %d webhooks acknowledged", c.Acked, sent)
	}
}

// pipeReadEvents reads the events topic from its start to its end and
// tallies its records.
func pipeReadEvents(t *testing.T, addr string, tally *PipelineTally) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = pipeTopic
	for p := range int32(pipePartitions) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p
		lp.Timestamp = -1 // the end
		lt.Partitions = append(lt.Partitions, lp)
	}
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	ends := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	for _, tp := range lresp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("list offsets %s/%d: error code %d", pipeTopic, p.Partition, p.ErrorCode)
			}
			if p.Offset > 0 {
				ends[p.Partition] = p.Offset
				from[p.Partition] = kgo.NewOffset().AtStart()
			}
		}
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableClientMetrics(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{pipeTopic: from}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	tally.ResetRecords()
	next := map[int32]int64{}
	for done := len(ends) == 0; !done; {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: not done within a minute", pipeTopic)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			next[r.Partition] = r.Offset + 1
			var ev struct {
				Payload struct {
					ID string `json:"id"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(r.Value, &ev); err != nil || ev.Payload.ID == "" {
				t.Errorf("record %d/%d: not an event of the test: %q", r.Partition, r.Offset, r.Value)
				return
			}
			eventID := ""
			for _, h := range r.Headers {
				if h.Key == "squall-event-id" {
					eventID = string(h.Value)
				}
			}
			tally.Record(ev.Payload.ID, eventID)
		})
		done = true
		for p, end := range ends {
			if next[p] < end {
				done = false
			}
		}
	}
}

// pipeStatus reads the /readyz answer of p: an apitest.EngineStatus or
// SatelliteStatus; the zero S when p is not running or does not answer.
func pipeStatus[S any](p *proctest.Proc) S {
	var st S
	if p.Running() {
		apitest.Ready(p.Base, &st)
	}
	return st
}

// pipeToken is the token of a pipeline webhook: 16 characters at least, as
// a webhook without a signature needs.
func pipeToken(hook string) string { return "pipeline-token-" + hook }
