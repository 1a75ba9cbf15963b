package store

import (
	"encoding/json"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/squallhq/squall/config"
)

// FeatureLevel is the level of log entry forms this binary applies
// (docs/decisions.md decision 40):
//
//   - 0: the forms every master applies (JSON payloads of version 1);
//   - 1: also session entries (type 22, request ids) and InsertFindings
//     entries in their binary form (version 2).
//   - 2: TakeOver entries record the level they were written under (the
//     writtenExt extension), and applying one at level 2 records the
//     displaced owner in the draft (decision 8), which the state file
//     keeps in the draft record's "displaced" field.
//   - 3: deploys are written as DeployVersion entries, which record a
//     version of the active tree, and the Rollback and RestoreVersions
//     entries exist (docs/decisions.md decision 54; see version.go).
//   - 4: every entry that changes the replicated state carries its audit
//     context (writtenExt.Audit, memberExt.Audit), and applying it
//     records the audit log (docs/decisions.md decision 61; see audit.go).
//   - 5: the draft holds rule tests: the SetDraftTests and tested deploy
//     (deployTested) entries exist, RestoreState and RestoreVersions
//     entries carry tests, and a deploy that ran the tests names the draft
//     it tested, which applying compares (docs/decisions.md decision 62;
//     see drafttests.go).
//   - 6: tools and tenants have integer ids, kept in the state (the ids
//     bucket): the AssignIDs entry gives every stored tenant and tool code
//     one, and InsertFindings entries give new ones theirs once it was
//     applied (docs/decisions.md decision 63; see ids.go).
//   - 7: backtests are kept in the replicated state: the SaveBacktest and
//     DeleteBacktests entries exist, and applying them enforces the bounds
//     they carry (docs/decisions.md decision 64; see backtest.go).
//
// Every member advertises its level when it registers (SetMember, in the
// entry's raft extensions, which a binary without levels ignores); the
// leader writes the forms of a level only once every member of the raft
// configuration advertises it (see [Store.ClusterFeatureLevel]). Applying
// stays able to read every form at every level.
const FeatureLevel = 7

// LevelSessions is the level from which session entries and binary
// InsertFindings entries are written.
const LevelSessions = 1

// LevelTypedIDs is the level from which the leader writes the AssignIDs
// entry that turns on the ids of tools and tenants. Below it no master
// assigns any, and the findings API answers them as null.
const LevelTypedIDs = 6

// LevelDisplaced is the level from which a takeover records the owner it
// displaces. Below it, every master applies a takeover as a binary before
// it does (the owner changes, nobody is recorded), so that a cluster that
// mixes releases keeps one state.
const LevelDisplaced = 2

// The feature levels and the rules the state machine validates trees
// with (docs/decisions.md decision 52): every entry that carries a tree
// records, in its raft extensions, the cluster's level when the leader
// wrote it, and applying validates its trees with that level's rules, so
// that every master decides alike whatever its release. A new check of
// config.Validate comes as a new config.Rules version used from a new
// level on; the corpus of master/store/testdata/corpus must pass the rules
// of every level.
//
// treeRules returns the version of config's validation rules for the
// trees of entries written under feature level level.
func treeRules(level int) config.Rules {
	// Levels 0 and 1 check what the releases before levels did.
	return config.Rules1
}

// writtenExt is the raft log extension of an entry that carries a tree
// or takes a draft over (see recordsLevel): the cluster's feature level when the leader wrote
// it. A master without it (before decision 52) ignores it and validates
// with its own rules, which are those of config.Rules1.
type writtenExt struct {
	Level int `json:"written_level"`
	// Audit is the entry's audit context, from LevelAudit on.
	Audit *auditExt `json:"audit,omitempty"`
}

// encodeWrittenExt returns the extension of a tree-carrying entry written
// under level (nil for level 0, which is what no extension means).
func encodeWrittenExt(level int, x *auditExt) []byte {
	if level <= 0 {
		return nil
	}
	b, _ := json.Marshal(writtenExt{Level: level, Audit: x}) // cannot fail
	return b
}

// decodeWrittenExt returns the level a tree-carrying entry's extension
// records: 0 without one. ok is false when the extension does not read
// as one, or names a level above FeatureLevel: this binary does not know
// the rules that entry's trees were accepted with, and applying it could
// decide otherwise than the masters that wrote it.
func decodeWrittenExt(ext []byte) (level int, x *auditExt, ok bool) {
	if len(ext) == 0 {
		return 0, nil, true
	}
	var e writtenExt
	if err := json.Unmarshal(ext, &e); err != nil || e.Level < 0 || e.Level > FeatureLevel {
		return 0, nil, false
	}
	if e.Level < LevelAudit {
		e.Audit = nil
	}
	return e.Level, e.Audit, true
}

// carriesTree reports whether applying cmd validates a tree.
func carriesTree(cmd Command) bool {
	switch cmd.(type) {
	case ReplaceActive, EditDraft, DraftEdit, RestoreState, Rollback:
		return true
	}
	return false
}

// recordsLevel reports whether cmd's entry records the level it was
// written under (writtenExt): the entries whose trees are validated with
// that level's rules, and takeovers, which record the displaced owner
// from LevelDisplaced on. A master of level 1 reads the extension of a
// takeover as it does a tree entry's, and is never sent one of level 2.
func recordsLevel(cmd Command) bool {
	_, takeOver := cmd.(TakeOver)
	return takeOver || carriesTree(cmd)
}

// memberExt is the raft log extension of a SetMember entry: what the
// member advertises. The entry's data is the SetMember payload every
// master applies; a master without levels never reads the extension.
type memberExt struct {
	FeatureLevel int `json:"feature_level"`
	// Audit is the entry's audit context, from LevelAudit on (a binary
	// of an earlier level ignores it, and records nothing).
	Audit *auditExt `json:"audit,omitempty"`
}

