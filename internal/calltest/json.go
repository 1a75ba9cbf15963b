package calltest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// JSON sends body (nil: no body) as JSON to url with the Authorization
// header authorization, through Client, and decodes the answer into out;
// it fails the test unless the answer is 200 OK with a JSON body.
func JSON(t testing.TB, method, url, authorization string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Content-Type", "application/json")
	resp, b := Do(t, Client().Do, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
}
