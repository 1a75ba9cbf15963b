package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/store"
)

// Exit codes of squall status.
const (
	statusExitUnhealthy = 2
)

func newStatusCommand() *cobra.Command {
	var (
		cf      clusterFlags
		auth    string
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status --master URL[,URL...] --token-file F [--json]",
		Short: "Show the cluster's members, active tree, draft and fleet; exit 2 when unhealthy",
		Long: `Status asks every --master for its view of the cluster (GET /squall/v1/cluster),
and one of them for the fleet list, the draft and the active tree's counts,
and prints:

  - the members: id, raft state, voter, leader, term, applied index, feature
    level, health (as the leader's fleet list saw it) and HTTP address;
  - the active tree: its index, its version (number, deploy time, author)
    and its numbers of filters, iterators and rules (read with the
    authorization --auth);
  - the draft, if any: id, owner, last change;
  - the fleet: the engines and satellites with their site, health, consumer
    lag, spool depth and last heartbeat.

The token (--token-file) needs view on the root. With --json the same report
is printed as one JSON object.

Exit codes: 0 the cluster has a leader and every member and every --master
answered; 2 it has no leader, or a member or a --master is unreachable (the
report is printed, the problems listed last and on standard error); 1 the
command could not run (flags, token file, the token refused by every master).
A cron check: squall status --master URL --token-file F >/dev/null || alert.`,
		Example: `  squall status --master http://127.0.0.1:8080 --token-file ops.token
  squall status --master http://m1:8080,http://m2:8080,http://m3:8080 --token-file ops.token --json`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			rep, err := gatherStatus(ctx, c, auth)
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printStatus(cmd.OutOrStdout(), rep)
			}
			if !rep.Healthy {
				return &exitCodeError{code: statusExitUnhealthy, err: fmt.Errorf("status: unhealthy: %s", strings.Join(rep.Problems, "; "))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	cf.define(f, "view")
	f.StringVar(&auth, "auth", "all", "authorization of the token the active tree's counts are read with")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the masters' answers")
	documentEnv(f)
	return cmd
}

// statusReport is what squall status prints.
type statusReport struct {
	// Healthy: a leader, and every member and every --master answered.
	Healthy bool `json:"healthy"`
	// Problems are why it is not healthy.
	Problems []string `json:"problems"`
	// Errors are the parts of the report that could not be read (they do
	// not make the cluster unhealthy by themselves).
	Errors       []string       `json:"errors"`
	LeaderID     string         `json:"leader_id"`
	Term         uint64         `json:"term"`
	FeatureLevel int            `json:"feature_level"`
	Members      []statusMember `json:"members"`
	Active       *statusActive  `json:"active"`
	// Draft is null when there is none (or it could not be read: see
	// Errors).
	Draft *master.DraftInfo `json:"draft"`
	// Fleet lists the engines and satellites.
	Fleet []fleet.Member `json:"fleet"`
}

// statusMember is one master.
type statusMember struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
	// State is the member's raft state as it answered itself ("" when
	// nobody could ask it).
	State  string  `json:"state"`
	Voter  bool    `json:"voter"`
	Leader bool    `json:"leader"`
	Term   *uint64 `json:"term"`
	// AppliedIndex is the last log index the member applied.
	AppliedIndex *uint64 `json:"applied_index"`
	FeatureLevel int     `json:"feature_level"`
	// Health is ready, not_ready, unreachable, or "" when unknown (no
	// fleet list: it needs a leader).
	Health  string   `json:"health"`
	Reasons []string `json:"reasons"`
	Version string   `json:"version"`
}

// statusActive is the active tree.
type statusActive struct {
	Index uint64 `json:"index"`
	// Version is the active tree's version (number, deploy time, author),
	// when the masters keep versions and the newest is the active tree.
	Version   *store.Version `json:"version"`
	Filters   *int           `json:"filters"`
	Iterators *int           `json:"iterators"`
	Rules     *int           `json:"rules"`
}

// clusterAnswer is one --master's answer to GET /squall/v1/cluster.
type clusterAnswer struct {
	url  string
	info *master.ClusterInfo
	err  error
}

// gatherStatus builds the report. An error is returned only when the
// command cannot run: every master refused the token.
func gatherStatus(ctx context.Context, c *clusterClient, authName string) (*statusReport, error) {
	answers := make([]clusterAnswer, len(c.masters))
	var wg sync.WaitGroup
	for i, m := range c.masters {
		wg.Go(func() {
			var info master.ClusterInfo
			err := c.getJSON(ctx, m, "/squall/v1/cluster", &info)
			answers[i] = clusterAnswer{url: m, err: err}
			if err == nil {
				answers[i].info = &info
			}
		})
	}
	wg.Wait()

	rep := &statusReport{Problems: []string{}, Errors: []string{}, Members: []statusMember{}, Fleet: []fleet.Member{}}
	var ref *clusterAnswer
	refused := 0
	byID := map[string]*master.ClusterInfo{}
	for i := range answers {
		a := &answers[i]
		if a.err != nil {
			var ae *answerError
			if errors.As(a.err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden) {
				refused++
			}
			rep.Problems = append(rep.Problems, fmt.Sprintf("master %s unreachable: %v", a.url, a.err))
			continue
		}
		byID[a.info.NodeID] = a.info
		switch {
		case ref == nil,
			a.info.State == "Leader" && ref.info.State != "Leader",
			ref.info.LeaderID == "" && a.info.LeaderID != "":
			ref = a
		}
	}
	if refused == len(answers) {
		return nil, fmt.Errorf("status: every master refused the token: %w", answers[0].err)
	}
	if ref == nil {
		rep.Problems = append(rep.Problems, "no master answered")
		return rep, nil
	}
	info := ref.info
	rep.LeaderID, rep.Term, rep.FeatureLevel = info.LeaderID, info.Term, info.FeatureLevel
	if info.LeaderID == "" {
		rep.Problems = append(rep.Problems, "no leader: "+info.NodeID+" knows none (an election, or no quorum)")
	}
	for _, m := range info.Members {
		sm := statusMember{ID: m.ID, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, Voter: m.Suffrage == "voter",
			Leader: m.Leader, FeatureLevel: m.FeatureLevel, Reasons: []string{}}
		if own := byID[m.ID]; own != nil {
			sm.State, sm.Term, sm.AppliedIndex, sm.Version = own.State, ptr(own.Term), ptr(own.AppliedIndex), own.Version
		}
		rep.Members = append(rep.Members, sm)
	}

	rep.Active = &statusActive{Index: info.ActiveIndex}
	if info.LeaderID == "" {
		// The rest is served by the leader: each request would wait
		// for one in vain.
		rep.Errors = append(rep.Errors, "fleet list, draft and active tree: not read without a leader")
		return rep, nil
	}
	// The fleet list, the draft and the active tree's counts: any master
	// answers them (a follower forwards to the leader).
	var list struct {
		Members []fleet.Member `json:"members"`
	}
	if err := c.getJSON(ctx, ref.url, "/squall/v1/fleet", &list); err != nil {
		rep.Errors = append(rep.Errors, "fleet list: "+err.Error())
	}
	for _, fm := range list.Members {
		if fm.Role != "master" {
			rep.Fleet = append(rep.Fleet, fm)
			continue
		}
		for i := range rep.Members {
			sm := &rep.Members[i]
			if sm.ID != fm.ID {
				continue
			}
			sm.Health = fm.Health
			if fm.Reasons != nil {
				sm.Reasons = fm.Reasons
			}
			if sm.State == "" {
				sm.State, sm.Term, sm.AppliedIndex, sm.Version = fm.State, fm.Term, fm.AppliedIndex, fm.Version
			}
		}
	}
	for _, sm := range rep.Members {
		if sm.Health == fleet.HealthUnreachable {
			rep.Problems = append(rep.Problems, fmt.Sprintf("member %s unreachable: %s", sm.ID, strings.Join(sm.Reasons, "; ")))
		}
	}

	var draft *master.DraftInfo
	if err := c.getJSON(ctx, ref.url, "/squall/v1/draft", &draft); err != nil {
		rep.Errors = append(rep.Errors, "draft: "+err.Error())
	}
	rep.Draft = draft

	var counts struct {
		Filters   int `json:"filters_count"`
		Iterators int `json:"iterators_count"`
		Rules     int `json:"rules_count"`
	}
	if err := c.getJSON(ctx, ref.url, "/api/v2_beta/config/active/tree/info/"+url.PathEscape(authName), &counts); err != nil {
		rep.Errors = append(rep.Errors, "active tree (--auth "+authName+"): "+err.Error())
	} else {
		rep.Active.Filters, rep.Active.Iterators, rep.Active.Rules = &counts.Filters, &counts.Iterators, &counts.Rules
	}
	var versions struct {
		Versions []store.Version `json:"versions"`
	}
	if err := c.getJSON(ctx, ref.url, "/squall/v1/tree/versions?limit=1&auth="+url.QueryEscape(authName), &versions); err != nil {
		var ae *answerError
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound { // 404: masters without versions
			rep.Errors = append(rep.Errors, "active tree's version: "+err.Error())
		}
	} else if len(versions.Versions) > 0 && versions.Versions[0].Index == info.ActiveIndex {
		rep.Active.Version = &versions.Versions[0]
	}
	rep.Healthy = len(rep.Problems) == 0
	return rep, nil
}

func ptr[T any](v T) *T { return &v }

// printStatus writes the report as tables.
func printStatus(out io.Writer, rep *statusReport) {
	leader := rep.LeaderID
	if leader == "" {
		leader = "none"
	}
	fmt.Fprintf(out, "Cluster: leader %s, term %d, feature level %d\n\n", leader, rep.Term, rep.FeatureLevel)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTATE\tVOTER\tLEADER\tTERM\tAPPLIED\tLEVEL\tHEALTH\tHTTP")
	for _, m := range rep.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, orDash(m.State), yesNo(m.Voter), yesNo(m.Leader),
			numOrDash(m.Term), numOrDash(m.AppliedIndex), m.FeatureLevel, orDash(health(m.Health, m.Reasons)), orDash(m.HTTPAddr))
	}
	_ = tw.Flush()

	if a := rep.Active; a != nil {
		fmt.Fprintf(out, "\nActive tree: index %d", a.Index)
		if v := a.Version; v != nil {
			fmt.Fprintf(out, ", version %d deployed %s by %s", v.Number, time.UnixMilli(v.TimeMS).UTC().Format(time.RFC3339), orDash(v.Author))
		}
		if a.Filters != nil {
			fmt.Fprintf(out, ", %d filters, %d iterators, %d rules", *a.Filters, *a.Iterators, *a.Rules)
		}
		fmt.Fprintln(out)
	}
	if d := rep.Draft; d != nil {
		fmt.Fprintf(out, "Draft: %s, owner %s, changed %s\n", d.ID, d.Owner, time.UnixMilli(d.UpdatedMS).UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(out, "Draft: none")
	}

	fmt.Fprintln(out)
	if len(rep.Fleet) == 0 {
		fmt.Fprintln(out, "Fleet: no engine or satellite reports")
	} else {
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FLEET\tROLE\tSITE\tHEALTH\tLAG\tSPOOL\tLAST SEEN")
		for _, m := range rep.Fleet {
			h := "ready"
			if !m.Ready {
				h = health("not_ready", m.Reasons)
			}
			if m.Stale {
				h = "stale"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Role, orDash(m.Site), h, numOrDash(m.ConsumerLag), numOrDash(m.SpoolDepth),
				time.UnixMilli(m.LastSeenMS).UTC().Format(time.RFC3339))
		}
		_ = tw.Flush()
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(out, "\nnot read: %s", e)
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintln(out)
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintln(out, "\nProblems:")
		for _, p := range rep.Problems {
			fmt.Fprintf(out, "  %s\n", p)
		}
	}
}

func health(h string, reasons []string) string {
	if h == "" || h == fleet.HealthReady || len(reasons) == 0 {
		return h
	}
	return h + " (" + strings.Join(reasons, "; ") + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func numOrDash[T int64 | uint64](p *T) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(int64(*p), 10)
}
