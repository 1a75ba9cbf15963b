package intake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/squallhq/squall/satellite/dedupe"
	"github.com/squallhq/squall/webhooks"
)

// Deduper remembers the delivery ids of accepted calls; *dedupe.Store is
// one.
type Deduper interface {
	// Begin looks a delivery up; see [dedupe.Store.Begin].
	Begin(ctx context.Context, webhookID, deliveryID string, now time.Time) (*dedupe.Claim, error)
}

var _ Deduper = (*dedupe.Store)(nil)

// Error codes of the delivery settings.
const (
	CodeAddressNotAllowed = "ADDRESS_NOT_ALLOWED"
	CodeRateLimited       = "RATE_LIMITED"
	CodeNoDeliveryID      = "DELIVERY_ID_MISSING"
	CodeBadDeliveryID     = "INVALID_DELIVERY_ID"
)

// Reasons of the squall_intake_refused_total metric for the delivery
// settings and the size limit.
const (
	ReasonAddress    = "address"
	ReasonRate       = "rate"
	ReasonSize       = "size"
	ReasonDeliveryID = "delivery_id"
	// ReasonDuplicate counts repeats within a dedupe window: answered
	// 200 with the first event id, they make no event.
	ReasonDuplicate = "duplicate"
)

// HeaderDeduplicated is set to "true" on the answer to a repeated delivery.
const HeaderDeduplicated = "Squall-Deduplicated"

// checkAddress refuses a call whose client address is not in the
// webhook's allow_ips; it returns the client address (needed by per-client
// rate limits).
func (in *Intake) checkAddress(c *request, wh *webhooks.Webhook) (netip.Addr, error) {
	if len(wh.AllowIPs) == 0 && (wh.RateLimit == nil || !wh.RateLimit.PerClient) {
		return netip.Addr{}, nil
	}
	client := in.cfg.Clients.ClientOf(c.front.peer(), c.header)
	if !wh.Allows(client) {
		return client, &apiError{status: http.StatusForbidden, code: CodeAddressNotAllowed, reason: ReasonAddress,
			params: map[string]any{"address": client.String()}, message: "calls from this address are not allowed"}
	}
	return client, nil
}

// checkRate takes the call from the webhook's rate_limit buckets, or
// refuses it with 429 and Retry-After.
func (in *Intake) checkRate(wh *webhooks.Webhook, client netip.Addr, now time.Time) error {
	if wh.RateLimit == nil {
		return nil
	}
	ok, wait := in.cfg.Limits.Allow(wh.ID, *wh.RateLimit, client, now)
	if ok {
		return nil
	}
	wait = max(wait, time.Second)
	return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, reason: ReasonRate, retryAfter: wait,
		params:  map[string]any{"rate": wh.RateLimit.Rate, "burst": wh.RateLimit.Burst, "per_client": wh.RateLimit.PerClient},
		message: fmt.Sprintf("more than %g calls per second; retry in %d s", wh.RateLimit.Rate, int((wait+time.Second-1)/time.Second))}
}

// claim finds the delivery id of a call of a webhook with "dedupe" and
// claims it: signedID, the message id the signature verified, when the
// setting keys on it. A nil claim and nil error: the webhook has no dedupe.
// A duplicate claim carries the first call's event id.
func (in *Intake) claim(c *request, wh *webhooks.Webhook, body []byte, signedID string, now time.Time) (*dedupe.Claim, error) {
	d := wh.Dedupe
	if d == nil {
		return nil, nil
	}
	var header string
	switch {
	case d.SignedID:
		header = strings.Clone(signedID) // from the header buffer, like any value
	case d.Header != "":
		// A copy: the delivery id may be remembered, and the front
		// end's header values may live in a buffer it reuses.
		header = strings.Clone(c.header.Get(d.Header))
	}
	key, err := d.Key(header, body)
	if err != nil {
		params := map[string]any{"max_length": webhooks.MaxDeliveryIDLen}
		if d.Header != "" {
			params["header"] = d.Header
		} else {
			params["jmespath"] = d.JMESPath
		}
		switch {
		case errors.Is(err, webhooks.ErrBodyNotJSON):
			return nil, &apiError{status: http.StatusBadRequest, code: CodeBodyNotJSON, message: err.Error()}
		case errors.Is(err, webhooks.ErrNoDeliveryID):
			return nil, &apiError{status: http.StatusBadRequest, code: CodeNoDeliveryID, reason: ReasonDeliveryID, params: params,
				message: "the webhook deduplicates deliveries and this call carries no delivery id"}
		}
		return nil, &apiError{status: http.StatusBadRequest, code: CodeBadDeliveryID, reason: ReasonDeliveryID, params: params,
			message: err.Error()}
	}
	if in.cfg.Dedupe == nil {
		return nil, errors.New("webhook with dedupe, intake without a dedupe store")
	}
	cl, err := in.cfg.Dedupe.Begin(c.ctx, wh.ID, key, now)
	if err != nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, retryAfter: in.cfg.RetryAfter,
			message: "the delivery id could not be checked", err: err}
	}
	return cl, nil
}
