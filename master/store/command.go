package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	sjson "github.com/segmentio/encoding/json"

	"github.com/squallhq/squall/config"
)

// cmdType is the first byte of every raft log entry the store writes. The
// values are part of the log format: never renumber or reuse one.
type cmdType uint8

// The command types.
const (
	typeReplaceActive  cmdType = 1
	typeCreateDraft    cmdType = 2
	typeEditDraft      cmdType = 3
	typeTakeOver       cmdType = 4
	typeDeploy         cmdType = 5
	typeDeleteDraft    cmdType = 6
	typeBatch          cmdType = 7
	typeSetMember      cmdType = 8
	typeDeleteMember   cmdType = 9
	typeRestoreState   cmdType = 10
	typeInsertFindings cmdType = 11
	typePatchFinding   cmdType = 12
	typeClearFindings  cmdType = 13
	// 20 and up: draft edits and scoped deploys (14 to 19 are left to
	// other commands).
	typeDeployScoped cmdType = 20
	typeDraftEdit    cmdType = 21
)

// payloadVersion is the second byte of every entry: the version of the JSON
// payload's shape for its type. A change to a payload, or to how Apply
// interprets it, gets a new version; Apply keeps understanding old ones,
// since the log and snapshots hold them forever.
const payloadVersion = 1