// encodeMemberExt returns the extension of a SetMember entry (nil for
// level 0, which is what no extension means).
func encodeMemberExt(level int, x *auditExt) []byte {
	if level <= 0 && x == nil {
		return nil
	}
	b, _ := json.Marshal(memberExt{FeatureLevel: level, Audit: x}) // cannot fail
	return b
}

// decodeMemberExt returns the level an extension advertises. An absent or
// unreadable extension (written by a later binary in a form this one does
// not know) reads as level 0, "knows nothing new": the same on every node
// of one version, and the safe side.
func decodeMemberExt(ext []byte) (int, *auditExt) {
	if len(ext) == 0 {
		return 0, nil
	}
	var e memberExt
	if err := json.Unmarshal(ext, &e); err != nil || e.FeatureLevel < 0 {
		return 0, nil
	}
	return e.FeatureLevel, e.Audit
}

// levelMap maps member ids to the feature level they advertised (members
// advertising 0 are absent). Like the member map it is never modified in
// place: a change installs a new one, so its pointer identifies it.
type levelMap struct {
	m map[string]int
}

// get returns member id's level (0 when m is nil or has none).
func (m *levelMap) get(id string) int {
	if m == nil {
		return 0
	}
	return m.m[id]
}

// with returns the map with id's level set to level (0 deletes it), or m
// itself when that changes nothing.
func (m *levelMap) with(id string, level int) *levelMap {
	if m.get(id) == level {
		return m
	}
	n := &levelMap{m: make(map[string]int, len(m.mapOrNil())+1)}
	for k, v := range m.mapOrNil() {
		n.m[k] = v
	}
	if level > 0 {
		n.m[id] = level
	} else {
		delete(n.m, id)
	}
	return n
}

func (m *levelMap) mapOrNil() map[string]int {
	if m == nil {
		return nil
	}
	return m.m
}

// levelCache is the cluster's level as last computed: valid while the
// raft configuration has the same servers and the state the same levels.
type levelCache struct {
	levels  *levelMap
	servers []raft.Server
	level   int
}

// FeatureLevel returns the level this node advertises: that of the entry
// forms it applies, FeatureLevel.
func (s *Store) FeatureLevel() int { return s.level }

// ClusterFeatureLevel returns the level of log entry forms the leader may
// write: the lowest level advertised by the members of the latest raft
// configuration, voters and non-voters alike (both apply every entry),
// this node's own level counted as it is. A member that has not
// advertised one (it registered with a binary without levels, or has not
// registered yet) counts as 0. It is computed again only when the
// configuration or the advertised levels change.
func (s *Store) ClusterFeatureLevel() int {
	r, f := s.raft.Load(), s.fsm.Load()
	if r == nil || f == nil {
		return 0
	}
	servers := r.GetConfiguration().Configuration().Servers
	levels := f.levels()
	if c := s.levelCache.Load(); c != nil && c.levels == levels && sameServers(c.servers, servers) {
		return c.level
	}
	level := s.FeatureLevel()
	if len(servers) == 0 {
		level = 0
	}
	for _, srv := range servers {
		if string(srv.ID) != s.cfg.NodeID {
			level = min(level, levels.get(string(srv.ID)))
		}
	}
	s.levelCache.Store(&levelCache{levels: levels, servers: slices.Clone(servers), level: level})
	return level
}

// sameServers reports whether a and b list the same members.
func sameServers(a, b []raft.Server) bool {
	return slices.EqualFunc(a, b, func(x, y raft.Server) bool { return x.ID == y.ID })
}

// levels returns the advertised levels of this node's state.
func (f *fsm) levels() *levelMap {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.levels
}

// entryLevel returns the feature level of the form of the entry data: 1
// (LevelSessions) for a session entry or a binary InsertFindings entry,
// else 0.
func entryLevel(data []byte) int {
	if len(data) < 2 {
		return 0
	}
	t := cmdType(data[0])
	switch {
	case t == typeSetDraftTests || t == typeDeployTested:
		return LevelDraftTests
	case t == typeDeployVersion || t == typeRollback || t == typeRestoreVersions:
		return LevelVersions
	case t == typeAssignIDs:
		return LevelTypedIDs
	case t == typeSaveBacktest || t == typeDeleteBacktests:
		return LevelBacktests
	case t == typeSession || (t == typeInsertFindings && data[1] != payloadVersion):
		return LevelSessions
	}
	return 0
}

// formLevel returns the feature level of a decoded entry's forms,
// looking into batches and session entries (which entryLevel does not):
// LevelVersions for the version commands, LevelDraftTests for the draft
// tests' and for restores that carry tests.
func formLevel(d decoded) int {
	level := 0
	switch d.typ {
	case typeSetDraftTests, typeDeployTested:
		level = LevelDraftTests
	case typeDeployVersion, typeRollback:
		level = LevelVersions
	case typeRestoreVersions:
		level = LevelVersions
		if p := d.p.(*restoreVersionsPayload); slices.ContainsFunc(p.Versions, func(v VersionTree) bool { return len(v.Tests) > 0 }) {
			level = LevelDraftTests
		}
	case typeRestoreState:
		if p := d.p.(*restorePayload); len(p.DraftTests)+len(p.ActiveTests) > 0 {
			level = LevelDraftTests
		}
	case typeSession:
		level = LevelSessions
	case typeAssignIDs:
		level = LevelTypedIDs
	case typeSaveBacktest, typeDeleteBacktests:
		level = LevelBacktests
	}
	for _, c := range d.batch {
		level = max(level, formLevel(c))
	}
	return level
}
