package store

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master/audit"
)

// BackupFormat is the version of the backup file written by
// [Store.WriteBackup] and [Backup.MarshalJSON]. Format 2 adds the
// findings, format 3 the versions of the active tree, format 4 the audit
// log, format 5 the rule tests (of the draft, of the active tree and of
// each version), format 6 the ids of tools and tenants; DecodeBackup
// reads formats 1 to 6. Kept backtests (backtest.go) are not backed up:
// a result is recomputable only while Kafka retains its range, and a
// restore leaves the cluster's as they are.
const BackupFormat = backupFormatIDs

// backupFormatTests is the backup format from which a file may hold rule
// tests.
const backupFormatTests = 5

// backupFormatIDs is the backup format from which a file may hold the
// ids of tools and tenants.
const backupFormatIDs = 6

// restoreVersionBytes is about how many bytes of version trees go in one
// RestoreVersions entry when a backup is restored (at least one version).
const restoreVersionBytes = 1 << 20

// restoreChunk is how many findings of a backup go in one InsertFindings
// entry when it is restored (about 0.5 MB of log entry).
const restoreChunk = 1000

// Backup is a logical copy of the replicated state: the active tree, the
// draft and the findings. It is what an operator saves to restore later,
// into the same cluster or a new one ([Store.Restore]). Membership is
// deliberately not part of it: it belongs to the cluster, not to the data.
//
// Its JSON form, the backup file, is
//
//	{"format": 2, "index": N, "active_index": N,
//	 "active": <export file>,
//	 "draft": {"id", "owner", "created_ms", "updated_ms", "tree": <export file>} | null,
//	 "draft_tests": [{"name", "content"}, ...], "active_tests": [...],
//	 "next_version": N, "versions": [<version with its "tree" and "tests">, ...],
//	 "audit": [<audit record>, ...],
//	 "ids": {"tools": {<tool code>: id, ...}, "tenants": {<tenant>: id, ...}},
//	 "findings": [<finding>, ...]}
//
// where each finding is its stored record (the form of InsertFindings
// entries): passwords the findings API encrypted stay encrypted. The
// findings come last, so that a restore can stream them. Format 1 files
// (before findings) have no "findings" key, and files before format 3 no
// versions. "ids" (format 6) is absent when the state had none (a cluster
// below LevelTypedIDs).
type Backup struct {
	// Index and ActiveIndex are the state's and the active tree's indexes
	// when the backup was taken (informational: a restore gets new ones).
	Index       uint64
	ActiveIndex uint64
	Active      *config.Node
	// Draft is nil when there was no draft.
	Draft *Draft
	// WithFindings is set when the backup holds the findings (format 2):
	// restoring it replaces every finding with Findings. A format 1 backup
	// restores the trees and leaves the findings alone.
	WithFindings bool
	Findings     []Finding
	// WithVersions is set when the backup holds the versions (format 3):
	// restoring it replaces the versions with Versions (oldest first),
	// on a cluster at LevelVersions. NextVersion is the number the next
	// version would have had.
	WithVersions bool
	Versions     []VersionTree
	NextVersion  uint64
	// WithAudit is set when the backup holds the audit log (format 4):
	// Audit, oldest first, for `squall audit verify --backup`. A restore
	// does not bring it back: the cluster restored into keeps its own
	// log, which records the restore.
	WithAudit bool
	Audit     []audit.Record
	// WithTests is set when the backup holds the rule tests (format 5):
	// Draft.Tests, ActiveTests and each version's. Restoring it on a
	// cluster at LevelDraftTests brings them back.
	WithTests   bool
	ActiveTests []TestFile
	// IDs are the ids of tools and tenants (format 6), nil when the file
	// has none. Restoring a backup with findings into a cluster at
	// LevelTypedIDs replaces the ids with them; without them, with those
	// AssignIDs gives the backup's findings in a state without ids (the
	// tenants, then the tool codes, numbered from 1 in byte order), so
	// that one file gives the same ids wherever it is restored.
	IDs *IDs
	// format is the format of the file read (0: not read from a file).
	format int
}