// String returns the command's name, used in metric labels and panics.
func (t cmdType) String() string {
	switch t {
	case typeReplaceActive:
		return "replace_active"
	case typeCreateDraft:
		return "create_draft"
	case typeEditDraft:
		return "edit_draft"
	case typeTakeOver:
		return "take_over"
	case typeDeploy:
		return "deploy"
	case typeDeleteDraft:
		return "delete_draft"
	case typeBatch:
		return "batch"
	case typeSetMember:
		return "set_member"
	case typeDeleteMember:
		return "delete_member"
	case typeRestoreState:
		return "restore_state"
	case typeInsertFindings:
		return "insert_findings"
	case typePatchFinding:
		return "patch_finding"
	case typeClearFindings:
		return "clear_findings"
	case typeDeployScoped:
		return "deploy_scoped"
	case typeDraftEdit:
		return "draft_edit"
	case typeDeployVersion:
		return "deploy_version"
	case typeRollback:
		return "rollback"
	case typeRestoreVersions:
		return "restore_versions"
	case typeSetDraftTests:
		return "set_draft_tests"
	case typeDeployTested:
		return "deploy_tested"
	case typeSession:
		return "session"
	case typeAssignIDs:
		return "assign_ids"
	case typeSaveBacktest:
		return "save_backtest"
	case typeDeleteBacktests:
		return "delete_backtests"
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// Command is a change of the replicated state, submitted with
// [Store.Apply]. The implementations are this package's command structs:
// [ReplaceActive], [CreateDraft], [EditDraft], [TakeOver], [Deploy],
// [DeployScoped], [DraftEdit], [DeleteDraft], [SetMember], [DeleteMember], [RestoreState],
// [InsertFindings], [PatchFinding], [ClearFindings], [AssignIDs], [SaveBacktest] and [DeleteBacktests]. Every field, including ids and timestamps, is chosen by the
// caller before the command enters the log, so that applying it is
// deterministic on every node.
type Command interface {
	cmdType() cmdType
	payload() (any, error)
}

var (
	_ Command = ReplaceActive{}
	_ Command = CreateDraft{}
	_ Command = EditDraft{}
	_ Command = TakeOver{}
	_ Command = Deploy{}
	_ Command = DeleteDraft{}
	_ Command = DeployScoped{}
	_ Command = DraftEdit{}
	_ Command = SetMember{}
	_ Command = DeleteMember{}
	_ Command = RestoreState{}
	_ Command = InsertFindings{}
	_ Command = PatchFinding{}
	_ Command = ClearFindings{}
	_ Command = AssignIDs{}
)

// ReplaceActive replaces the active tree, e.g. on import. A tree that does
// not pass config.Validate is refused with ErrInvalidTree.
type ReplaceActive struct {
	Tree *config.Node
}

// CreateDraft makes a new draft, a copy of the active tree owned by Owner,
// replacing any existing draft whatever its owner (Tornado semantics).
type CreateDraft struct {
	// ID is the new draft's id, unique per creation (see NewDraftID).
	ID    string
	Owner string
	// Now becomes the draft's created and updated timestamps.
	Now time.Time
}

// EditDraft replaces the draft's tree. It is refused with ErrNoDraft when
// there is no draft with ID, with a *NotOwnerError when User does not own
// it, and with ErrInvalidTree when Tree does not pass config.Validate; a
// refused edit changes nothing.
type EditDraft struct {
	ID   string
	User string
	Tree *config.Node
	// Now becomes the draft's updated timestamp.
	Now time.Time
}

// TakeOver makes User the owner of draft ID, whoever owned it; the
// timestamps are unchanged (Tornado semantics).
type TakeOver struct {
	ID   string
	User string
}

// Deploy makes the tree of draft ID, owned by User, the active tree. The
// draft is kept.
type Deploy struct {
	ID   string
	User string
	// Message is recorded with the version the deploy makes (from
	// LevelVersions on; see Version).
	Message string
	// Tested, when set, names the draft whose tests the caller ran (see
	// TestedOf): from LevelDraftTests on, applying refuses the deploy when
	// the draft is no longer that one.
	Tested *Tested
}

// DeployScoped is a Deploy by a user whose authorization ends at the node
// Scope (an absolute path from the root): it is refused with an
// *OutOfScopeError when the draft differs from the active tree anywhere
// but below that node (docs/decisions.md decision 19). The check is made when the
// command is applied, against the draft and active tree of that moment.
type DeployScoped struct {
	ID    string
	User  string
	Scope []string
	// Message is recorded with the version the deploy makes (see Deploy).
	Message string
	// Tested is Deploy's.
	Tested *Tested
}

// DeleteDraft deletes draft ID, owned by User.
type DeleteDraft struct {
	ID   string
	User string
}

// SetMember records the HTTP address (host:port) of cluster member ID, so
// that every node can forward requests to the leader's API. It is
// metadata beside raft's own configuration, which holds the raft
// addresses: setting it does not add a member (see [Store.Join]).
type SetMember struct {
	ID       string
	HTTPAddr string
	// FeatureLevel is the level of log entry forms the member applies
	// (see [FeatureLevel]): 0 when it advertises none. It travels in the
	// entry's raft extensions, which binaries without levels ignore.
	FeatureLevel int
}

// DeleteMember forgets the HTTP address of member ID; deleting an unknown
// member changes nothing and is not an error.
type DeleteMember struct {
	ID string
}

// RestoreState replaces the active tree and the draft (nil: no draft)
// with those of a backup, e.g. in a new cluster after losing the old one.
// Membership is not part of it. Trees that do not pass config.Validate are
// refused with ErrInvalidTree and change nothing. The draft's tests
// (Draft.Tests) and ActiveTests, the active tree's, need LevelDraftTests.
type RestoreState struct {
	Active      *config.Node
	Draft       *Draft
	ActiveTests []TestFile
}

// The JSON payloads. Trees travel as their export file.
type (
	treePayload struct {
		Tree json.RawMessage `json:"tree"`
	}
	createDraftPayload struct {
		ID    string `json:"id"`
		Owner string `json:"owner"`
		NowMS int64  `json:"now_ms"`
	}
	editDraftPayload struct {
		ID    string          `json:"id"`
		User  string          `json:"user"`
		Tree  json.RawMessage `json:"tree"`
		NowMS int64           `json:"now_ms"`
	}
	// draftUserPayload is the payload of TakeOver, Deploy and DeleteDraft.
	draftUserPayload struct {
		ID   string `json:"id"`
		User string `json:"user"`
	}
	deployScopedPayload struct {
		ID    string   `json:"id"`
		User  string   `json:"user"`
		Scope []string `json:"scope"`
	}
	setMemberPayload struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
		// level is the level the entry's extension advertises (never
		// in the JSON payload, which every master must read).
		level int
	}
	memberPayload struct {
		ID string `json:"id"`
	}
	restorePayload struct {
		Active json.RawMessage `json:"active"`
		Draft  *draftRecord    `json:"draft"`
		// The tests (LevelDraftTests; absent below it, which masters
		// before it decode).
		DraftTests  []TestFile `json:"draft_tests,omitempty"`
		ActiveTests []TestFile `json:"active_tests,omitempty"`
	}
	batchPayload struct {
		Commands []batchItem `json:"commands"`
	}
	batchItem struct {
		Type    cmdType         `json:"type"`
		Version uint8           `json:"version"`
		Payload json.RawMessage `json:"payload"`
	}
)

func (ReplaceActive) cmdType() cmdType { return typeReplaceActive }
func (CreateDraft) cmdType() cmdType   { return typeCreateDraft }
func (EditDraft) cmdType() cmdType     { return typeEditDraft }
func (TakeOver) cmdType() cmdType      { return typeTakeOver }
func (Deploy) cmdType() cmdType        { return typeDeploy }
func (DeleteDraft) cmdType() cmdType   { return typeDeleteDraft }
func (SetMember) cmdType() cmdType     { return typeSetMember }
func (DeleteMember) cmdType() cmdType  { return typeDeleteMember }
func (RestoreState) cmdType() cmdType  { return typeRestoreState }
func (DeployScoped) cmdType() cmdType  { return typeDeployScoped }

func (c DeployScoped) payload() (any, error) {
	if c.ID == "" || c.User == "" || len(c.Scope) == 0 {
		return nil, fmt.Errorf("%w: a scoped deploy needs a draft id, a user and a scope", ErrInvalidCommand)
	}
	return deployScopedPayload{ID: c.ID, User: c.User, Scope: c.Scope}, nil
}

func (c ReplaceActive) payload() (any, error) {
	tree, err := encodeTree(c.Tree)
	if err != nil {
		return nil, err
	}
	return treePayload{Tree: tree}, nil
}

func (c CreateDraft) payload() (any, error) {
	if c.ID == "" || c.Owner == "" {
		return nil, fmt.Errorf("%w: create draft needs an id and an owner", ErrInvalidCommand)
	}
	return createDraftPayload{ID: c.ID, Owner: c.Owner, NowMS: c.Now.UnixMilli()}, nil
}

func (c EditDraft) payload() (any, error) {
	if c.ID == "" || c.User == "" {
		return nil, fmt.Errorf("%w: edit draft needs an id and a user", ErrInvalidCommand)
	}
	tree, err := encodeTree(c.Tree)
	if err != nil {
		return nil, err
	}
	return editDraftPayload{ID: c.ID, User: c.User, Tree: tree, NowMS: c.Now.UnixMilli()}, nil
}

func draftUser(name, id, user string) (any, error) {
	if id == "" || user == "" {
		return nil, fmt.Errorf("%w: %s needs a draft id and a user", ErrInvalidCommand, name)
	}
	return draftUserPayload{ID: id, User: user}, nil
}

func (c TakeOver) payload() (any, error)    { return draftUser("take over", c.ID, c.User) }
func (c Deploy) payload() (any, error)      { return draftUser("deploy", c.ID, c.User) }
func (c DeleteDraft) payload() (any, error) { return draftUser("delete draft", c.ID, c.User) }

func (c SetMember) payload() (any, error) {
	if c.ID == "" || c.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: set member needs an id and an HTTP address", ErrInvalidCommand)
	}
	return setMemberPayload{ID: c.ID, HTTPAddr: c.HTTPAddr}, nil
}

