package signing

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// vector is one file of testdata/vectors: a request, the verifier's
// configuration and the expected outcome.
type vector struct {
	scheme string
	secret string
	now    time.Time
	header http.Header
	want   string // "ok <index>", "mismatch", "malformed", "missing" or "timestamp"
	body   []byte
}

// readVector parses a vector file: "# comment" lines, "key: value" lines,
// then "body:" and the body (the rest of the file, without its final
// newline).
func readVector(t *testing.T, path string) vector {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := vector{header: http.Header{}}
	head, body, ok := bytes.Cut(data, []byte("\nbody:\n"))
	if !ok {
		t.Fatalf("%s: no body: line", path)
	}
	v.body = bytes.TrimSuffix(body, []byte("\n"))
	sc := bufio.NewScanner(bytes.NewReader(head))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("%s: bad line %q", path, line)
		}
		switch key {
		case "scheme":
			v.scheme = value
		case "secret":
			v.secret = value
		case "now":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				t.Fatalf("%s: now: %v", path, err)
			}
			v.now = time.Unix(n, 0)
		case "header":
			name, hv, ok := strings.Cut(value, ": ")
			if !ok {
				t.Fatalf("%s: bad header %q", path, value)
			}
			v.header.Add(name, hv)
		case "want":
			v.want = value
		default:
			t.Fatalf("%s: unknown key %q", path, key)
		}
	}
	return v
}

// outcome describes the result of Verify as a vector's want line.
func outcome(index int, err error) string {
	switch {
	case err == nil:
		return "ok " + strconv.Itoa(index)
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrMissing):
		return "missing"
	case errors.Is(err, ErrTimestamp):
		return "timestamp"
	}
	return "error " + err.Error()
}

func mustNew(t testing.TB, cfg Config, secrets ...string) *Verifier {
	t.Helper()
	keys := make([]Key, len(secrets))
	for i, s := range secrets {
		keys[i] = Key{Secret: []byte(s)}
	}
	v, err := New(cfg, keys)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

// TestVerifier_Vectors checks every scheme against the examples its
// provider publishes (testdata/vectors names the source of each).
func TestVerifier_Vectors(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/vectors/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			t.Parallel()
			vec := readVector(t, f)
			v := mustNew(t, Config{Scheme: vec.scheme}, vec.secret)
			if got := outcome(v.Verify(vec.header, vec.body, vec.now)); got != vec.want {
				t.Errorf("Verify = %s, want %s", got, vec.want)
			}
		})
		seen[readVector(t, f).scheme] = true
	}
	for _, s := range []string{SchemeGitHub, SchemeStandardWebhooks, SchemeStripe, SchemeSlack} {
		if !seen[s] {
			t.Errorf("no vector for scheme %s", s)
		}
	}
}