// Restored is the outcome of a restore.
type Restored struct {
	// Index is the state index of the restore of the trees, which is also
	// the active tree's new index.
	Index uint64
	// Findings is how many findings were restored; Duplicates how many of
	// the backup's findings were left out as duplicates of an earlier one
	// (same identity or uid: none in a file written by WriteBackup).
	Findings   int
	Duplicates int
	// Versions is how many versions were restored. VersionsSkipped is set
	// when the backup holds versions that were not restored, the cluster
	// being below LevelVersions.
	Versions        int
	VersionsSkipped bool
	// IDsSkipped is set when the ids of tools and tenants were not
	// restored, the cluster being below LevelTypedIDs: the cluster
	// assigns them once it reaches it (see AssignIDs).
	IDsSkipped bool
	// TestsSkipped is set when the backup holds rule tests that were not
	// restored, the cluster being below LevelDraftTests.
	TestsSkipped bool
}

// backupHeader is the backup file without its findings.
type backupHeader struct {
	Format      int             `json:"format"`
	Index       uint64          `json:"index"`
	ActiveIndex uint64          `json:"active_index"`
	Active      json.RawMessage `json:"active"`
	Draft       *draftRecord    `json:"draft"`
	// NextVersion and Versions (format 3) are written before the
	// findings; a restore holds the versions in memory.
	NextVersion uint64        `json:"next_version,omitempty"`
	Versions    []VersionTree `json:"versions,omitempty"`
	// Audit (format 4) is the audit log, oldest first.
	Audit []audit.Record `json:"audit,omitempty"`
	// DraftTests and ActiveTests (format 5) are the tests of the draft
	// and of the active tree.
	DraftTests  []TestFile `json:"draft_tests,omitempty"`
	ActiveTests []TestFile `json:"active_tests,omitempty"`
	// IDs (format 6) are the ids of tools and tenants.
	IDs *IDs `json:"ids,omitempty"`
}

// MarshalJSON writes the backup file, in format 2 with b.Findings.
func (b *Backup) MarshalJSON() ([]byte, error) {
	active, err := encodeTree(b.Active)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	h := backupHeader{Format: BackupFormat, Index: b.Index, ActiveIndex: b.ActiveIndex, Active: active,
		NextVersion: b.NextVersion, Versions: b.Versions, Audit: b.Audit, IDs: b.IDs, ActiveTests: b.ActiveTests}
	if d := b.Draft; d != nil {
		tree, err := encodeTree(d.Tree)
		if err != nil {
			return nil, fmt.Errorf("backup: draft: %w", err)
		}
		h.Draft = &draftRecord{ID: d.ID, Owner: d.Owner, CreatedMS: d.CreatedMS, UpdatedMS: d.UpdatedMS, Tree: tree}
		h.DraftTests = d.Tests
	}
	recs := make([]findingRecord, len(b.Findings))
	for i, f := range b.Findings {
		recs[i] = findingRecord(f)
	}
	return json.Marshal(struct {
		backupHeader
		Findings []findingRecord `json:"findings"`
	}{h, recs})
}

