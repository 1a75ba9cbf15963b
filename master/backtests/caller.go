package backtests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// caller sends JSON requests to the masters, from the one that last
// answered.
type caller struct {
	urls   []string
	token  string
	client *http.Client

	mu  sync.Mutex
	cur int // the master tried first
}

// call sends a JSON request (in nil: no body) to the masters, from the one
// that last answered, and decodes a 200 or 201 answer into out. It
// returns the status of the last answer (0 when none came) and an error
// for any answer but 2xx. An answer of 4xx ends the tries: another master
// would say the same.
func (c *caller) call(ctx context.Context, timeout time.Duration, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, err
		}
	}
	c.mu.Lock()
	first := c.cur
	c.mu.Unlock()
	n := len(c.urls)
	var errs []string
	for k := range n {
		i := (first + k) % n
		status, err := c.send(ctx, timeout, method, c.urls[i]+path, body, out)
		if err == nil || (status >= 400 && status < 500) {
			c.mu.Lock()
			c.cur = i
			c.mu.Unlock()
			return status, err
		}
		if ctx.Err() != nil {
			return status, ctx.Err()
		}
		errs = append(errs, c.urls[i]+": "+err.Error())
	}
	return 0, errors.New(strings.Join(errs, "; "))
}

// send sends one request.
func (c *caller) send(ctx context.Context, timeout time.Duration, method, u string, body []byte, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated) && out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, u, err)
		}
		return resp.StatusCode, nil
	}
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, answerError(resp)
}

// AnswerError is an error answer of the masters.
type AnswerError struct {
	Status  int
	Code    string            `json:"code"`
	Params  map[string]string `json:"params"`
	Message string            `json:"message"`
}

func (e *AnswerError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("answered %d %s", e.Status, e.Message)
	}
	return fmt.Sprintf("answered %d %s: %s", e.Status, e.Code, e.Message)
}

// answerError reads an error answer.
func answerError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	e := &AnswerError{Status: resp.StatusCode}
	if json.Unmarshal(b, e) != nil || e.Code == "" {
		e.Code, e.Message = "", http.StatusText(resp.StatusCode)
	}
	return e
}
