package deadletters

import (
	"net/http"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
)

// TestAPI_Cluster: every master of a cluster of three serves the dead
// letters, and they agree on what was replayed: a replay through one
// follower is already_replayed through another, and every node lists it
// replayed.
func TestAPI_Cluster(t *testing.T) {
	t.Parallel()
	w := &world{t: t}
	w.broker = kafkatest.Start(t, kafkatest.Config{Topics: []string{testDLQ, testEvents}, Partitions: 2})
	dial := kafkasource.Dial{Brokers: []string{w.broker.Addr}, Timeout: 2 * time.Second}
	var writers []*kafkasource.Writer
	newWriter := func() *kafkasource.Writer {
		wr, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: dial, Topic: testEvents})
		if err != nil {
			t.Fatal(err)
		}
		writers = append(writers, wr)
		return wr
	}
	t.Cleanup(func() {
		for _, wr := range writers {
			if err := wr.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	w.writer = newWriter()
	c := mastertest.TestCluster(t, 3, mastertest.WithSetup(func(_ int, s *master.Server) {
		reader, err := kafkasource.NewReader(dial)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		cfg.Topic, cfg.EventsTopic = testDLQ, testEvents
		a, err := New(cfg, reader, newWriter(), s.Verifier(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct {
			pattern string
			p       master.Placement
		}{{"GET " + Prefix, master.OnAnyNode}, {"GET " + Prefix + "/", master.OnAnyNode}, {"POST " + Prefix + "/replay", master.OnLeader}} {
			if err := s.Mount(m.pattern, a.Handler(), m.p); err != nil {
				t.Fatal(err)
			}
		}
	}))
	tok := "Bearer " + c.Token(auth.Claims{User: "ops", Auths: map[string]auth.Authorization{"root": {Path: []string{"root"}, Roles: []string{"admin"}}}})
	call := func(node int, method, path string, body, out any) {
		t.Helper()
		calltest.JSON(t, method, c.URL(node)+path, tok, body, out)
	}

	w.deadLetter(letter{key: "a", stage: "action", actions: "0:http", err: "down"})
	followers := c.Followers()
	var p Page
	call(followers[0], http.MethodGet, Prefix, nil, &p)
	if len(p.DeadLetters) != 1 {
		t.Fatalf("follower's list: %+v", p)
	}
	id := p.DeadLetters[0].ID
	for i, want := range []string{StatusReplayed, StatusAlreadyReplayed} {
		var a ReplayAnswer
		call(followers[i], http.MethodPost, Prefix+"/replay", ReplayRequest{IDs: []string{id}}, &a)
		if a.Results[0].Status != want {
			t.Fatalf("replay through follower %d: %+v, want %s", followers[i], a.Results, want)
		}
	}
	for node := range c.Len() {
		var p Page
		call(node, http.MethodGet, Prefix, nil, &p)
		if len(p.DeadLetters) != 1 || p.DeadLetters[0].Replayed == nil || p.DeadLetters[0].Replayed.By != "ops" {
			t.Errorf("node %d lists %+v", node, p.DeadLetters)
		}
	}
	if recs := w.broker.Records(t, testEvents); len(recs) != 1 {
		t.Errorf("%d replays produced, want 1", len(recs))
	}
}
