package apierror

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/squallhq/squall/internal/jsonlimit"
)

// DecodeJSON decodes r's body into v strictly: Content-Type
// application/json (else 415), then as DecodeStrict. It returns the
// body's size.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, limits jsonlimit.Limits, v any) (int, error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return 0, Errorf(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "the body must be application/json")
	}
	return DecodeStrict(w, r, limit, limits, v)
}

// DecodeStrict decodes r's body into v strictly, whatever its
// Content-Type: at most limit bytes (413; w, when set, is told to close
// the connection), within limits' depth (jsonlimit), no unknown field,
// nothing after the value (400 BAD_REQUEST, the message saying what). It
// returns the body's size.
func DecodeStrict(w http.ResponseWriter, r *http.Request, limit int64, limits jsonlimit.Limits, v any) (int, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if e := Common(err); e != nil {
			return 0, e
		}
		return 0, Errorf(http.StatusBadRequest, "BAD_REQUEST", "body: %s", err)
	}
	if err := jsonlimit.Check(b, limits); err != nil {
		return 0, Errorf(http.StatusBadRequest, "BAD_REQUEST", "body: %s", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return 0, Errorf(http.StatusBadRequest, "BAD_REQUEST", "body: %s", err)
	}
	if dec.More() {
		return 0, Errorf(http.StatusBadRequest, "BAD_REQUEST", "body: trailing data after the JSON value")
	}
	return len(b), nil
}
