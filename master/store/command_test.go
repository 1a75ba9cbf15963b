package store

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
)

func TestCommand_RoundTrip(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_123)
	tree := treeWith("a")
	rawTree, err := encodeTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cmd  Command
		typ  cmdType
		want any
	}{
		{"replace active", ReplaceActive{Tree: tree}, typeReplaceActive, &treePayload{Tree: rawTree}},
		{"create draft", CreateDraft{ID: "d", Owner: "o", Now: now}, typeCreateDraft, &createDraftPayload{ID: "d", Owner: "o", NowMS: now.UnixMilli()}},
		{"edit draft", EditDraft{ID: "d", User: "u", Tree: tree, Now: now}, typeEditDraft, &editDraftPayload{ID: "d", User: "u", Tree: rawTree, NowMS: now.UnixMilli()}},
		{"take over", TakeOver{ID: "d", User: "u"}, typeTakeOver, &draftUserPayload{ID: "d", User: "u"}},
		{"deploy", Deploy{ID: "d", User: "u"}, typeDeploy, &draftUserPayload{ID: "d", User: "u"}},
		{"delete draft", DeleteDraft{ID: "d", User: "u"}, typeDeleteDraft, &draftUserPayload{ID: "d", User: "u"}},
		{"scoped deploy", DeployScoped{ID: "d", User: "u", Scope: []string{"root", "acme"}}, typeDeployScoped, &deployScopedPayload{ID: "d", User: "u", Scope: []string{"root", "acme"}}},
		{"set member", SetMember{ID: "n1", HTTPAddr: "10.0.0.1:8080"}, typeSetMember, &setMemberPayload{ID: "n1", HTTPAddr: "10.0.0.1:8080"}},
		{"delete member", DeleteMember{ID: "n1"}, typeDeleteMember, &memberPayload{ID: "n1"}},
		{"restore state without draft", RestoreState{Active: tree}, typeRestoreState, &restorePayload{Active: rawTree}},
		{"restore state", RestoreState{Active: tree, Draft: &Draft{ID: "d", Owner: "o", CreatedMS: 1, UpdatedMS: 2, Tree: tree}}, typeRestoreState,
			&restorePayload{Active: rawTree, Draft: &draftRecord{ID: "d", Owner: "o", CreatedMS: 1, UpdatedMS: 2, Tree: rawTree}}},
		{"insert findings", InsertFindings{Findings: []Finding{testFinding("a", 1, 5)}}, typeInsertFindings,
			&insertFindingsPayload{Findings: []findingRecord{findingRecord(testFinding("a", 1, 5))}}},
		{"clear findings", ClearFindings{}, typeClearFindings, &clearFindingsPayload{}},
		{"deploy version", deployVersion{ID: "d", User: "u", Scope: []string{"root", "acme"}, Message: "m", Now: now, Keep: 7}, typeDeployVersion,
			&deployVersionPayload{ID: "d", User: "u", Scope: []string{"root", "acme"}, NowMS: now.UnixMilli(), Message: "m", Keep: 7}},
		{"rollback", Rollback{Version: 3, User: "u", Force: true, Message: "m", Now: now, Keep: 7}, typeRollback,
			&rollbackPayload{Version: 3, User: "u", Force: true, NowMS: now.UnixMilli(), Message: "m", Keep: 7}},
		{"restore versions", RestoreVersions{Replace: true, Next: 4, Versions: []VersionTree{{Version: Version{Number: 3, Author: "u"}, Tree: rawTree}}}, typeRestoreVersions,
			&restoreVersionsPayload{Replace: true, Next: 4, Versions: []VersionTree{{Version: Version{Number: 3, Author: "u"}, Tree: rawTree}}}},
		{"patch finding", PatchFinding{Tenant: "a", UID: "u", State: new("Resolved"), Ticket: new(""), Now: now}, typePatchFinding,
			&patchFindingPayload{Tenant: "a", UID: "u", State: new("Resolved"), Ticket: new(""), NowMS: now.UnixMilli()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := encodeCommand(tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if tc.typ == typeInsertFindings {
				// The compact binary form (finding_entry.go).
				if cmdType(data[0]) != tc.typ || data[1] != insertFindingsBinaryVersion {
					t.Fatalf("entry %q", data)
				}
			} else if cmdType(data[0]) != tc.typ || data[1] != payloadVersion || !json.Valid(data[2:]) {
				t.Fatalf("entry %q", data)
			}
			d, err := decodeCommand(data)
			if err != nil {
				t.Fatal(err)
			}
			if d.typ != tc.typ || !reflect.DeepEqual(d.p, tc.want) {
				t.Fatalf("decoded %s %#v, want %#v", d.typ, d.p, tc.want)
			}
		})
	}

	t.Run("batch", func(t *testing.T) {
		data, err := encodeBatch([]Command{TakeOver{ID: "d", User: "u"}, ReplaceActive{Tree: tree}})
		if err != nil {
			t.Fatal(err)
		}
		d, err := decodeCommand(data)
		if err != nil {
			t.Fatal(err)
		}
		if d.typ != typeBatch || len(d.batch) != 2 || d.batch[0].typ != typeTakeOver || d.batch[1].typ != typeReplaceActive {
			t.Fatalf("decoded %+v", d)
		}
	})
}

