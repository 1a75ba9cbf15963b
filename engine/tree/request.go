package tree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Request is a test-event request: {"event": Event, "process_type": ...}.
type Request struct {
	Event *Event
	// Sent is the event as the caller sent it, which the answer echoes.
	Sent        json.RawMessage
	ProcessType ProcessType
	// Explain asks for an explanation of the evaluation ([Tree.Explain]).
	Explain bool
}

// ErrInvalidRequest classifies malformed test-event requests.
var ErrInvalidRequest = errors.New("invalid test-event request")

// DecodeRequest decodes a test-event request. event is required;
// process_type is SkipActions or Full, and SkipActions when it is missing
// or null (the spec makes it optional: "when it is set"); explain, an
// extension, is a boolean, false when missing or null; unknown fields are
// errors.
func DecodeRequest(data []byte) (*Request, error) {
	var raw struct {
		Event       json.RawMessage `json:"event"`
		ProcessType *ProcessType    `json:"process_type"`
		Explain     *bool           `json:"explain"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: unexpected data after the JSON object", ErrInvalidRequest)
	}
	if raw.Event == nil {
		return nil, fmt.Errorf("%w: missing event", ErrInvalidRequest)
	}
	pt := SkipActions
	if raw.ProcessType != nil {
		if err := raw.ProcessType.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		pt = *raw.ProcessType
	}
	ev, err := DecodeEvent(raw.Event)
	if err != nil {
		return nil, err
	}
	return &Request{Event: ev, Sent: raw.Event, ProcessType: pt, Explain: raw.Explain != nil && *raw.Explain}, nil
}

// Validate reports whether the process type is SkipActions or Full.
func (p ProcessType) Validate() error {
	if p != SkipActions && p != Full {
		return fmt.Errorf("process_type %q is not SkipActions or Full", string(p))
	}
	return nil
}

// Response is the answer to a test event: the event as sent (its JSON,
// with nothing added: no empty metadata, no defaults) and the processed
// tree; with explain, the explanation (an extension, absent otherwise).
type Response struct {
	Event   json.RawMessage `json:"event"`
	Result  *ProcessedNode  `json:"result"`
	Explain *Explanation    `json:"explain,omitempty"`
}