func (c DeleteMember) payload() (any, error) {
	if c.ID == "" {
		return nil, fmt.Errorf("%w: delete member needs an id", ErrInvalidCommand)
	}
	return memberPayload(c), nil
}

func (c RestoreState) payload() (any, error) {
	active, err := encodeTree(c.Active)
	if err != nil {
		return nil, err
	}
	p := restorePayload{Active: active}
	if d := c.Draft; d != nil {
		if d.ID == "" || d.Owner == "" {
			return nil, fmt.Errorf("%w: a restored draft needs an id and an owner", ErrInvalidCommand)
		}
		tree, err := encodeTree(d.Tree)
		if err != nil {
			return nil, err
		}
		p.Draft = &draftRecord{ID: d.ID, Owner: d.Owner, CreatedMS: d.CreatedMS, UpdatedMS: d.UpdatedMS, Tree: tree}
		p.DraftTests = d.Tests
	}
	p.ActiveTests = c.ActiveTests
	for _, files := range [][]TestFile{p.DraftTests, p.ActiveTests} {
		if err := CheckTestFiles(files); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// encodeTree returns the compact export file of tree.
func encodeTree(tree *config.Node) (json.RawMessage, error) {
	if tree == nil {
		return nil, fmt.Errorf("%w: missing tree", ErrInvalidCommand)
	}
	b, err := json.Marshal(&config.Export{Version: config.ExportVersion, Node: tree})
	if err != nil {
		return nil, fmt.Errorf("encode tree: %w", err)
	}
	return b, nil
}

// decodeTree decodes an export file and validates it with version rules
// of the checks. Its errors are results (ErrInvalidTree), not corrupt
// entries: they are deterministic.
func decodeTree(raw json.RawMessage, rules config.Rules) (*config.Node, error) {
	ex, err := config.DecodeExport(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTree, err)
	}
	if err := config.ValidateRules(ex.Node, rules); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTree, err)
	}
	return ex.Node, nil
}

