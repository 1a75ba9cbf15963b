package findings

import (
	"reflect"
	"testing"
)

// FuzzDecodeInsert checks decodeInsert's fast path: a body the fast
// decoder accepts is accepted by the standard decoder (decode) with the
// same result, so the fast path never lets through what decode refuses
// nor reads a field differently. (What it refuses goes to decode.)
func FuzzDecodeInsert(f *testing.F) {
	for _, s := range []string{
		`{"monitored_domain_id": 1, "tool_code": "t", "resource_url": "https://example.com/", "username": "u", "password": "p"}`,
		`{"monitored_domain_id": 1.5}`, `{"monitored_domain_id": 1e2}`, `{"monitored_domain_id": -0}`,
		`{"monitored_domain_id": 9223372036854775808}`, `{"monitored_domain_id": "1"}`, `{"tool_code": null}`,
		`{"Tool_Code": "x"}`, `{"tool_code": "a", "tool_code": "b"}`, `{"x": 1}`, `{} {}`, `{}  `, ` {"hash": "\ud800"}`,
		"{\"username\": \"\xff\"}", `{"username": "\u0000"}`, `[]`, `null`, ``, `{"hash": "a\/b\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if decodeInsertPlain(body, &insertBody{}) {
			// decodeInsert skips checkBody for the plain form.
			if err := checkBody(body, insertField); err != nil {
				t.Fatalf("%q: plain path accepted, checkBody: %v", body, err)
			}
		}
		// Each fast path, on its own: what it accepts, the standard
		// decoder accepts alike.
		for name, fast := range map[string]func([]byte, *insertBody) bool{"plain": decodeInsertPlain, "segmentio": decodeInsertSegment} {
			var got, std insertBody
			if !fast(body, &got) {
				continue
			}
			if err := decode(body, &std); err != nil {
				t.Fatalf("%q: %s path accepted, standard decoder: %v", body, name, err)
			}
			if !reflect.DeepEqual(got, std) {
				t.Fatalf("%q: %s path %+v, standard %+v", body, name, got, std)
			}
		}
	})
}

// FuzzDecodeInsertRefusals is the differential check of the whole insert
// decoder: every body the standard strict path refuses (checkBody, then
// encoding/json with unknown fields disallowed), decodeInsert refuses too,
// and whatever decodeInsert accepts, the standard path accepts alike.
func FuzzDecodeInsertRefusals(f *testing.F) {
	for _, s := range []string{
		`{"monitored_domain_id": 1, "tool_code": "t", "resource_url": "https://example.com/", "username": "u", "password": "p"}`,
		`{"Tool_Code": "x"}`, `{"tool_code": "a", "tool_code": "b"}`, `{"tool_code": "a", "tool_\u0063ode": "b"}`,
		"{\"username\": \"\xff\"}", `[[[[[[[[`, `{"username": [[[[]]]]}`, `{"hash": "\ud800"}`, `{"PASSWORD": "p"}`,
		`{"password": "p"} x`, `{"monitored_domain_id": 1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, std insertBody
		err := decodeInsert(body, &got)
		stdErr := checkBody(body, insertField)
		if stdErr == nil {
			stdErr = decode(body, &std)
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeInsert: %v; standard strict path: %v", body, err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, std) {
			t.Fatalf("%q: decodeInsert %+v, standard %+v", body, got, std)
		}
	})
}

// FuzzNormalizeResource: the resource URLs NormalizeResource takes as
// they are (plainResource) are normalized as the general path does.
func FuzzNormalizeResource(f *testing.F) {
	for _, s := range []string{
		"https://example.com/login", "https://example.com", "http://example.com:8080/a/b/", "https://Example.com/x",
		"https://example.com/a/../b", "https://example.com//x", "https://a.b-c.example/x_y~z.", "https://example.com:/x",
		"https://:80/x", "https://example.com/%41", "https://example.com/x?y", "http://1.2.3.4:0/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !plainResource(raw) {
			return
		}
		got, err := NormalizeResource(raw)
		want, wantErr := normalizeURL(raw)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: %q %v, general path %q %v", raw, got, err, want, wantErr)
		}
	})
}