// DecodeBackup reads a whole backup file into memory (see RestoreFrom for
// large ones), strictly: unknown fields, trailing data, a newer format,
// findings that are not the last key, and trees that do not pass
// config.Validate are errors (ErrInvalidTree for the trees, else
// ErrInvalidBackup).
func DecodeBackup(r io.Reader) (*Backup, error) {
	var b *Backup
	err := decodeBackup(r, func(h *Backup) error {
		b = h
		return nil
	}, func(f Finding) error {
		b.Findings = append(b.Findings, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// BackupSummary describes a backup file read by [CheckBackup].
type BackupSummary struct {
	// Format is the file's format (1; 2: with findings; 3: with versions;
	// 4: with the audit log; 5: with rule tests; 6: with the ids of tools
	// and tenants).
	Format      int
	Index       uint64
	ActiveIndex uint64
	// Draft reports a backup with a draft.
	Draft bool
	// Findings is how many findings the file holds; Versions how many
	// tree versions; TestFiles how many test files the draft and the
	// active tree hold.
	Findings  int
	Versions  int
	TestFiles int
}

// CheckBackup reads a whole backup file as a restore reads it (the checks
// of DecodeBackup), streaming: the findings are counted, not kept. A
// restore may still refuse a file that passes, for the limits of the
// masters it goes to.
func CheckBackup(r io.Reader) (*BackupSummary, error) {
	var sum BackupSummary
	err := decodeBackup(r, func(b *Backup) error {
		sum.Format, sum.Index, sum.ActiveIndex, sum.Draft = 1, b.Index, b.ActiveIndex, b.Draft != nil
		switch {
		case b.format >= backupFormatIDs:
			sum.Format = b.format
		case b.WithTests:
			sum.Format = backupFormatTests
		case b.WithAudit:
			sum.Format = 4
		case b.WithVersions:
			sum.Format = 3
		case b.WithFindings:
			sum.Format = 2
		}
		sum.Versions = len(b.Versions)
		sum.TestFiles = len(b.ActiveTests)
		if b.Draft != nil {
			sum.TestFiles += len(b.Draft.Tests)
		}
		return nil
	}, func(Finding) error {
		sum.Findings++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sum, nil
}

// decodeBackup reads a backup file from r as a stream: it calls header
// once with the trees (before any finding), then finding for each finding
// in the file's order. Errors of the file match ErrInvalidBackup, or
// ErrInvalidTree for its trees; errors of the callbacks are returned as
// they are.
func decodeBackup(r io.Reader, header func(*Backup) error, finding func(Finding) error) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("decode backup: %w: %s", ErrInvalidBackup, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	dec.DisallowUnknownFields()
	delim := func(want json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return invalid("%v", err)
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return invalid("want %q, got %v", want, tok)
		}
		return nil
	}
	var (
		h          backupHeader
		seen       = map[string]bool{}
		headerDone bool
	)
	finishHeader := func() error {
		if headerDone {
			return nil
		}
		headerDone = true
		if h.Format < 1 || h.Format > BackupFormat {
			return invalid("format %d is not supported (this binary reads 1 to %d)", h.Format, BackupFormat)
		}
		if len(h.Active) == 0 || string(h.Active) == "null" {
			return invalid("no active tree")
		}
		b := &Backup{Index: h.Index, ActiveIndex: h.ActiveIndex, WithFindings: h.Format >= 2,
			WithVersions: h.Format >= 3, Versions: h.Versions, NextVersion: h.NextVersion, WithAudit: h.Format >= 4, Audit: h.Audit,
			IDs: h.IDs, format: h.Format, WithTests: h.Format >= backupFormatTests, ActiveTests: h.ActiveTests}
		if h.IDs != nil {
			if err := checkIDs("tool", h.IDs.Tools); err != nil {
				return invalid("ids: %v", err)
			}
			if err := checkIDs("tenant", h.IDs.Tenants); err != nil {
				return invalid("ids: %v", err)
			}
		}
		if err := checkBackupVersions(h.Versions, h.Format); err != nil {
			return invalid("%v", err)
		}
		for _, files := range [][]TestFile{h.DraftTests, h.ActiveTests} {
			if err := CheckTestFiles(files); err != nil {
				return invalid("%v", err)
			}
		}
		if len(h.DraftTests) > 0 && h.Draft == nil {
			return invalid(`"draft_tests" without a draft`)
		}
		var err error
		if b.Active, err = decodeTree(h.Active, config.LatestRules); err != nil {
			return fmt.Errorf("decode backup: active tree: %w", err)
		}
		if rec := h.Draft; rec != nil {
			if rec.ID == "" || rec.Owner == "" {
				return invalid("the draft needs an id and an owner")
			}
			tree, err := decodeTree(rec.Tree, config.LatestRules)
			if err != nil {
				return fmt.Errorf("decode backup: draft tree: %w", err)
			}
			b.Draft = &Draft{ID: rec.ID, Owner: rec.Owner, CreatedMS: rec.CreatedMS, UpdatedMS: rec.UpdatedMS, Tree: tree, Tests: h.DraftTests}
		}
		return header(b)
	}

	if err := delim('{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return invalid("%v", err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return invalid("duplicate key %q", key)
		}
		seen[key] = true
		var dst any
		switch key {
		case "format":
			dst = &h.Format
		case "index":
			dst = &h.Index
		case "active_index":
			dst = &h.ActiveIndex
		case "active":
			dst = &h.Active
		case "draft":
			dst = &h.Draft
		case "next_version", "versions":
			if !seen["format"] || h.Format < 3 {
				return invalid("%q needs format 3 and must follow \"format\"", key)
			}
			dst = &h.NextVersion
			if key == "versions" {
				dst = &h.Versions
			}
		case "audit":
			if !seen["format"] || h.Format < 4 {
				return invalid(`"audit" needs format 4 and must follow "format"`)
			}
			dst = &h.Audit
		case "ids":
			if !seen["format"] || h.Format < backupFormatIDs {
				return invalid(`"ids" needs format %d and must follow "format"`, backupFormatIDs)
			}
			dst = &h.IDs
		case "draft_tests", "active_tests":
			if !seen["format"] || h.Format < backupFormatTests {
				return invalid("%q needs format %d and must follow \"format\"", key, backupFormatTests)
			}
			dst = &h.DraftTests
			if key == "active_tests" {
				dst = &h.ActiveTests
			}
		case "findings":
			if !seen["format"] || !seen["active"] || h.Format < 2 {
				return invalid(`"findings" needs format 2 and must follow "format" and "active"`)
			}
			if err := finishHeader(); err != nil {
				return err
			}
			if err := delim('['); err != nil {
				return err
			}
			for i := 0; dec.More(); i++ {
				var rec findingRecord
				if err := dec.Decode(&rec); err != nil {
					return invalid("finding %d: %v", i, err)
				}
				if err := checkFinding(Finding(rec)); err != nil {
					return invalid("finding %d: %v", i, err)
				}
				if err := finding(Finding(rec)); err != nil {
					return err
				}
			}
			if err := delim(']'); err != nil {
				return err
			}
			if dec.More() {
				return invalid(`"findings" must be the last key`)
			}
			continue
		default:
			return invalid("unknown key %q", key)
		}
		if err := dec.Decode(dst); err != nil {
			return invalid("%s: %v", key, err)
		}
	}
	if err := delim('}'); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("trailing data after the backup")
	}
	if h.Format >= 2 && !seen["findings"] {
		return invalid(`format %d needs "findings"`, h.Format)
	}
	return finishHeader()
}

// WriteBackup writes the backup file of this node's state to w, from one
// read transaction of the state file, streaming the findings (tenants and
// uids in byte order) without holding them in memory. start, if not nil,
// is called with the backup's indexes before anything is written. On the
// leader after ConsistentRead the backup holds every acknowledged write.
func (s *Store) WriteBackup(w io.Writer, start func(*Backup)) error {
	f := s.fsm.Load()
	if f == nil {
		return ErrNotOpen
	}
	return f.view(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucketState)
		h := backupHeader{Format: BackupFormat}
		var err error
		if h.Index, err = getUint64(sb, keyIndex); err != nil {
			return err
		}
		if h.ActiveIndex, err = getUint64(sb, keyActiveIndex); err != nil {
			return err
		}
		if v := sb.Get(keyActive); v != nil {
			h.Active = append(json.RawMessage(nil), v...)
		} else if h.Active, err = encodeTree(config.NewRoot()); err != nil {
			return err
		}
		if v := sb.Get(keyDraft); v != nil {
			h.Draft = new(draftRecord)
			if err := json.Unmarshal(v, h.Draft); err != nil {
				return fmt.Errorf("backup: draft: %w", err)
			}
		}
		if h.NextVersion, h.Versions, err = backupVersions(tx); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if h.Audit, err = readAudit(tx, 0, 0); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if h.Draft != nil {
			if h.DraftTests, err = readTests(sb, keyDraftTests); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
		}
		if h.ActiveTests, err = readTests(sb, keyActiveTests); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if h.IDs, err = readIDs(tx); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if start != nil {
			start(&Backup{Index: h.Index, ActiveIndex: h.ActiveIndex, WithFindings: true, WithVersions: true, NextVersion: h.NextVersion})
		}
		head, err := json.Marshal(h)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(w, 64<<10)
		// The header object without its closing brace, then the findings.
		bw.Write(head[:len(head)-1])
		bw.WriteString(`,"findings":[`)
		first := true
		var buf []byte
		if root := tx.Bucket(bucketFindings); root != nil {
			err := root.ForEachBucket(func(tenant []byte) error {
				tb, ok, err := tenantFindings(tx, string(tenant), false)
				if err != nil || !ok {
					return err
				}
				return tb.byUID.ForEach(func(_, rec []byte) error {
					if !first {
						bw.WriteByte(',')
					}
					first = false
					// The stored record's JSON is the backup's form of a
					// finding.
					var err error
					if buf, err = appendRecordJSON(buf[:0], rec); err != nil {
						return err
					}
					_, err = bw.Write(buf)
					return err
				})
			})
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
		}
		bw.WriteString("]}\n")
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("backup: write: %w", err)
		}
		return nil
	})
}

