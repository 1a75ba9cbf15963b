package tree

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
)

// Every action of an event has its own position, the same in live and
// test evaluation and from one evaluation to the next.
func TestTree_actionPositions(t *testing.T) {
	t.Parallel()
	two := mustRule(t, ruleJSON("notify", true, "", "", `[{"id":"a","payload":{}},{"id":"b","payload":{}}]`))
	one := mustRule(t, ruleJSON("r1", true, "", "", `[{"id":"a","payload":{}}]`))
	root := config.NewRoot()
	root.Children = []*config.Node{
		{Kind: config.KindRuleset, Name: "alerts", Rules: []*config.Rule{two}},
		{Kind: config.KindIterator, Name: "hosts", Active: true, Target: "${event.payload.list}",
			Children: []*config.Node{{Kind: config.KindFilter, Name: "f", Active: true,
				Children: []*config.Node{{Kind: config.KindRuleset, Name: "rs", Rules: []*config.Rule{one}}}}}},
		{Kind: config.KindIterator, Name: "keys", Active: true, Target: "${event.payload.obj}",
			Children: []*config.Node{{Kind: config.KindRuleset, Name: "rs", Rules: []*config.Rule{one}}}},
	}
	tr := mustCompile(t, root)
	ev := payloadEvent(t, `{"list":[1,2],"obj":{"a/b":1,"x[1]":2,"p q":3}}`)
	want := []string{
		"root/alerts/notify/0", "root/alerts/notify/1",
		"root/hosts[0]/f/rs/r1/0", "root/hosts[1]/f/rs/r1/0",
		"root/keys[a%2Fb]/rs/r1/0", "root/keys[p+q]/rs/r1/0", "root/keys[x%5B1%5D]/rs/r1/0",
	}
	positions := func(actions []Action) []string {
		var out []string
		for _, a := range actions {
			out = append(out, a.Position)
		}
		return out
	}
	_, tested := tr.Process(ev)
	if got := positions(tested); !slices.Equal(got, want) {
		t.Fatalf("test evaluation positions\n got %q\nwant %q", got, want)
	}
	for range 2 {
		if got := positions(tr.Actions(ev, nil)); !slices.Equal(got, want) {
			t.Fatalf("live evaluation positions\n got %q\nwant %q", got, want)
		}
	}
}

func TestAction_IdempotencyKey(t *testing.T) {
	t.Parallel()
	a := Action{ID: "http", Position: "root/alerts/notify/0", EventID: "ev-1"}
	again := Action{ID: "http", Position: "root/alerts/notify/0", EventID: "ev-1"}
	if k := a.IdempotencyKey(); k != again.IdempotencyKey() || len(k) != 43 {
		t.Fatalf("keys %q and %q: want 43 characters, the same for the same event and position", k, again.IdempotencyKey())
	}
	other := []Action{
		{Position: "root/alerts/notify/1", EventID: "ev-1"},
		{Position: "root/alerts/notify/0", EventID: "ev-2"},
		// The separator keeps the event id and the position apart.
		{Position: "alerts/notify/0", EventID: "ev-1\nroot/"},
	}
	for _, o := range other {
		if o.IdempotencyKey() == a.IdempotencyKey() {
			t.Errorf("%+v has the key of %+v", o, a)
		}
	}
	if k := (Action{Position: "root/a/r/0"}).IdempotencyKey(); k != "" {
		t.Errorf("without an event id: key %q, want none", k)
	}
	// The key is the unpadded base64url SHA-256 of the event id, a
	// newline and the position, for short and long ones alike; appending
	// it to a buffer with room allocates nothing.
	for _, a := range []Action{a, {Position: strings.Repeat("p", 300), EventID: strings.Repeat("e", 100)}} {
		sum := sha256.Sum256([]byte(a.EventID + "\n" + a.Position))
		want := base64.RawURLEncoding.EncodeToString(sum[:])
		if got := a.IdempotencyKey(); got != want {
			t.Errorf("key %q, want %q", got, want)
		}
		if got := string(a.AppendIdempotencyKey([]byte("x"))); got != "x"+want {
			t.Errorf("appended key %q, want %q", got, "x"+want)
		}
	}
}

// AppendIdempotencyKey allocates nothing (the archive calls it per line).
func TestAction_AppendIdempotencyKey_allocs(t *testing.T) {
	a := Action{Position: "root/alerts/notify/0", EventID: "019a0000-0000-7000-8000-000000000001"}
	buf := make([]byte, 0, IdempotencyKeyLen)
	if n := testing.AllocsPerRun(100, func() { buf = a.AppendIdempotencyKey(buf[:0]) }); n != 0 {
		t.Errorf("AppendIdempotencyKey: %v allocations, want 0", n)
	}
}