func TestVerifier_Verify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"n": 1}`)
	github := mustNew(t, Config{Scheme: SchemeGitHub}, "k")
	std := mustNew(t, Config{Scheme: SchemeStandardWebhooks}, "whsec_"+"c2VjcmV0LWtleS1vZi10d2VudHktZm91cg==")
	stripe := mustNew(t, Config{Scheme: SchemeStripe}, "whsec_k")
	slack := mustNew(t, Config{Scheme: SchemeSlack}, "k")
	hmac512 := mustNew(t, Config{Scheme: SchemeHMAC, Header: "X-Sig", Prefix: "sha512=", Encoding: EncodingBase64,
		Algorithm: AlgorithmSHA512, TimestampHeader: "X-Ts", Content: "v1:{timestamp}:{body}"}, "k")
	// with returns the signed headers of v with one header changed ("" deletes it).
	with := func(v *Verifier, id, name, value string) http.Header {
		h := v.Sign(body, now, id)
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}
	signed := func(v *Verifier) http.Header { return v.Sign(body, now, "msg_1") }
	long := strings.Repeat("a", MaxHeaderLen+1)
	tests := []struct {
		name string
		v    *Verifier
		h    http.Header
		want string
		// header is the header named by the error, when not the signature header.
		header string
	}{
		{"github signed", github, signed(github), "ok 0", ""},
		{"github missing", github, http.Header{}, "missing", ""},
		{"github blank", github, with(github, "", HeaderGitHub, " "), "missing", ""},
		{"github no prefix", github, with(github, "", HeaderGitHub, strings.Repeat("00", 32)), "malformed", ""},
		{"github not hex", github, with(github, "", HeaderGitHub, "sha256="+strings.Repeat("zz", 32)), "malformed", ""},
		{"github odd hex", github, with(github, "", HeaderGitHub, "sha256=abc"), "malformed", ""},
		{"github short digest", github, with(github, "", HeaderGitHub, "sha256=00"), "mismatch", ""},
		{"github too long", github, with(github, "", HeaderGitHub, "sha256="+long), "malformed", ""},
		{"github upper case", github, with(github, "", HeaderGitHub, strings.ToUpper(signed(github).Get(HeaderGitHub))), "ok 0", ""},

		{"standard signed", std, signed(std), "ok 0", ""},
		{"standard no id", std, with(std, "msg_1", HeaderWebhookID, ""), "missing", HeaderWebhookID},
		{"standard other id", std, with(std, "msg_1", HeaderWebhookID, "msg_2"), "mismatch", ""},
		{"standard long id", std, with(std, "msg_1", HeaderWebhookID, long), "malformed", HeaderWebhookID},
		{"standard no timestamp", std, with(std, "msg_1", HeaderWebhookTimestamp, ""), "missing", HeaderWebhookTimestamp},
		{"standard timestamp not numeric", std, with(std, "msg_1", HeaderWebhookTimestamp, "12a"), "malformed", HeaderWebhookTimestamp},
		{"standard timestamp negative", std, with(std, "msg_1", HeaderWebhookTimestamp, "-1"), "malformed", HeaderWebhookTimestamp},
		{"standard timestamp huge", std, with(std, "msg_1", HeaderWebhookTimestamp, "99999999999999999999"), "malformed", HeaderWebhookTimestamp},
		{"standard timestamp changed", std, with(std, "msg_1", HeaderWebhookTimestamp, strconv.FormatInt(now.Unix()+1, 10)), "mismatch", ""},
		{"standard no comma", std, with(std, "msg_1", HeaderWebhookSignature, "v1"), "malformed", ""},
		{"standard bad base64", std, with(std, "msg_1", HeaderWebhookSignature, "v1,!!!!"), "malformed", ""},
		{"standard only v1a", std, with(std, "msg_1", HeaderWebhookSignature, "v1a,AAAA"), "mismatch", ""},
		{"standard too many", std, with(std, "msg_1", HeaderWebhookSignature, strings.Repeat("v1,AAAA ", MaxSignatures+1)), "malformed", ""},
		{"standard max signatures", std, with(std, "msg_1", HeaderWebhookSignature,
			strings.Repeat("v1,AAAA ", MaxSignatures-1)+signed(std).Get(HeaderWebhookSignature)), "ok 0", ""},

		{"stripe signed", stripe, signed(stripe), "ok 0", ""},
		{"stripe missing", stripe, http.Header{}, "missing", ""},
		{"stripe no t", stripe, with(stripe, "", HeaderStripe, "v1="+strings.Repeat("00", 32)), "malformed", ""},
		{"stripe two t", stripe, with(stripe, "", HeaderStripe, "t=1,t=2,"+strings.TrimPrefix(signed(stripe).Get(HeaderStripe), "t="+ts+",")), "malformed", ""},
		{"stripe t not numeric", stripe, with(stripe, "", HeaderStripe, "t=now,v1=00"), "malformed", ""},
		{"stripe no v1", stripe, with(stripe, "", HeaderStripe, "t="+ts+",v0=00"), "mismatch", ""},
		{"stripe pair without =", stripe, with(stripe, "", HeaderStripe, "t="+ts+",v1"), "malformed", ""},
		{"stripe v1 not hex", stripe, with(stripe, "", HeaderStripe, "t="+ts+",v1=xyz"), "malformed", ""},
		{"stripe spaces", stripe, with(stripe, "", HeaderStripe, strings.ReplaceAll(signed(stripe).Get(HeaderStripe), ",", ", ")), "ok 0", ""},

		{"slack signed", slack, signed(slack), "ok 0", ""},
		{"slack no timestamp", slack, with(slack, "", HeaderSlackRequestTimestamp, ""), "missing", HeaderSlackRequestTimestamp},
		{"slack timestamp float", slack, with(slack, "", HeaderSlackRequestTimestamp, ts+".0"), "malformed", HeaderSlackRequestTimestamp},
		{"slack v1 prefix", slack, with(slack, "", HeaderSlackSignature, "v1="+strings.Repeat("00", 32)), "malformed", ""},

		{"hmac sha512 signed", hmac512, signed(hmac512), "ok 0", ""},
		{"hmac no timestamp", hmac512, with(hmac512, "", "X-Ts", ""), "missing", "X-Ts"},
		{"hmac not base64", hmac512, with(hmac512, "", "X-Sig", "sha512=abc"), "malformed", ""},
		{"hmac other prefix", hmac512, with(hmac512, "", "X-Sig", "sha256="+signed(hmac512).Get("X-Sig")[7:]), "malformed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			index, err := tt.v.Verify(tt.h, body, now)
			if got := outcome(index, err); got != tt.want {
				t.Fatalf("Verify = %s (%v), want %s", got, err, tt.want)
			}
			if err == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			want := tt.header
			if want == "" {
				want = tt.v.Header()
			}
			if !strings.EqualFold(e.Header, want) {
				t.Errorf("error names header %s, want %s", e.Header, want)
			}
		})
	}
}

// TestVerifier_Tolerance checks the replay window in both directions, its
// edges included, for every timestamped scheme.
func TestVerifier_Tolerance(t *testing.T) {
	t.Parallel()
	signedAt := time.Unix(1700000000, 0)
	body := []byte(`{}`)
	for _, cfg := range []Config{
		{Scheme: SchemeStandardWebhooks},
		{Scheme: SchemeStripe, Tolerance: time.Minute},
		{Scheme: SchemeSlack, Tolerance: time.Hour},
		{Scheme: SchemeHMAC, Header: "X-Sig", TimestampHeader: "X-Ts"},
	} {
		t.Run(cfg.Scheme, func(t *testing.T) {
			t.Parallel()
			v := mustNew(t, cfg, "whsec_a2V5")
			tol := v.Tolerance()
			if cfg.Tolerance == 0 && tol != DefaultTolerance || cfg.Tolerance != 0 && tol != cfg.Tolerance {
				t.Fatalf("Tolerance = %s", tol)
			}
			h := v.Sign(body, signedAt, "msg_1")
			for _, tc := range []struct {
				at   time.Duration
				want string
			}{
				{0, "ok 0"}, {tol, "ok 0"}, {-tol, "ok 0"},
				{tol + time.Second, "timestamp"}, {-tol - time.Second, "timestamp"},
				{24 * 365 * time.Hour, "timestamp"},
			} {
				if got := outcome(v.Verify(h, body, signedAt.Add(tc.at))); got != tc.want {
					t.Errorf("received %s after signing: %s, want %s", tc.at, got, tc.want)
				}
			}
		})
	}
	// Schemes without a timestamp have no window.
	v := mustNew(t, Config{Scheme: SchemeGitHub}, "k")
	if got := outcome(v.Verify(v.Sign(body, signedAt, ""), body, signedAt.Add(1000*time.Hour))); got != "ok 0" {
		t.Errorf("github a long time after: %s", got)
	}
}

// TestVerifier_Rotation: any valid key verifies any one signature; a key
// past its NotAfter verifies nothing.
func TestVerifier_Rotation(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	body := []byte(`{"r": 1}`)
	for _, scheme := range []string{SchemeGitHub, SchemeStandardWebhooks, SchemeStripe, SchemeSlack} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			oldKey := Key{Secret: []byte("whsec_b2xkLWtleQ=="), NotAfter: now.Add(-time.Second)}
			newKey := Key{Secret: []byte("whsec_bmV3LWtleQ==")}
			onlyOld, err := New(Config{Scheme: scheme}, []Key{{Secret: oldKey.Secret}})
			if err != nil {
				t.Fatal(err)
			}
			onlyNew, err := New(Config{Scheme: scheme}, []Key{newKey})
			if err != nil {
				t.Fatal(err)
			}
			both, err := New(Config{Scheme: scheme}, []Key{oldKey, newKey})
			if err != nil {
				t.Fatal(err)
			}
			byOld := onlyOld.Sign(body, now, "msg_1")
			byNew := onlyNew.Sign(body, now, "msg_1")
			if got := outcome(both.Verify(byNew, body, now)); got != "ok 1" {
				t.Errorf("signed with the new key: %s, want ok 1", got)
			}
			if got := outcome(both.Verify(byOld, body, now)); got != "mismatch" {
				t.Errorf("signed with the expired key: %s, want mismatch", got)
			}
			if got := outcome(both.Verify(byOld, body, now.Add(-time.Second))); got != "ok 0" {
				t.Errorf("signed with the old key at its not_after: %s, want ok 0", got)
			}
			// Sign skips the expired key.
			if got := outcome(both.Verify(both.Sign(body, now, "msg_1"), body, now)); got != "ok 1" {
				t.Errorf("Sign after expiry: %s, want ok 1", got)
			}
			if scheme == SchemeStandardWebhooks || scheme == SchemeStripe {
				// Both signatures in one header: the sender rotates too.
				h := byOld.Clone()
				if scheme == SchemeStripe {
					h.Set(HeaderStripe, byOld.Get(HeaderStripe)+","+strings.SplitN(byNew.Get(HeaderStripe), ",", 2)[1])
				} else {
					h.Set(HeaderWebhookSignature, byOld.Get(HeaderWebhookSignature)+" "+byNew.Get(HeaderWebhookSignature))
				}
				if got := outcome(both.Verify(h, body, now)); got != "ok 1" {
					t.Errorf("two signatures: %s, want ok 1", got)
				}
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	key := []Key{{Secret: []byte("k")}}
	tests := []struct {
		name string
		cfg  Config
		keys []Key
		want string
	}{
		{"unknown scheme", Config{Scheme: "svix"}, key, `scheme "svix": unknown scheme`},
		{"no keys", Config{Scheme: SchemeGitHub}, nil, "secrets: at least one secret is required"},
		{"too many keys", Config{Scheme: SchemeGitHub}, make([]Key, MaxKeys+1), "secrets: at most 16 secrets"},
		{"empty key", Config{Scheme: SchemeGitHub}, []Key{{}}, "secrets[0]: empty"},
		{"standard secret not base64", Config{Scheme: SchemeStandardWebhooks}, key, `secrets[0]: must be "whsec_" followed by base64`},
		{"tolerance too large", Config{Scheme: SchemeSlack, Tolerance: MaxTolerance + 1}, key, "tolerance"},
		{"tolerance without timestamp", Config{Scheme: SchemeHMAC, Header: "X", Tolerance: time.Minute}, key, "only for schemes with a timestamp"},
		{"prefix too long", Config{Scheme: SchemeHMAC, Header: "X", Prefix: strings.Repeat("p", 65)}, key, "prefix"},
		{"content too long", Config{Scheme: SchemeHMAC, Header: "X", Content: strings.Repeat("x", MaxContentLen) + "{body}"}, key, "content"},
		{"stray brace", Config{Scheme: SchemeHMAC, Header: "X", Content: "}{body}"}, key, `"}" outside a placeholder`},
		{"stray brace after", Config{Scheme: SchemeHMAC, Header: "X", Content: "{body}}"}, key, `"}" outside a placeholder`},
		{"timestamp without header", Config{Scheme: SchemeHMAC, Header: "X", Content: "{timestamp}{body}"}, key, "needs a timestamp_header"},
		{"bad timestamp header", Config{Scheme: SchemeHMAC, Header: "X", TimestampHeader: "X Y"}, key, "timestamp_header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg, tt.keys)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestVerifier_Redaction: no output of a verifier contains a key.
func TestVerifier_Redaction(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-SHOULD-NOT-LEAK"
	v := mustNew(t, Config{Scheme: SchemeHMAC, Header: "X-Sig", TimestampHeader: "X-Ts"}, secret)
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("v", "verifier", v)
	out := fmt.Sprintf("%v %+v %#v %s %d %x", v, v, v, v, v, v) + v.String() + logs.String()
	if strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", secret)) {
		t.Errorf("output shows the secret: %s", out)
	}
	if !strings.Contains(out, "hmac header=X-Sig") || !strings.Contains(logs.String(), `"verifier":{"scheme":"hmac","header":"X-Sig","secrets":1,"tolerance":300000000000}`) {
		t.Errorf("output = %s", out)
	}
}

// A Standard Webhooks verifier with two secrets during a rotation: the
// specification's example message verifies with the second; the same
// message an hour later is a replay.
func ExampleVerifier_Verify() {
	v, err := New(Config{Scheme: SchemeStandardWebhooks}, []Key{
		{Secret: []byte("whsec_bmV3LXNlY3JldC1rZXk=")},
		{Secret: []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), NotAfter: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	fmt.Println(v.Verify(h, body, time.Unix(1614265330, 0)))
	fmt.Println(v.Verify(h, body, time.Unix(1614265330, 0).Add(time.Hour)))
	// Output:
	// 1 <nil>
	// -1 signature header Webhook-Timestamp: timestamp outside the tolerance
}

// TestVerifier_SvixHeaders: Standard Webhooks under Svix's header names
// (svix-id, svix-timestamp, svix-signature) verify the same, and errors
// name the header the request used.
func TestVerifier_SvixHeaders(t *testing.T) {
	t.Parallel()
	now := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	v := mustNew(t, Config{Scheme: SchemeStandardWebhooks}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	svix := func(sig string) http.Header {
		return http.Header{"Svix-Id": {"msg_p5jXN8AQM9LWM0D4loKWxJek"}, "Svix-Timestamp": {"1614265330"}, "Svix-Signature": {sig}}
	}
	const good = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	for _, tc := range []struct {
		name   string
		h      http.Header
		now    time.Time
		want   string
		header string
	}{
		{"svix names", svix(good), now, "ok 0", ""},
		{"svix replay", svix(good), now.Add(time.Hour), "timestamp", HeaderSvixTimestamp},
		{"svix wrong", svix("v1,AAAA"), now, "mismatch", HeaderSvixSignature},
		{"svix malformed", svix("v1"), now, "malformed", HeaderSvixSignature},
		{"svix without id", func() http.Header { h := svix(good); h.Del("Svix-Id"); return h }(), now, "missing", HeaderSvixID},
		{"neither", http.Header{}, now, "missing", HeaderWebhookSignature},
		{"webhook- names win", func() http.Header { h := svix(good); h.Set("Webhook-Signature", good); return h }(), now, "missing", HeaderWebhookID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			index, err := v.Verify(tc.h, body, tc.now)
			if got := outcome(index, err); got != tc.want {
				t.Fatalf("Verify = %s (%v), want %s", got, err, tc.want)
			}
			var e *Error
			if err != nil && (!errors.As(err, &e) || e.Header != tc.header) {
				t.Errorf("error %v, want it to name %s", err, tc.header)
			}
		})
	}
}

// TestVerifier_VerifyID: the id returned is the one the signature covers,
// under either header family; two different ids are refused.
func TestVerifier_VerifyID(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	body := []byte(`{"n": 1}`)
	v := mustNew(t, Config{Scheme: SchemeStandardWebhooks}, "whsec_YWJj")
	h := v.Sign(body, now, "msg_1")
	svix := http.Header{HeaderSvixID: h[HeaderWebhookID], HeaderSvixTimestamp: h[HeaderWebhookTimestamp], HeaderSvixSignature: h[HeaderWebhookSignature]}
	same := h.Clone()
	same.Set(HeaderSvixID, "msg_1")
	freshSvix := h.Clone()
	freshSvix.Set(HeaderSvixID, "msg_2")
	freshWebhook := svix.Clone()
	freshWebhook.Set(HeaderWebhookID, "msg_2")
	for _, tc := range []struct {
		name   string
		h      http.Header
		id     string
		errHdr string
	}{
		{"webhook names", h, "msg_1", ""},
		{"svix names", svix, "msg_1", ""},
		{"both families, one id", same, "msg_1", ""},
		{"a fresh svix-id", freshSvix, "", HeaderSvixID},
		{"a fresh webhook-id", freshWebhook, "", HeaderWebhookID},
	} {
		index, id, err := v.VerifyID(tc.h, body, now)
		if tc.errHdr == "" {
			if err != nil || index != 0 || id != tc.id {
				t.Errorf("%s: %d %q %v, want 0 %q", tc.name, index, id, err, tc.id)
			}
			continue
		}
		var se *Error
		if !errors.Is(err, ErrAmbiguous) || !errors.As(err, &se) || se.Header != tc.errHdr {
			t.Errorf("%s: %v, want ErrAmbiguous on %s", tc.name, err, tc.errHdr)
		}
	}
	if !v.SignsID() || mustNew(t, Config{Scheme: SchemeStripe}, "s").SignsID() {
		t.Error("SignsID: only standard-webhooks signs an id")
	}
	if _, id, err := mustNew(t, Config{Scheme: SchemeGitHub}, "s").VerifyID(mustNew(t, Config{Scheme: SchemeGitHub}, "s").Sign(body, now, "x"), body, now); err != nil || id != "" {
		t.Errorf("github: id %q, %v", id, err)
	}
}