// Restore replaces the state with the backup's: the active tree and the
// draft (one RestoreState command, new indexes, watchers woken) and, for a
// backup WithFindings, every tenant's findings. Only the leader can.
//
// The findings are restored in several entries: the first (a batch of
// RestoreState and ClearFindings) replaces the trees and deletes every
// finding, then InsertFindings entries of restoreChunk findings each add
// the backup's, as stored (uids, times, triage fields, encrypted
// passwords). Until the last one is applied, reads see part of the
// findings; an insert accepted meanwhile is kept. A restore cut short
// (leadership lost, ctx) leaves part of the findings: run it again.
func (s *Store) Restore(ctx context.Context, b *Backup) (Restored, error) {
	if b == nil {
		return Restored{}, fmt.Errorf("restore: %w: no backup", ErrInvalidCommand)
	}
	rs := &restorer{s: s, ctx: ctx}
	if b.IDs == nil {
		for i := range b.Findings {
			rs.names.add(&b.Findings[i])
		}
	}
	if err := rs.header(b); err != nil {
		return Restored{}, err
	}
	for _, f := range b.Findings {
		if err := rs.finding(f); err != nil {
			return rs.out, err
		}
	}
	return rs.out, rs.flush()
}

// RestoreFrom restores the backup file read from r (see Restore), which
// may be larger than memory: it copies r to a temporary file in the data
// dir, checks all of it, and only then restores it, so that a bad file
// (ErrInvalidBackup, ErrInvalidTree) changes nothing.
func (s *Store) RestoreFrom(ctx context.Context, r io.Reader) (Restored, error) {
	if _, err := s.leaderNode(); err != nil {
		return Restored{}, err
	}
	tmp, err := os.CreateTemp(s.cfg.DataDir, "restore-upload-*.json")
	if err != nil {
		return Restored{}, fmt.Errorf("restore: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := io.Copy(tmp, r); err != nil {
		return Restored{}, fmt.Errorf("restore: read backup: %w", err)
	}
	rewind := func() error {
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		return nil
	}
	if err := rewind(); err != nil {
		return Restored{}, err
	}
	// The check also collects the tenants and tool codes, for a file
	// without ids (see Backup.IDs).
	rs := &restorer{s: s, ctx: ctx}
	if err := decodeBackup(tmp, func(*Backup) error { return nil }, func(f Finding) error {
		rs.names.add(&f)
		return nil
	}); err != nil {
		return Restored{}, err
	}
	if err := rewind(); err != nil {
		return Restored{}, err
	}
	if err := decodeBackup(tmp, rs.header, rs.finding); err != nil {
		return rs.out, err
	}
	return rs.out, rs.flush()
}

// restorer submits a restore: the trees, then the findings in chunks.
type restorer struct {
	s       *Store
	ctx     context.Context
	withF   bool
	pending []Finding
	out     Restored
	// names are the backup's tenants and tool codes, collected before
	// header is called when the file may have no ids.
	names idNames
}

func (rs *restorer) header(b *Backup) error {
	if err := checkTreeLimits(b.Active); err != nil {
		return fmt.Errorf("restore: active tree: %w", err)
	}
	if b.Draft != nil {
		if err := checkTreeLimits(b.Draft.Tree); err != nil {
			return fmt.Errorf("restore: draft tree: %w", err)
		}
	}
	cmd := RestoreState{Active: b.Active, Draft: b.Draft, ActiveTests: b.ActiveTests}
	vers := b.Versions
	if rs.s.ClusterFeatureLevel() < LevelDraftTests {
		// The tests wait for the cluster's level: restored without them.
		cmd, vers = withoutTests(cmd, vers, &rs.out.TestsSkipped)
	}
	rs.withF = b.WithFindings
	// The ids are replaced with the findings, in the same entry.
	var ids []Command
	if b.WithFindings {
		if rs.s.ClusterFeatureLevel() < LevelTypedIDs {
			rs.out.IDsSkipped = b.IDs != nil
		} else {
			x := b.IDs
			if x == nil {
				x = rs.names.ids()
			}
			ids = []Command{AssignIDs{Replace: true, IDs: x}}
		}
	}
	var chunks [][]VersionTree
	if b.WithVersions {
		if rs.s.ClusterFeatureLevel() < LevelVersions {
			rs.out.VersionsSkipped = len(b.Versions) > 0
		} else {
			chunks = versionChunks(vers)
		}
	}
	if chunks != nil {
		// One entry: the trees, the findings (deleted) and the first
		// versions (replacing the others) change together.
		cmds := []Command{cmd, RestoreVersions{Replace: true, Next: b.NextVersion, Versions: chunks[0]}}
		if b.WithFindings {
			cmds = append(cmds, ClearFindings{})
		}
		cmds = append(cmds, ids...)
		if err := rs.batch(cmds); err != nil {
			return err
		}
		rs.out.Versions += len(chunks[0])
		for _, c := range chunks[1:] {
			if _, err := rs.s.do(rs.ctx, nil, RestoreVersions{Next: b.NextVersion, Versions: c}); err != nil {
				return fmt.Errorf("restore: versions after %d restored: %w", rs.out.Versions, err)
			}
			rs.out.Versions += len(c)
		}
		return nil
	}
	if !b.WithFindings {
		idx, err := rs.s.do(rs.ctx, nil, cmd)
		rs.out.Index = idx
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		return nil
	}
	// One entry: the trees are replaced and the findings deleted together.
	return rs.batch(append([]Command{cmd, ClearFindings{}}, ids...))
}

// batch applies cmds as one entry, fails if any of them is refused, and
// records the entry's index as the restore's.
func (rs *restorer) batch(cmds []Command) error {
	res, err := rs.s.Batch(rs.ctx, cmds...)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("restore: %w", r.Err)
		}
	}
	rs.out.Index = res[0].Index
	return nil
}

