package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/master/auth"
)

// userToken is a token of user with roles on the root.
func userToken(user string, roles ...string) string {
	return auth.EncodeUnsigned(auth.Claims{User: user, Auths: map[string]auth.Authorization{"all": {Path: []string{"root"}, Roles: roles}}})
}

// errorCode returns the code of a JSON error answer.
func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error answer %q: %v", body, err)
	}
	return e.Code
}

// listOf returns the fleet list's answer.
func listOf(t *testing.T, url, tok string) (members map[string]Member, groups []Group) {
	t.Helper()
	code, body := call(t, "GET", url+Pattern, tok, "", "")
	var list struct {
		Members []Member `json:"members"`
		Groups  []Group  `json:"groups"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("list: %d %s", code, body)
	}
	members = map[string]Member{}
	for _, m := range list.Members {
		members[m.Role+"/"+m.ID] = m
	}
	return members, list.Groups
}

// TestFleet_ReporterBinding (issue 27 item 4): through a real listener, a
// member is bound to the user of the token that first reported it, a
// token of another user cannot overwrite it (a dead engine cannot be shown
// ready) nor flood the list beyond its own share, and an admin removes an
// entry.
func TestFleet_ReporterBinding(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.MaxMembers, cfg.MaxPerReporter = 40, 10
	_, srv := newTestFleet(t, cfg)
	engines := userToken("engines", "view", "fleet_report")
	intruder := userToken("intruder", "fleet_report")
	admin := userToken("ops", "admin")
	put := func(tok, key, body string) (int, string) {
		t.Helper()
		return call(t, "PUT", srv.URL+Pattern+"/"+key, tok, "application/json", body)
	}

	if code, body := put(engines, "engine/e1", `{"ready": false, "reasons": ["no tree yet"]}`); code != 200 {
		t.Fatalf("first report: %d %s", code, body)
	}
	t.Run("another user cannot overwrite", func(t *testing.T) {
		code, body := put(intruder, "engine/e1", `{"ready": true}`)
		if code != 403 || errorCode(t, body) != "NOT_OWNER" || !strings.Contains(body, "DELETE /squall/v1/fleet/engine/e1") {
			t.Fatalf("a report of e1 by another user: %d %s, want 403 NOT_OWNER naming the removal", code, body)
		}
		if m := mustMember(t, srv.URL, engines, "engine/e1"); m.Ready || len(m.Reasons) != 1 {
			t.Errorf("e1 after the forged report: %+v, want it as its owner reported it", m)
		}
		// An admin token of another user is refused too: admins remove.
		if code, body := put(admin, "engine/e1", `{"ready": true}`); code != 403 || errorCode(t, body) != "NOT_OWNER" {
			t.Errorf("a report of e1 by an admin: %d %s, want 403 NOT_OWNER", code, body)
		}
		// The owner goes on reporting it.
		if code, body := put(engines, "engine/e1", `{"ready": true}`); code != 200 {
			t.Errorf("the owner's next report: %d %s", code, body)
		}
	})
	t.Run("one token cannot flood the list", func(t *testing.T) {
		refused := 0
		for i := range 3 * cfg.MaxPerReporter {
			code, body := put(intruder, fmt.Sprintf("satellite/fake-%d", i), `{"ready": true}`)
			switch {
			case code == 503 && errorCode(t, body) == "FLEET_REPORTER_FULL":
				refused++
			case code != 200:
				t.Fatalf("fake %d: %d %s", i, code, body)
			}
		}
		if refused != 2*cfg.MaxPerReporter {
			t.Errorf("%d fake members refused, want %d (one reporter holds at most %d)", refused, 2*cfg.MaxPerReporter, cfg.MaxPerReporter)
		}
		// Genuine new members of another reporter still get in.
		if code, body := put(engines, "engine/e2", `{"ready": true}`); code != 200 {
			t.Errorf("a new member of another reporter: %d %s", code, body)
		}
		// A known member of the full reporter still reports.
		if code, body := put(intruder, "satellite/fake-0", `{"ready": false}`); code != 200 {
			t.Errorf("a known member of a full reporter: %d %s", code, body)
		}
	})
	t.Run("an admin removes an entry", func(t *testing.T) {
		for _, tc := range []struct {
			name, tok, key string
			status         int
			code           string
		}{
			{"no token", "", "engine/e1", 401, "UNAUTHORIZED"},
			{"fleet_report", engines, "engine/e1", 403, "MISSING_REQUIRED_PERMISSIONS"},
			{"view", userToken("viewer", "view"), "engine/e1", 403, "MISSING_REQUIRED_PERMISSIONS"},
			{"unknown member", admin, "engine/nobody", 404, "NOT_FOUND"},
			{"unknown group", admin, "group/nothing", 404, "NOT_FOUND"},
			{"master", admin, "master/m1", 400, "INVALID_FIELD"},
		} {
			code, body := call(t, "DELETE", srv.URL+Pattern+"/"+tc.key, tc.tok, "", "")
			if code != tc.status || errorCode(t, body) != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.name, code, body, tc.status, tc.code)
			}
		}
		if m := mustMember(t, srv.URL, engines, "engine/e1"); m.ID != "e1" {
			t.Fatalf("e1 gone after refused removals")
		}
		if code, body := call(t, "DELETE", srv.URL+Pattern+"/satellite/fake-0", admin, "", ""); code != 200 || strings.TrimSpace(body) != "null" {
			t.Fatalf("removal: %d %s", code, body)
		}
		members, _ := listOf(t, srv.URL, engines)
		if _, ok := members["satellite/fake-0"]; ok {
			t.Error("fake-0 listed after its removal")
		}
		// Its reporter's share has room again; the name is free.
		if code, body := put(engines, "satellite/fake-0", `{"ready": true}`); code != 200 {
			t.Errorf("a removed member reported by another user: %d %s", code, body)
		}
	})
}

func mustMember(t *testing.T, url, tok, key string) Member {
	t.Helper()
	members, _ := listOf(t, url, tok)
	m, ok := members[key]
	if !ok {
		t.Fatalf("%s not listed", key)
	}
	return m
}

func int64p(n int64) *int64 { return &n }

// TestFleet_Groups: the partitions of a consumer group that no live
// engine owns, in the list and in the metrics: none while the engines
// share them, those of an engine gone stale, all once every engine is
// stale or dropped (the group stays until an admin removes it); only the
// group's first reporter sets its partition count; a node that is not
// the leader says nothing.
func TestFleet_Groups(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		leading := true
		cfg := Config{StaleAfter: 30 * time.Second, DropAfter: time.Minute, MaxMembers: 10, Leading: func() bool { return leading }}
		f := New(cfg, &auth.Verifier{}, masters, nil)
		report := func(id, owner string, parts ...int) {
			t.Helper()
			r := Report{ID: id, Role: RoleEngine, KafkaGroup: "squall-engine", KafkaTopic: "squall.events", Partitions: parts, TopicPartitions: int64p(4)}
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
			if err := f.Report(r, owner, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		state := func() string {
			t.Helper()
			var s []string
			for _, g := range f.Groups(time.Now()) {
				s = append(s, fmt.Sprintf("%s/%s %d partitions, %d engines, unowned %v", g.Group, g.Topic, g.Partitions, g.Engines, g.Unowned))
			}
			return strings.Join(s, "; ")
		}
		report("e1", "engines", 0, 1)
		report("e2", "engines", 2, 3)
		if got, want := state(), "squall-engine/squall.events 4 partitions, 2 engines, unowned []"; got != want {
			t.Errorf("shared: %q, want %q", got, want)
		}
		want := `
# HELP squall_fleet_partitions_unowned Partitions of a consumer group's topic that no live engine (one that reported within --fleet-stale-after) owns, on the leader.
# TYPE squall_fleet_partitions_unowned gauge
squall_fleet_partitions_unowned{group="squall-engine",topic="squall.events"} %d
`
		if err := testutil.CollectAndCompare(f, strings.NewReader(fmt.Sprintf(want, 0)), "squall_fleet_partitions_unowned"); err != nil {
			t.Error(err)
		}
		// Another user's engine in the group cannot change its count.
		forged := Report{ID: "x", Role: RoleEngine, KafkaGroup: "squall-engine", KafkaTopic: "other", TopicPartitions: int64p(1)}
		if err := f.Report(forged, "intruder", time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		report("e1", "engines", 0, 1)
		if got, want := state(), "squall-engine/squall.events 4 partitions, 1 engines, unowned [2 3]"; got != want {
			t.Errorf("e2 stale: %q, want %q", got, want)
		}
		time.Sleep(time.Minute)
		if got, want := state(), "squall-engine/squall.events 4 partitions, 0 engines, unowned [0 1 2 3]"; got != want {
			t.Errorf("every engine dropped: %q, want %q", got, want)
		}
		if err := testutil.CollectAndCompare(f, strings.NewReader(fmt.Sprintf(want, 4)), "squall_fleet_partitions_unowned"); err != nil {
			t.Error(err)
		}
		leading = false
		if got := state(); got != "" {
			t.Errorf("on a follower: %q, want nothing", got)
		}
		if n := testutil.CollectAndCount(f); n != 0 {
			t.Errorf("%d series on a follower, want none", n)
		}
		leading = true
		report("e3", "engines", 0, 1, 2, 3)
		if got, want := state(), "squall-engine/squall.events 4 partitions, 1 engines, unowned []"; got != want {
			t.Errorf("a new engine: %q, want %q", got, want)
		}
		if !f.Remove(RoleGroup, "squall-engine") || f.Remove(RoleGroup, "squall-engine") {
			t.Error("Remove of the group: want true, then false")
		}
	})
}

// TestReport_ValidateKafka: an engine's consumer group fields.
func TestReport_ValidateKafka(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		r     Report
		field string
	}{
		{"good", Report{KafkaGroup: "g", KafkaTopic: "t", Partitions: []int{0, 3}, TopicPartitions: int64p(4)}, ""},
		{"not joined", Report{KafkaGroup: "g", KafkaTopic: "t"}, ""},
		{"partition beyond the count", Report{KafkaGroup: "g", Partitions: []int{4}, TopicPartitions: int64p(4)}, "partitions"},
		{"negative partition", Report{KafkaGroup: "g", Partitions: []int{-1}}, "partitions"},
		{"partitions without a group", Report{Partitions: []int{0}}, "kafka_group"},
		{"count too large", Report{KafkaGroup: "g", TopicPartitions: int64p(maxPartitions + 1)}, "topic_partitions"},
		{"satellite", Report{Role: RoleSatellite, KafkaGroup: "g"}, "kafka_group"},
		{"long group", Report{KafkaGroup: strings.Repeat("g", maxText+1)}, "kafka_group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.ID = "e1"
			if r.Role == "" {
				r.Role = RoleEngine
			}
			err := r.Validate()
			fe, _ := errors.AsType[*FieldError](err)
			if tc.field == "" && err != nil || tc.field != "" && (fe == nil || fe.Field != tc.field) {
				t.Errorf("Validate: %v, want a problem with %q", err, tc.field)
			}
		})
	}
}