// TestCommand_Format pins the log format: entries written by this version
// must decode in every later one.
func TestCommand_Format(t *testing.T) {
	t.Parallel()
	data, err := encodeCommand(CreateDraft{ID: "d1", Owner: "alice", Now: time.UnixMilli(42)})
	if err != nil {
		t.Fatal(err)
	}
	want := "\x02\x01" + `{"id":"d1","owner":"alice","now_ms":42}`
	if string(data) != want {
		t.Fatalf("entry %q, want %q", data, want)
	}
	data, err = encodeBatch([]Command{Deploy{ID: "d1", User: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	want = "\x07\x01" + `{"commands":[{"type":5,"version":1,"payload":{"id":"d1","user":"alice"}}]}`
	if string(data) != want {
		t.Fatalf("entry %q, want %q", data, want)
	}
	data, err = encodeCommand(SetMember{ID: "n1", HTTPAddr: "10.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	want = "\x08\x01" + `{"id":"n1","http_addr":"10.0.0.1:8080"}`
	if string(data) != want {
		t.Fatalf("entry %q, want %q", data, want)
	}
	data, err = encodeCommand(DeleteMember{ID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if want = "\x09\x01" + `{"id":"n1"}`; string(data) != want {
		t.Fatalf("entry %q, want %q", data, want)
	}
	data, err = encodeCommand(RestoreState{Active: treeWith()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "\x0a\x01"+`{"active":{"version":`) || !strings.HasSuffix(string(data), `,"draft":null}`) {
		t.Fatalf("entry %q", data)
	}
	data, err = encodeCommand(InsertFindings{Findings: []Finding{{UID: "u1", Tenant: "t", DiscoveredMS: 7, UpdatedMS: 7,
		MonitoredDomainID: 3, ToolCode: "tc", ResourceURL: "https://h/", Username: "n", Password: "p", State: "Unassigned"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Version 2, binary: count, then each field (docs/decisions.md decision 39).
	want = "\x0b\x02\x01" + "\x02u1" + "\x01t" + "\x0e\x00\x06" + "\x02tc" + "\x0ahttps://h/" + "\x01n" + "\x01p" +
		"\x00\x00" + "\x0aUnassigned" + "\x00\x00\x00"
	if string(data) != want {
		t.Fatalf("entry %q, want %q", data, want)
	}
	// Version 1, JSON, as older binaries wrote it (and this one for
	// invalid UTF-8), still reads the same.
	v1 := "\x0b\x01" + `{"findings":[{"uid":"u1","tenant":"t","discovered_ms":7,"updated_ms":7,"monitored_domain_id":3,` +
		`"tool_code":"tc","resource_url":"https://h/","username":"n","password":"p","state":"Unassigned"}]}`
	d1, err := decodeCommand([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := decodeCommand(data)
	if err != nil || !reflect.DeepEqual(d1, d2) {
		t.Fatalf("version 1 entry decodes to %#v, version 2 to %#v (%v)", d1, d2, err)
	}
	data, err = encodeCommand(PatchFinding{Tenant: "t", UID: "u1", Severity: new("High"), Now: time.UnixMilli(9)})
	if err != nil {
		t.Fatal(err)
	}
	if want = "\x0c\x01" + `{"tenant":"t","uid":"u1","severity":"High","now_ms":9}`; string(data) != want {
		t.Fatalf("entry %q, want %q", data, want)
	}
}

func TestCommand_EncodeRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cmd  Command
	}{
		{"replace active without tree", ReplaceActive{}},
		{"create draft without id", CreateDraft{Owner: "o"}},
		{"create draft without owner", CreateDraft{ID: "d"}},
		{"edit draft without tree", EditDraft{ID: "d", User: "u"}},
		{"edit draft without user", EditDraft{ID: "d", Tree: treeWith()}},
		{"take over without user", TakeOver{ID: "d"}},
		{"deploy without id", Deploy{User: "u"}},
		{"scoped deploy without scope", DeployScoped{ID: "d", User: "u"}},
		{"draft edit without edit", DraftEdit{ID: "d", User: "u"}},
		{"delete without id", DeleteDraft{User: "u"}},
		{"set member without id", SetMember{HTTPAddr: "a:1"}},
		{"set member without address", SetMember{ID: "n"}},
		{"delete member without id", DeleteMember{}},
		{"restore without active tree", RestoreState{}},
		{"restore a draft without owner", RestoreState{Active: treeWith(), Draft: &Draft{ID: "d", Tree: treeWith()}}},
		{"restore a draft without tree", RestoreState{Active: treeWith(), Draft: &Draft{ID: "d", Owner: "o"}}},
		{"insert no findings", InsertFindings{}},
		{"insert a finding without uid", InsertFindings{Findings: []Finding{{Tenant: "t", State: "s"}}}},
		{"insert a finding without tenant", InsertFindings{Findings: []Finding{{UID: "u", State: "s"}}}},
		{"insert a finding without state", InsertFindings{Findings: []Finding{{UID: "u", Tenant: "t"}}}},
		{"patch without tenant", PatchFinding{UID: "u"}},
		{"patch to an empty state", PatchFinding{Tenant: "t", UID: "u", State: new("")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := encodeCommand(tc.cmd); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("err %v", err)
			}
		})
	}
	if _, err := encodeBatch([]Command{nil}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("nil in batch: %v", err)
	}
}

// FuzzDecodeCommand checks that decoding never panics (only the FSM
// panics, on purpose, on an error) and that what decodes re-encodes to an
// entry that decodes the same way.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []Command{
		ReplaceActive{Tree: treeWith("a")},
		CreateDraft{ID: "d", Owner: "o", Now: time.UnixMilli(1)},
		EditDraft{ID: "d", User: "u", Tree: treeWith("b"), Now: time.UnixMilli(2)},
		TakeOver{ID: "d", User: "u"},
		Deploy{ID: "d", User: "u"},
		DeployScoped{ID: "d", User: "u", Scope: []string{"root", "t"}},
		DraftEdit{ID: "d", User: "u", Edit: &config.Edit{Op: config.EditAddRule, Path: []string{"root", "rs"}, Rule: &config.Rule{Name: "r"}}, Now: time.UnixMilli(4)},
		DraftEdit{ID: "d", User: "u", Edit: &config.Edit{Op: config.EditAddNode, Path: []string{"root"}, Node: treeWith("n").Children[0]}, Now: time.UnixMilli(5)},
		DeleteDraft{ID: "d", User: "u"},
		SetMember{ID: "n", HTTPAddr: "h:1"},
		DeleteMember{ID: "n"},
		RestoreState{Active: treeWith("r"), Draft: &Draft{ID: "d", Owner: "o", Tree: treeWith("s")}},
		InsertFindings{Findings: []Finding{testFinding("a", 1, 5), testFinding("b", 2, 6)}},
		PatchFinding{Tenant: "a", UID: "u", State: new("Resolved"), Priority: new(""), Now: time.UnixMilli(3)},
		ClearFindings{},
	} {
		data, err := encodeCommand(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	batch, err := encodeBatch([]Command{TakeOver{ID: "d", User: "u"}, Deploy{ID: "d", User: "u"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(batch)
	f.Add([]byte{})
	f.Add([]byte{7, 1, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeCommand(data)
		if err != nil {
			if !errors.Is(err, errCorruptEntry) {
				t.Fatalf("error %v is not an errCorruptEntry", err)
			}
			return
		}
		if d.typ == typeBatch {
			return
		}
		p, err := json.Marshal(d.p)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeCommand(append([]byte{byte(d.typ), payloadVersion}, p...))
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if !reflect.DeepEqual(again.p, d.p) && !reflect.DeepEqual(normalize(t, again.p), normalize(t, d.p)) {
			t.Fatalf("round trip %#v != %#v", again.p, d.p)
		}
	})
}

// normalize re-marshals a payload, so raw JSON that differs only in
// spacing compares equal.
func normalize(t *testing.T, p any) string {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzDecodeInsertFindings checks the decoder of InsertFindings payloads
// (fastStrictUnmarshal) against strictUnmarshal: any finding, encoded by
// encodeCommand, decodes to itself; and on arbitrary bytes, what one of the
// two accepts the other accepts with the same result. (A payload only the
// fast decoder refuses would panic the FSM on a binary that has it, and
// one it alone accepts would decode differently on older binaries.)
func FuzzDecodeInsertFindings(f *testing.F) {
	f.Add("u1", "tenant", int64(5), int64(2), "tool", "https://example.com/a/", "user@example.com", "pw", "", "", "Unassigned", "t-1", []byte(`{"findings":[]}`))
	f.Add("ü\u2028\"\\", "t\x00", int64(-1), int64(1<<62), "<&>", "\xff\xfe", "\U0001F600", "", "h", "SHA-1", "s", "", []byte(`{"findings":[{"uid":"a","UID":"b"}]}`))
	f.Add("u", "t", int64(0), int64(0), "", "", "", "", "", "", "", "", []byte(`{"findings":[{"uid":"a"}]} x`))
	f.Add("u", "t", int64(0), int64(0), "", "", "", "", "", "", "", "", []byte(`{"findings":[{"uid":"\ud800","tenant":1e2}],"findings":null}`))
	f.Fuzz(func(t *testing.T, uid, tenant string, ms, domain int64, tool, resource, username, password, hash, algo, state, ticket string, raw []byte) {
		in := Finding{
			UID: uid, Tenant: tenant, DiscoveredMS: ms, UpdatedMS: ms, MonitoredDomainID: domain, ToolCode: tool,
			ResourceURL: resource, Username: username, Password: password, Hash: hash, HashAlgorithm: algo,
			State: state, Ticket: ticket,
		}
		cmd := InsertFindings{Findings: []Finding{in, in}}
		if data, err := encodeCommand(cmd); err == nil {
			d, err := decodeCommand(data)
			if err != nil {
				t.Fatalf("encoded entry does not decode: %v", err)
			}
			// The JSON entry (version 1, which older binaries wrote and
			// this one writes for invalid UTF-8) writes invalid UTF-8 as
			// U+FFFD: compare with what the standard decoder reads from
			// it. The binary entry (version 2) must read the same.
			p, err := cmd.payload()
			if err != nil {
				t.Fatal(err)
			}
			v1, err := appendEntry(typeInsertFindings, p)
			if err != nil {
				t.Fatal(err)
			}
			var want insertFindingsPayload
			if err := strictUnmarshal(v1[2:], &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.p, &want) {
				t.Fatalf("decoded %#v, want %#v", d.p, &want)
			}
			if d1, err := decodeCommand(v1); err != nil || !reflect.DeepEqual(d1.p, &want) {
				t.Fatalf("version 1 entry decoded %#v, %v; want %#v", d1.p, err, &want)
			}
			// The stored JSON record (appendJSONRecord) reads back as what the
			// standard encoder's would.
			rec, err := appendJSONRecord(nil, &want.Findings[0])
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeFinding(rec)
			if err != nil {
				t.Fatalf("stored record %q does not decode: %v", rec, err)
			}
			stdRec, err := json.Marshal(&want.Findings[0])
			if err != nil {
				t.Fatal(err)
			}
			if std, _ := decodeFinding(stdRec); got != std {
				t.Fatalf("stored record reads %#v, the standard encoder's %#v", got, std)
			}
		}
		var std, fast insertFindingsPayload
		errStd, errFast := strictUnmarshal(raw, &std), fastStrictUnmarshal(raw, &fast)
		if (errStd == nil) != (errFast == nil) {
			t.Fatalf("%q: standard decoder: %v; fast decoder: %v", raw, errStd, errFast)
		}
		if errStd == nil && !reflect.DeepEqual(std, fast) {
			t.Fatalf("%q: standard decoder %#v; fast decoder %#v", raw, std, fast)
		}
	})
}