// encodeCommand returns the log entry of one command, in the forms of
// this binary's FeatureLevel.
func encodeCommand(c Command) ([]byte, error) { return encodeCommandAt(c, FeatureLevel) }

// encodeCommandAt returns the log entry of one command in the forms of
// feature level level: type byte, version byte, payload (JSON, or binary
// for InsertFindings from LevelSessions on).
func encodeCommandAt(c Command, level int) ([]byte, error) {
	if c, ok := c.(InsertFindings); ok && level >= LevelSessions {
		return c.appendEntry()
	}
	p, err := c.payload()
	if err != nil {
		return nil, err
	}
	return appendEntry(c.cmdType(), p)
}

// encodeBatch returns the log entry of a batch: several commands applied in
// order, each with its own result.
func encodeBatch(cmds []Command) ([]byte, error) {
	items := make([]batchItem, 0, len(cmds))
	for i, c := range cmds {
		if c == nil {
			return nil, fmt.Errorf("%w: batch command %d is nil", ErrInvalidCommand, i)
		}
		p, err := c.payload()
		if err != nil {
			return nil, fmt.Errorf("batch command %d: %w", i, err)
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encode batch command %d: %w", i, err)
		}
		items = append(items, batchItem{Type: c.cmdType(), Version: payloadVersion, Payload: raw})
	}
	return appendEntry(typeBatch, batchPayload{Commands: items})
}

