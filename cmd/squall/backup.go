package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/internal/sleep"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/store"
)

// transferOptions are the flags of squall backup and restore.
type transferOptions struct {
	cf       clusterFlags
	progress bool
	attempts int
}

func (o *transferOptions) define(cmd *cobra.Command) {
	f := cmd.Flags()
	o.cf.define(f, "admin")
	f.BoolVar(&o.progress, "progress", false, "print the progress of the transfer on standard error even when it is not a terminal")
	f.IntVar(&o.attempts, "attempts", 6, "attempts before giving up while the masters have no leader or one is down (503, 502, refused connections)")
	documentEnv(f)
}

func newBackupCommand() *cobra.Command {
	var (
		o      transferOptions
		output string
	)
	cmd := &cobra.Command{
		Use:   "backup -o FILE --master URL[,URL...] --token-file F",
		Short: "Save the masters' state (trees, draft, findings, versions) to a backup file",
		Long: `Backup downloads the backup file of the replicated state (GET /squall/v1/backup:
the active tree, the draft, the findings and the tree versions, as the
leader has them) into
--output. The file is written beside it first and renamed into place only
once it is complete and reads back as a valid backup, so an interrupted
backup never leaves a truncated FILE.

While the masters elect a leader or one of them is down (503 NO_LEADER,
LEADER_UNAVAILABLE, LEADER_LOST, NOT_READY, 502, a refused connection) it
tries again, up to --attempts times, with a growing pause (0.2 s doubling up
to 5 s, or the answer's Retry-After), going round the --master URLs. Progress
goes to standard error when it is a terminal, or with --progress.

The token (--token-file) needs admin on the root. Passwords of findings are
written as the masters store them: encrypted with --findings-key, otherwise
in clear; the file is created readable by its owner only.`,
		Example: `  squall backup -o squall-backup.json --master http://127.0.0.1:8080 --token-file ops.token
  squall backup -o /var/backups/squall-$(date +%F).json --master http://m1:8080,http://m2:8080,http://m3:8080 --token-file ops.token`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return errors.New("no output file: give -o FILE")
			}
			c, err := o.cf.client()
			if err != nil {
				return err
			}
			t := newTransfer(c, o, cmd.ErrOrStderr())
			sum, size, err := t.backup(cmd.Context(), output)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup %s: %d bytes, state index %d, format %d, %d findings, %d versions, draft %s\n",
				output, size, sum.Index, sum.Format, sum.Findings, sum.Versions, yesNo(sum.Draft))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "the backup file to write (required)")
	o.define(cmd)
	return cmd
}

func newRestoreCommand() *cobra.Command {
	var o transferOptions
	cmd := &cobra.Command{
		Use:   "restore FILE --master URL[,URL...] --token-file F",
		Short: "Replace the masters' state with a backup file's",
		Long: `Restore reads FILE through first, as the masters will (format, trees,
findings): a file that is not a complete, valid backup is refused with the
reason and nothing is sent. Then it sends it (POST /squall/v1/restore), which
replaces the active tree, the draft and, for a backup with findings and
versions, every finding and version. The masters check the file again before they change anything.

While the masters elect a leader or one of them is down it tries again, as
squall backup does (--attempts); a restore sent again sets the same state.
Progress goes to standard error when it is a terminal, or with --progress.

The token (--token-file) needs admin on the root. Restore a backup with
findings into masters started with the same --findings-key as the ones that
made it (docs/operations.md, "Backup and restore").`,
		Example: `  squall restore squall-backup.json --master http://127.0.0.1:8080 --token-file ops.token
  squall restore /var/backups/squall-2026-11-28.json --master http://m1:8080,http://m2:8080 --token-file ops.token --progress`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := checkBackupFile(args[0])
			if err != nil {
				return err
			}
			c, err := o.cf.client()
			if err != nil {
				return err
			}
			t := newTransfer(c, o, cmd.ErrOrStderr())
			res, err := t.restore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s (format %d, state index %d when taken): new state index %d, %d findings, %d duplicates left out, %d versions\n",
				args[0], sum.Format, sum.Index, res.Index, res.Findings, res.Duplicates, res.Versions)
			if res.VersionsSkipped {
				fmt.Fprintln(cmd.OutOrStdout(), "the versions of the file were left out: a master of the cluster runs a release without versions (feature level below 3)")
			}
			if res.IDsSkipped {
				fmt.Fprintln(cmd.OutOrStdout(), "the ids of tools and tenants of the file were left out: a master of the cluster runs a release without them (feature level below 6); the cluster numbers them once every master runs one")
			}
			if res.TestsSkipped {
				fmt.Fprintln(cmd.OutOrStdout(), "the rule tests of the file were left out: a master of the cluster runs a release without them (feature level below 5)")
			}
			return nil
		},
	}
	o.define(cmd)
	return cmd
}

// checkBackupFile reads the backup file at path through
// (store.CheckBackup).
func checkBackupFile(path string) (*store.BackupSummary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("backup file: %w", err)
	}
	defer f.Close()
	sum, err := store.CheckBackup(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid backup file, nothing was restored: %w", path, err)
	}
	return sum, nil
}

// transfer is one backup or restore: the masters, the retries and the
// progress.
type transfer struct {
	c        *clusterClient
	attempts int
	progress io.Writer // nil: no progress
	terminal bool
	// sleep waits between attempts (a test may shorten it).
	sleep func(ctx context.Context, d time.Duration) error
}

