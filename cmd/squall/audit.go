package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/audit"
	"github.com/squallhq/squall/master/store"
)

// newAuditCommand is the "squall audit" group: checks of the masters'
// audit log.
func newAuditCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the masters' audit log",
		Long: `The masters record every change of their replicated state (drafts, deploys,
rollbacks, findings' triage, members, restores) in an audit log kept in the
state itself: who (user, authorization, request id), when (the leader's clock),
what, and the result. Each record carries the SHA-256 of its content and of the
record before it, so that altering, removing or inserting a record breaks the
chain. GET /squall/v1/audit lists the records (admin on the root).`,
		Example: `  squall audit verify --master http://127.0.0.1:8080 --token-file admin.token
  squall audit verify --backup squall-backup.json
  squall audit verify --state /var/lib/squall/fsm.db`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAuditVerifyCommand())
	return cmd
}

func newAuditVerifyCommand() *cobra.Command {
	var tc treeClient
	var backup, stateFile string
	cmd := &cobra.Command{
		Use:   "verify (--master URL --token-file F | --backup FILE | --state FILE)",
		Short: "Check the hash chain of the audit log",
		Long: `Verify reads the audit log from a master (--master with an admin token,
--token-file), from a backup file (--backup, written by GET /squall/v1/backup)
or from a master's state file (--state, its data dir's fsm.db or a copy, not
open in a running master), and checks each record's hash and its link to the
record before. It prints the number of records and the hash of the newest
(compare it with another node's, or a copy kept elsewhere: the newest record
is vouched for only by such a copy), or the first broken link, and exits with
1 then. The oldest record kept is taken as it is: the records before it were
pruned (--audit-keep, --audit-max-age of squall master).`,
		Example: `  squall audit verify --master http://127.0.0.1:8080 --token-file admin.token
  squall audit verify --backup squall-backup.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sources := 0
			for _, s := range []string{tc.masterURL, backup, stateFile} {
				if s != "" {
					sources++
				}
			}
			if sources != 1 {
				return badInput(errors.New("name one source: --master (with --token-file), --backup or --state"))
			}
			var recs []audit.Record
			var err error
			switch {
			case backup != "":
				recs, err = readBackupAudit(backup)
			case stateFile != "":
				if recs, err = store.ReadAuditFile(stateFile); err != nil {
					err = badInput(fmt.Errorf("--state: %w", err))
				}
			default:
				recs, err = fetchAudit(&tc)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(recs) == 0 {
				_, err := fmt.Fprintln(out, "no audit records (they are recorded once every master runs a release with the audit log)")
				return err
			}
			if err := audit.Verify(recs); err != nil {
				return err
			}
			first, last := recs[0], recs[len(recs)-1]
			_, err = fmt.Fprintf(out, "audit chain verified: %d records, %d to %d; newest %s\n", len(recs), first.Seq, last.Seq, last.Hash)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tc.masterURL, "master", "", "base URL of a master (e.g. http://127.0.0.1:8080)")
	f.StringVar(&tc.tokenFile, "token-file", "", "file holding an API token with admin on the root")
	f.StringVar(&backup, "backup", "", "backup file to read the audit log from")
	f.StringVar(&stateFile, "state", "", "a master's state file (fsm.db) to read the audit log from")
	return cmd
}

// readBackupAudit reads the audit records of the backup file at path.
func readBackupAudit(path string) ([]audit.Record, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, badInput(fmt.Errorf("--backup: %w", err))
	}
	defer fh.Close()
	recs, err := store.ReadBackupAudit(fh)
	if err != nil {
		return nil, badInput(fmt.Errorf("--backup %s: %w", path, err))
	}
	return recs, nil
}

// fetchAudit reads every record of a master's audit log, page by page,
// and returns them oldest first.
func fetchAudit(tc *treeClient) ([]audit.Record, error) {
	c, err := tc.client()
	if err != nil {
		return nil, badInput(err)
	}
	var recs []audit.Record
	var before uint64
	for {
		q := url.Values{"limit": {"1000"}}
		if before > 0 {
			q.Set("before", strconv.FormatUint(before, 10))
		}
		var page api.AuditList
		if err := c.do(http.MethodGet, api.AuditPath+"?"+q.Encode(), "", nil, &page); err != nil {
			return nil, fmt.Errorf("read the audit log: %w", err)
		}
		recs = append(recs, page.Records...)
		if page.NextBefore == 0 || page.NextBefore >= before && before != 0 {
			break
		}
		before = page.NextBefore
	}
	slices.Reverse(recs)
	return recs, nil
}