func (rs *restorer) finding(f Finding) error {
	if !rs.withF {
		return fmt.Errorf("restore: %w: findings in a backup without findings", ErrInvalidBackup)
	}
	rs.pending = append(rs.pending, f)
	if len(rs.pending) >= restoreChunk {
		return rs.flush()
	}
	return nil
}

// flush submits the pending findings.
func (rs *restorer) flush() error {
	if len(rs.pending) == 0 {
		return nil
	}
	outs, err := rs.s.InsertFindings(rs.ctx, rs.pending)
	if err != nil {
		return fmt.Errorf("restore: findings after %d restored: %w", rs.out.Findings, err)
	}
	for _, o := range outs {
		if o.Created {
			rs.out.Findings++
		} else {
			rs.out.Duplicates++
		}
	}
	rs.pending = rs.pending[:0]
	return nil
}

// versionChunks splits versions into the RestoreVersions entries of a
// restore, of about restoreVersionBytes of trees each: one empty chunk
// when there are none (which still replaces the versions).
func versionChunks(vers []VersionTree) [][]VersionTree {
	chunks := [][]VersionTree{nil}
	size := 0
	for _, v := range vers {
		last := len(chunks) - 1
		if len(chunks[last]) > 0 && size+len(v.Tree) > restoreVersionBytes {
			chunks = append(chunks, nil)
			last++
			size = 0
		}
		chunks[last] = append(chunks[last], v)
		size += len(v.Tree)
	}
	return chunks
}

