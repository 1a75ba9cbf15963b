package backtests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/squallhq/squall/internal/sleep"
	"github.com/squallhq/squall/master/fleet"
)

// Client is the operators' client of the backtests' routes.
type Client struct {
	caller
}

// NewClient returns a client of the masters at urls (base URLs) with
// token (edit on the root); httpClient nil is a plain client.
func NewClient(urls []string, token string, httpClient *http.Client) (*Client, error) {
	errs := fleet.CheckMasterURLs(urls)
	if token == "" {
		errs = append(errs, errors.New("no token"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("backtests client: %w", errors.Join(errs...))
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	us := make([]string, len(urls))
	for i, u := range urls {
		us[i] = strings.TrimRight(u, "/")
	}
	return &Client{caller{urls: us, token: token, client: httpClient}}, nil
}

// requestTimeout bounds one request of the client.
const requestTimeout = 30 * time.Second

// Start asks for a backtest.
func (c *Client) Start(ctx context.Context, req Request) (Backtest, error) {
	var b Backtest
	_, err := c.call(ctx, requestTimeout, http.MethodPost, Prefix, req, &b)
	return b, err
}

// Get returns a backtest with its result.
func (c *Client) Get(ctx context.Context, id string) (Backtest, error) {
	var b Backtest
	_, err := c.call(ctx, requestTimeout, http.MethodGet, Prefix+"/"+url.PathEscape(id), nil, &b)
	return b, err
}

// List returns the backtests, newest first.
func (c *Client) List(ctx context.Context) ([]Backtest, error) {
	var l List
	_, err := c.call(ctx, requestTimeout, http.MethodGet, Prefix, nil, &l)
	return l.Backtests, err
}

// Cancel cancels a backtest.
func (c *Client) Cancel(ctx context.Context, id string) (Backtest, error) {
	var b Backtest
	_, err := c.call(ctx, requestTimeout, http.MethodPost, Prefix+"/"+url.PathEscape(id)+"/cancel", nil, &b)
	return b, err
}

// Delete deletes a backtest.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.call(ctx, requestTimeout, http.MethodDelete, Prefix+"/"+url.PathEscape(id), nil, nil)
	return err
}

// Wait polls a backtest every interval until it is finished, calling
// progress (when not nil) with each state read, and returns it with its
// result. A failure of one poll is retried (a master may be changing
// leader) for up to a minute.
func (c *Client) Wait(ctx context.Context, id string, interval time.Duration, progress func(Backtest)) (Backtest, error) {
	var lastOK time.Time = time.Now()
	for {
		b, err := c.Get(ctx, id)
		switch {
		case err == nil:
			lastOK = time.Now()
			if progress != nil {
				progress(b)
			}
			if finished(b.State) {
				return b, nil
			}
		case ctx.Err() != nil:
			return Backtest{}, ctx.Err()
		case isStatus(err, http.StatusNotFound):
			return Backtest{}, fmt.Errorf("backtest %s: %w", id, err)
		case time.Since(lastOK) > time.Minute:
			return Backtest{}, fmt.Errorf("backtest %s: %w", id, err)
		}
		if !sleep.For(ctx, interval) {
			return Backtest{}, ctx.Err()
		}
	}
}

// Finished reports whether state is one a backtest ends in.
func Finished(state string) bool { return finished(state) }

// isStatus reports an answer of status.
func isStatus(err error, status int) bool {
	var ae *AnswerError
	return errors.As(err, &ae) && ae.Status == status
}

// cancelGrace bounds how long Run waits, once its context ended, for the
// cancelled backtest's partial result.
const cancelGrace = 15 * time.Second

// Run starts a backtest and waits for its end, polling every interval and
// calling progress with each state read. When ctx ends first, it cancels
// the backtest on the masters and returns what its engine counted so far
// (when it comes within 15s) with ctx's error. A backtest that failed is
// returned with an error saying why.
func (c *Client) Run(ctx context.Context, req Request, interval time.Duration, progress func(Backtest)) (Backtest, error) {
	bt, err := c.Start(ctx, req)
	if err != nil {
		return Backtest{}, err
	}
	if progress != nil {
		progress(bt)
	}
	done, err := c.Wait(ctx, bt.ID, interval, progress)
	if err != nil && ctx.Err() != nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
		defer cancel()
		if _, cerr := c.Cancel(gctx, bt.ID); cerr != nil && !isStatus(cerr, http.StatusConflict) {
			return Backtest{ID: bt.ID, State: StateRunning}, fmt.Errorf("%w; the backtest %s was not cancelled: %w", ctx.Err(), bt.ID, cerr)
		}
		if done, werr := c.Wait(gctx, bt.ID, interval, progress); werr == nil {
			return done, ctx.Err()
		}
		return Backtest{ID: bt.ID, State: StateCancelled}, ctx.Err()
	}
	if err != nil {
		return Backtest{ID: bt.ID}, err
	}
	if done.State == StateFailed {
		return done, fmt.Errorf("backtest %s failed: %s", done.ID, done.Error)
	}
	return done, nil
}
