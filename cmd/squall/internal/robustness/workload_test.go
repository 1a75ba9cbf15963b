package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// headerResent marks the answer to a request a master sent again after a
// leader failed while it had it (master.HeaderResent; the suite talks to
// the masters as any client does, over HTTP only).
const headerResent = "X-Squall-Resent"

// API paths the workload uses (docs/findings.md, docs/api.md).
const (
	findingsInsert = "/intel/api/sdk/v0/findings/credentials"
	findingPath    = "/intel/api/sdk/v0/finding/"
	findingsList   = "/intel/api/sdk/v0/findings/credential"
	configPrefix   = "/api/v2_beta/config"
	// configNode is the draft node whose description is the config
	// register.
	configNode = "robust"
)

// Workload runs concurrent clients against a Cluster and records what
// they see in a History.
type Workload struct {
	c       *Cluster
	h       *History
	draftID string
	timeout time.Duration
	hc      *http.Client

	mu sync.Mutex
	// hot are the most recently acknowledged findings, which clients get
	// and patch (shared, so that clients contend on them); acked are
	// every acknowledged insert's uid.
	hot   []string
	acked map[string]bool
}

// NewWorkload returns a workload against c recording into h; each
// request has the deadline timeout. Call SetupConfig before Run.
func NewWorkload(c *Cluster, h *History, timeout time.Duration) *Workload {
	return &Workload{c: c, h: h, timeout: timeout, acked: make(map[string]bool),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

// SetupConfig prepares the config register through node via: a draft
// holding a Filter node named configNode with description ConfigInit,
// deployed.
func (w *Workload) SetupConfig(ctx context.Context, via *Node) error {
	status, body, err := w.do(ctx, via, http.MethodPost, configPrefix+"/drafts/all", "")
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("create draft: %d %s %v", status, body, err)
	}
	var d struct{ ID string }
	if err := json.Unmarshal(body, &d); err != nil {
		return fmt.Errorf("create draft: %w", err)
	}
	w.draftID = d.ID
	status, body, err = w.do(ctx, via, http.MethodPost, configPrefix+"/draft/tree/details/all/"+d.ID+"/root", nodeBody(ConfigInit))
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("create node: %d %s %v", status, body, err)
	}
	status, body, err = w.do(ctx, via, http.MethodPost, configPrefix+"/drafts/all/"+d.ID+"/deploy", "")
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("deploy: %d %s %v", status, body, err)
	}
	return nil
}

// nodeBody is the configuration of the register node with description v.
func nodeBody(v string) string {
	b, _ := json.Marshal(map[string]any{
		"type": "Filter", "name": configNode, "description": v, "active": true,
		"filter": map[string]any{"type": "equals", "first": "${event.metadata.tenant_id}", "second": "robust"},
	})
	return string(b)
}

// Acked returns the uids of every acknowledged insert.
func (w *Workload) Acked() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.acked))
	for k := range w.acked {
		out[k] = true
	}
	return out
}

// do sends one request with the workload's token and returns the status
// and body.
func (w *Workload) do(ctx context.Context, n *Node, method, path, body string) (int, []byte, error) {
	status, b, _, err := w.doResent(ctx, n, method, path, body)
	return status, b, err
}

// doResent is do that also reports whether the answer says the request
// was sent again after a leader failed while it had it
// (master.HeaderResent).
func (w *Workload) doResent(ctx context.Context, n *Node, method, path, body string) (int, []byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.URL()+path, rd)
	if err != nil {
		return 0, nil, false, err
	}
	req.Header.Set("Authorization", "Bearer "+w.c.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return 0, nil, false, err
	}
	defer resp.Body.Close()
	resent := resp.Header.Get(headerResent) == "true"
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, resent, err
	}
	return resp.StatusCode, b, resent, nil
}

// Run runs clients until ctx ends, each with its own random source
// seeded from seed.
func (w *Workload) Run(ctx context.Context, clients int, seed int64) {
	var wg sync.WaitGroup
	for i := range clients {
		rng := mrand.New(mrand.NewPCG(uint64(seed), uint64(i)))
		wg.Go(func() { w.client(ctx, i, rng) })
	}
	wg.Wait()
}

// client is one client's loop: a random operation on a random live node,
// one at a time.
func (w *Workload) client(ctx context.Context, id int, rng *mrand.Rand) {
	seq := 0
	for ctx.Err() == nil {
		up := w.c.Up()
		if len(up) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		n := up[rng.IntN(len(up))]
		seq++
		w.mu.Lock()
		var uid string
		if len(w.hot) > 0 {
			uid = w.hot[rng.IntN(len(w.hot))]
		}
		w.mu.Unlock()
		r := rng.Float64()
		var op Op
		switch {
		case uid == "" || r < 0.25:
			op = w.insert(ctx, n, id, seq)
		case r < 0.45:
			op = w.op(ctx, n, Op{Client: id, Kind: OpGet, Key: uid}, http.MethodGet, findingPath+uid, "")
		case r < 0.70:
			v := fmt.Sprintf("c%d-%d", id, seq)
			op = w.op(ctx, n, Op{Client: id, Kind: OpPatch, Key: uid, Value: v}, http.MethodPatch, findingPath+uid, `{"ticket":"`+v+`"}`)
		case r < 0.76:
			v := fmt.Sprintf("c%d-%d", id, seq)
			op = w.op(ctx, n, Op{Client: id, Kind: OpEdit, Key: "config", Value: v}, http.MethodPut,
				configPrefix+"/draft/tree/details/all/"+w.draftID+"/root,"+configNode, nodeBody(v))
		case r < 0.84:
			op = w.op(ctx, n, Op{Client: id, Kind: OpReadDraft, Key: "config"}, http.MethodGet,
				configPrefix+"/draft/tree/details/all/"+w.draftID+"/root,"+configNode, "")
		case r < 0.87:
			op = w.op(ctx, n, Op{Client: id, Kind: OpDeploy, Key: "config"}, http.MethodPost,
				configPrefix+"/drafts/all/"+w.draftID+"/deploy", "")
		default:
			op = w.op(ctx, n, Op{Client: id, Kind: OpReadActive, Key: "config"}, http.MethodGet,
				configPrefix+"/active/tree/details/all/root,"+configNode, "")
		}
		if !op.OK() {
			// Like a client honouring Retry-After, if briefly: a client
			// that retries at once only multiplies the errors (and the
			// unknown outcomes the checker must place).
			sleep(ctx, errorBackoff)
		}
	}
}