// checkBackupVersions checks a backup's versions: numbers that grow,
// trees that decode, messages within bounds, tests (format 5 only) that
// CheckTestFiles accepts.
func checkBackupVersions(vers []VersionTree, format int) error {
	var last uint64
	for i, v := range vers {
		if v.Number <= last {
			return fmt.Errorf("version %d: number %d does not follow %d", i, v.Number, last)
		}
		last = v.Number
		if _, err := config.DecodeExport(v.Tree); err != nil {
			return fmt.Errorf("version %d: tree: %w", v.Number, err)
		}
		if err := CheckVersionMessage(v.Message); err != nil {
			return fmt.Errorf("version %d: %w", v.Number, err)
		}
		if (len(v.Tests) > 0 || v.TestsHash != "") && format < backupFormatTests {
			return fmt.Errorf("version %d: tests need format %d", v.Number, backupFormatTests)
		}
		if err := CheckTestFiles(v.Tests); err != nil {
			return fmt.Errorf("version %d: %w", v.Number, err)
		}
	}
	return nil
}

// backupVersions reads the versions of a state file, with their trees.
func backupVersions(tx *bolt.Tx) (uint64, []VersionTree, error) {
	var st state
	if err := readVersions(tx, &st); err != nil {
		return 0, nil, err
	}
	out := make([]VersionTree, 0, len(st.versions))
	for _, v := range st.versions {
		raw, err := versionTreeJSON(tx, v.Hash)
		if err != nil {
			return 0, nil, err
		}
		tests, err := versionTests(tx, v.TestsHash)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, VersionTree{Version: v, Tree: raw, Tests: tests})
	}
	return st.nextVersion, out, nil
}

// withoutTests returns a restore's commands without their rule tests,
// setting *skipped when there were some.
func withoutTests(cmd RestoreState, vers []VersionTree, skipped *bool) (RestoreState, []VersionTree) {
	if len(cmd.ActiveTests) > 0 {
		*skipped = true
	}
	cmd.ActiveTests = nil
	if cmd.Draft != nil && len(cmd.Draft.Tests) > 0 {
		d := *cmd.Draft
		d.Tests, *skipped = nil, true
		cmd.Draft = &d
	}
	out := make([]VersionTree, len(vers))
	for i, v := range vers {
		if len(v.Tests) > 0 || v.TestsHash != "" {
			*skipped = true
		}
		v.Tests, v.TestsHash = nil, ""
		out[i] = v
	}
	return cmd, out
}