func newTransfer(c *clusterClient, o transferOptions, stderr io.Writer) *transfer {
	t := &transfer{c: c, attempts: max(o.attempts, 1), sleep: sleepCtx}
	t.terminal = isTerminal(stderr)
	if o.progress || t.terminal {
		t.progress = stderr
	}
	return t
}

// sleepCtx waits d, or until ctx ends: then it returns ctx's error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if !sleep.For(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// retry runs attempt against the masters in turn until it succeeds, fails
// for good, or the attempts are used up. attempt returns retry true for
// an error another attempt may not get.
func (t *transfer) retry(ctx context.Context, what string, attempt func(base string) (retry bool, err error)) error {
	backoff := 200 * time.Millisecond
	var last error
	for i := range t.attempts {
		base := t.c.masters[i%len(t.c.masters)]
		retry, err := attempt(base)
		if err == nil {
			return nil
		}
		last = fmt.Errorf("%s via %s: %w", what, base, err)
		if !retry || ctx.Err() != nil {
			return last
		}
		if i == t.attempts-1 {
			break
		}
		wait := backoff
		var ae *answerError
		if errors.As(err, &ae) {
			if s, err := strconv.Atoi(ae.RetryAfter); err == nil && s > 0 {
				wait = min(time.Duration(s)*time.Second, 5*time.Second)
			}
		}
		if t.progress != nil {
			fmt.Fprintf(t.progress, "%s: %v; trying again in %s (attempt %d of %d)\n", what, last, wait, i+2, t.attempts)
		}
		if err := t.sleep(ctx, wait); err != nil {
			return last
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return fmt.Errorf("%w (gave up after %d attempts)", last, t.attempts)
}

// retryable reports an error another attempt may not get: an answer that
// says so (answerError.retryable), or no answer at all (the connection
// failed or broke).
func retryable(err error) bool {
	var ae *answerError
	if errors.As(err, &ae) {
		return ae.retryable()
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// backup downloads the backup into path (through a temporary file
// beside it).
func (t *transfer) backup(ctx context.Context, path string) (*store.BackupSummary, int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return nil, 0, fmt.Errorf("-o: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var size int64
	err = t.retry(ctx, "backup", func(base string) (bool, error) {
		if err := tmp.Truncate(0); err != nil {
			return false, err
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
		resp, err := t.c.request(ctx, http.MethodGet, base, "/squall/v1/backup", nil, nil)
		if err != nil {
			return retryable(err), err
		}
		defer resp.Body.Close()
		p := t.newProgress("backup", resp.ContentLength)
		n, err := io.Copy(tmp, io.TeeReader(resp.Body, p))
		p.done()
		if err != nil {
			// The answer broke off (its master failed): a new attempt
			// starts over.
			return ctx.Err() == nil, fmt.Errorf("download cut short after %d bytes: %w", n, err)
		}
		size = n
		return false, nil
	})
	if err != nil {
		return nil, 0, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, 0, fmt.Errorf("-o: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	sum, err := store.CheckBackup(tmp)
	if err != nil {
		return nil, 0, fmt.Errorf("the downloaded backup does not read back, %s not written: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, 0, fmt.Errorf("-o: %w", err)
	}
	return sum, size, nil
}

// restore sends the backup file at path.
func (t *transfer) restore(ctx context.Context, path string) (*master.RestoreResult, error) {
	var res master.RestoreResult
	err := t.retry(ctx, "restore", func(base string) (bool, error) {
		f, err := os.Open(path)
		if err != nil {
			return false, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return false, err
		}
		p := t.newProgress("restore", st.Size())
		body := io.TeeReader(f, p)
		resp, err := t.c.request(ctx, http.MethodPost, base, "/squall/v1/restore", io.NopCloser(body),
			http.Header{"Content-Type": {"application/json"}})
		p.done()
		if err != nil {
			return retryable(err), err
		}
		defer resp.Body.Close()
		if err := decodeJSONBody(resp.Body, &res); err != nil {
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// progress reports the bytes of a transfer at most once a second, and
// once more when it ends.
type progress struct {
	t     *transfer
	what  string
	total int64
	mu    sync.Mutex
	n     int64
	start time.Time
	last  time.Time
}

func (t *transfer) newProgress(what string, total int64) *progress {
	now := time.Now()
	return &progress{t: t, what: what, total: total, start: now, last: now}
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(len(b))
	if now := time.Now(); now.Sub(p.last) >= time.Second {
		p.last = now
		p.print(false)
	}
	return len(b), nil
}

// done prints the last line: the whole transfer.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.print(true)
}

func (p *progress) print(final bool) {
	w := p.t.progress
	if w == nil {
		return
	}
	line := fmt.Sprintf("%s: %s", p.what, mib(p.n))
	if p.total > 0 {
		line += fmt.Sprintf(" of %s (%d%%)", mib(p.total), p.n*100/p.total)
	}
	if s := time.Since(p.start).Seconds(); s > 0 {
		line += fmt.Sprintf(", %s/s", mib(int64(float64(p.n)/s)))
	}
	switch {
	case p.t.terminal && final:
		fmt.Fprintf(w, "\r%s\n", line)
	case p.t.terminal:
		fmt.Fprintf(w, "\r%s", line)
	default:
		fmt.Fprintln(w, line)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