// errorBackoff is how long a client pauses after an error.
const errorBackoff = 100 * time.Millisecond

// insert inserts a new unique finding and, once acknowledged, makes it
// hot.
func (w *Workload) insert(ctx context.Context, n *Node, id, seq int) Op {
	body := fmt.Sprintf(`{"monitored_domain_id":1,"tool_code":"robust","resource_url":"https://robust.example/c%d","username":"u-%d-%d","password":"p"}`, id, id, seq)
	op := w.op(ctx, n, Op{Client: id, Kind: OpInsert}, http.MethodPut, findingsInsert, body)
	if !op.OK() || op.UID == "" {
		return op
	}
	w.mu.Lock()
	w.acked[op.UID] = true
	w.hot = append(w.hot, op.UID)
	if len(w.hot) > 4 {
		w.hot = w.hot[1:]
	}
	w.mu.Unlock()
	return op
}

// op runs one operation and records it, unless ctx ended before it
// had an answer (the run is over; the operation may still have taken
// effect, but nothing after it reads it). It returns the recorded op.
func (w *Workload) op(ctx context.Context, n *Node, op Op, method, path, body string) Op {
	op.Node = n.ID
	op.Call = w.h.Now()
	status, b, resent, err := w.doResent(ctx, n, method, path, body)
	op.Return = w.h.Now()
	op.Status = status
	op.Resent = resent
	if err != nil && status == 0 {
		op.Err = ErrorKind(err)
		if ctx.Err() != nil {
			op.Err = "canceled"
		}
	} else if err != nil {
		op.Err = "body: " + ErrorKind(err)
	}
	definite := err == nil && (status < 500 || status == http.StatusNotImplemented)
	if !op.Write() && !(err == nil && (status == http.StatusOK || status == http.StatusNotFound)) {
		definite = false
	}
	if err == nil && status >= 400 {
		var e struct{ Code, Message string }
		_ = json.Unmarshal(b, &e)
		op.Code, op.Msg = e.Code, e.Message
	}
	if definite && op.OK() {
		if err := decodeResult(&op, b); err != nil {
			op.Err = "decode: " + err.Error()
			definite = false
			op.Status = 0
		}
	}
	if !definite {
		op.Return = -1
	}
	if op.Key == "" && op.UID != "" {
		op.Key = op.UID
	}
	if op.Err == "canceled" && !op.Write() {
		return op
	}
	w.h.Add(op)
	return op
}

// decodeResult reads what a successful answer says into op.
func decodeResult(op *Op, b []byte) error {
	switch op.Kind {
	case OpInsert:
		var r struct{ UID string }
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		if r.UID == "" {
			return errors.New("no uid")
		}
		op.UID = r.UID
	case OpGet, OpPatch:
		var r struct {
			Findings []struct {
				Ticket *string `json:"ticket"`
			} `json:"findings"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		if len(r.Findings) != 1 {
			return fmt.Errorf("%d findings", len(r.Findings))
		}
		if t := r.Findings[0].Ticket; t != nil {
			op.Read = *t
		}
	case OpReadDraft, OpReadActive:
		var r struct {
			Description *string `json:"description"`
		}
		d := json.NewDecoder(bytes.NewReader(b))
		if err := d.Decode(&r); err != nil {
			return err
		}
		if r.Description == nil {
			return errors.New("no description")
		}
		op.Read = *r.Description
	}
	return nil
}

// ReadBack lists every finding on node n (the findings API's list, all
// pages) and returns their uids. An error answer (an election) restarts
// the walk, until ctx ends.
func (w *Workload) ReadBack(ctx context.Context, n *Node) (map[string]bool, error) {
	var seen map[string]bool
	err := poll(ctx, func() error {
		var err error
		seen, err = w.readBack(ctx, n)
		return err
	})
	return seen, err
}

func (w *Workload) readBack(ctx context.Context, n *Node) (map[string]bool, error) {
	seen := make(map[string]bool)
	for page := 1; ; page++ {
		var r struct {
			Total    int `json:"total"`
			Findings []struct {
				UID string `json:"uid"`
			} `json:"findings"`
		}
		if err := w.c.get(ctx, n, fmt.Sprintf("%s?limit=1000&page=%d", findingsList, page), &r); err != nil {
			return nil, err
		}
		for _, f := range r.Findings {
			seen[f.UID] = true
		}
		if len(r.Findings) == 0 || len(seen) >= r.Total {
			return seen, nil
		}
	}
}