func appendEntry(t cmdType, p any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	buf.WriteByte(payloadVersion)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// decoded is a decoded log entry: typ and p, a pointer to its payload
// struct, or for a batch the decoded commands.
type decoded struct {
	typ   cmdType
	p     any
	batch []decoded
	// level is the feature level the entry was written under (see
	// writtenExt): its trees are validated with that level's rules.
	level int
	// audit is the entry's audit context (nil: it records nothing).
	audit *auditExt
}

// setAudit records x in d and the commands it holds.
func (d *decoded) setAudit(x *auditExt) {
	d.audit = x
	for i := range d.batch {
		d.batch[i].setAudit(x)
	}
}

// setLevel records level in d and the commands it holds.
func (d *decoded) setLevel(level int) {
	d.level = level
	for i := range d.batch {
		d.batch[i].setLevel(level)
	}
}

// errCorruptEntry is the class of errors of entries that cannot be decoded.
var errCorruptEntry = errors.New("undecodable command")

// decodeCommand decodes a log entry. An error means this binary cannot
// apply the entry: an unknown type or version, or a payload that does not
// decode strictly. The FSM panics on it.
func decodeCommand(data []byte) (decoded, error) {
	if len(data) < 2 {
		return decoded{}, fmt.Errorf("%w: entry of %d bytes", errCorruptEntry, len(data))
	}
	t := cmdType(data[0])
	if t == typeBatch {
		if data[1] != payloadVersion {
			return decoded{}, fmt.Errorf("%w: %s version %d", errCorruptEntry, t, data[1])
		}
		var bp batchPayload
		if err := strictUnmarshal(data[2:], &bp); err != nil {
			return decoded{}, fmt.Errorf("%w: %s: %w", errCorruptEntry, t, err)
		}
		d := decoded{typ: t, batch: make([]decoded, 0, len(bp.Commands))}
		for i, it := range bp.Commands {
			if it.Type == typeBatch {
				return decoded{}, fmt.Errorf("%w: nested batch at %d", errCorruptEntry, i)
			}
			c, err := decodePayload(it.Type, it.Version, it.Payload)
			if err != nil {
				return decoded{}, fmt.Errorf("batch command %d: %w", i, err)
			}
			d.batch = append(d.batch, c)
		}
		return d, nil
	}
	if t == typeSession {
		return decodeSession(data[1], data[2:])
	}
	return decodePayload(t, data[1], data[2:])
}

func decodePayload(t cmdType, version uint8, raw []byte) (decoded, error) {
	var p any
	switch t {
	case typeReplaceActive:
		p = new(treePayload)
	case typeCreateDraft:
		p = new(createDraftPayload)
	case typeEditDraft:
		p = new(editDraftPayload)
	case typeTakeOver, typeDeploy, typeDeleteDraft:
		p = new(draftUserPayload)
	case typeDeployScoped:
		p = new(deployScopedPayload)
	case typeDraftEdit:
		p = new(draftEditPayload)
	case typeDeployVersion:
		p = new(deployVersionPayload)
	case typeRollback:
		p = new(rollbackPayload)
	case typeRestoreVersions:
		p = new(restoreVersionsPayload)
	case typeSetDraftTests:
		p = new(setDraftTestsPayload)
	case typeDeployTested:
		p = new(deployTestedPayload)
	case typeSetMember:
		p = new(setMemberPayload)
	case typeDeleteMember:
		p = new(memberPayload)
	case typeRestoreState:
		p = new(restorePayload)
	case typeInsertFindings:
		p = new(insertFindingsPayload)
	case typePatchFinding:
		p = new(patchFindingPayload)
	case typeClearFindings:
		p = new(clearFindingsPayload)
	case typeAssignIDs:
		p = new(assignIDsPayload)
	case typeSaveBacktest:
		p = new(saveBacktestPayload)
	case typeDeleteBacktests:
		p = new(deleteBacktestsPayload)
	default:
		return decoded{}, fmt.Errorf("%w: unknown command type %d", errCorruptEntry, uint8(t))
	}
	if t == typeInsertFindings && version == insertFindingsBinaryVersion {
		p, err := decodeInsertFindingsBinary(raw)
		if err != nil {
			return decoded{}, fmt.Errorf("%w: %s: %w", errCorruptEntry, t, err)
		}
		return decoded{typ: t, p: p}, nil
	}
	if version != payloadVersion {
		return decoded{}, fmt.Errorf("%w: %s version %d (this binary knows %d)", errCorruptEntry, t, version, payloadVersion)
	}
	unmarshal := strictUnmarshal
	if t == typeInsertFindings {
		unmarshal = fastStrictUnmarshal
	}
	if err := unmarshal(raw, p); err != nil {
		return decoded{}, fmt.Errorf("%w: %s: %w", errCorruptEntry, t, err)
	}
	return decoded{typ: t, p: p}, nil
}

// fastStrictUnmarshal is strictUnmarshal with segmentio's decoder (about 6
// times faster) for the entries that carry the most data (InsertFindings,
// decoded by every node). Entries are written by encodeCommand, so any
// correct decoder reads them alike; FuzzDecodeInsertFindings checks it
// against strictUnmarshal.
func fastStrictUnmarshal(data []byte, v any) error {
	rest, err := sjson.Parse(data, v, sjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return errors.New("trailing data after the payload")
	}
	return nil
}

// strictUnmarshal decodes exactly one JSON value with no unknown fields.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the payload")
	}
	return nil
}
