package master

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"

	"github.com/squallhq/squall/master/store"
)

// HeaderRequestID carries the request id that the node receiving a write
// gives it (unless the client sent an [HeaderIdempotencyKey]), so that the
// leader can submit its command with that id and a resend of the request
// after a leader failed is applied at most once (see store.Session).
// It is not a secret and needs no authentication: the leader keys the
// table by a digest of the caller's Authorization header, the method, the
// path and the id, and checks the body's digest, so a client that sets it
// reaches only its own requests.
const HeaderRequestID = "X-Squall-Request-Id"

// HeaderIdempotencyKey lets a client retry a write through any node and
// get the first attempt's outcome, for store.SessionWindow: the key names
// one request of the caller (Authorization) on one method and path; the
// same key with another body is answered 422 IDEMPOTENCY_KEY_REUSED.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderIdempotentReplayed is set to "true" on an answer that the leader
// gave from what it recorded when the request was first applied.
const HeaderIdempotentReplayed = "Idempotent-Replayed"

// maxIdempotencyKey bounds the length of an Idempotency-Key.
const maxIdempotencyKey = 255

// codeKeyReused is the error code of a key reused for another request.
const codeKeyReused = "IDEMPOTENCY_KEY_REUSED"

// ensureRequestID gives a write that carries neither a request id nor an
// idempotency key a random request id, on the node that receives it: the
// forwarding keeps it on every attempt.
func ensureRequestID(r *http.Request) {
	if r.Header.Get(HeaderRequestID) != "" || r.Header.Get(HeaderIdempotencyKey) != "" {
		return
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	r.Header.Set(HeaderRequestID, hex.EncodeToString(b[:]))
}

// sessions runs on the leader in front of a mounted handler: a write with
// a request id or an idempotency key is served with its session in the
// context (its command is applied at most once), or answered from the
// table when it was applied before and its handler recorded the answer.
//
// The lookup runs after the consistent read (OnLeader routes), so it sees
// every command that committed; on OnLeaderWrite routes it may miss one
// still being applied, and the handler then runs, whose command the state
// machine deduplicates: those handlers do not check the state before they
// submit (see OnLeaderWrite).
//
// Requests of the methods in idempotent (see IdempotentMethods) have no
// session: applying them again changes nothing anyway.
func (s *Server) sessions(h http.Handler, idempotent []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if readMethod(r.Method) || retrySafe(r.Method, idempotent) {
			h.ServeHTTP(w, r)
			return
		}
		kind, id := "key", r.Header.Get(HeaderIdempotencyKey)
		if id == "" {
			kind, id = "id", r.Header.Get(HeaderRequestID)
		}
		if id == "" {
			h.ServeHTTP(w, r)
			return
		}
		// The audit log records the id with the change (decision 61).
		r = r.WithContext(store.ContextWithOrigin(r.Context(), store.Origin{RequestID: id}))
		if len(id) > maxIdempotencyKey {
			s.writeError(w, r, errorf(http.StatusBadRequest, codeBadRequest,
				"the %s header is longer than %d bytes", HeaderIdempotencyKey, maxIdempotencyKey))
			return
		}
		sess := &store.Session{Key: sessionKey(kind, id, r)}
		out, found, err := s.store.Session(sess.Key)
		if err != nil || !found {
			// The first time (or the table cannot be read, and the state
			// machine decides): the body is read by the handler, after it
			// authenticated the request, and digested on the way.
			hb := &hashingBody{r: r.Body, h: sha256.New()}
			if r.Body == nil || r.Body == http.NoBody {
				hb.r = http.NoBody
			}
			c := *r
			c.Body = hb
			r = &c
			sess.Digest = hb.sum
			h.ServeHTTP(w, r.WithContext(store.ContextWithSession(r.Context(), sess)))
			return
		}
		// Applied before, for the same Authorization header (the key
		// digests it): that caller authenticated then. The body is read
		// only if the token still verifies, else the handler answers.
		if _, err := s.tokens.Verify(r.Header.Get("Authorization")); err != nil {
			h.ServeHTTP(w, r)
			return
		}
		// The whole body is digested; up to maxReplayBody of it is kept,
		// for a handler that runs again.
		var body bytes.Buffer
		over := false
		if hasBody(r) {
			hb := &hashingBody{r: r.Body, h: sha256.New()}
			if _, err := io.Copy(&body, io.LimitReader(hb, maxReplayBody+1)); err != nil {
				s.writeError(w, r, errorf(http.StatusBadRequest, codeBadRequest, "read the request body: %s", err))
				return
			}
			if body.Len() > maxReplayBody {
				over = true
				if _, err := io.Copy(io.Discard, hb); err != nil {
					s.writeError(w, r, errorf(http.StatusBadRequest, codeBadRequest, "read the request body: %s", err))
					return
				}
			}
			sess.Fingerprint = hb.sum()
		} else {
			sess.Fingerprint = sha256.Sum256(nil)
		}
		if out.Fingerprint != sess.Fingerprint {
			s.writeError(w, r, errorf(http.StatusUnprocessableEntity, codeKeyReused,
				"the %s was already used for a request with another body: use a new key for a new request", HeaderIdempotencyKey))
			return
		}
		if out.Status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(HeaderIdempotentReplayed, "true")
			w.WriteHeader(out.Status)
			_, _ = w.Write(out.Answer)
			return
		}
		if over {
			// The handlers that take such bodies (imports) record their
			// answer; one that did not could not run again from here.
			s.writeError(w, r, errorf(http.StatusRequestEntityTooLarge, codeTooLarge,
				"a request applied before, of more than %d bytes, cannot be served again", maxReplayBody))
			return
		}
		c := *r
		c.Body = io.NopCloser(&body)
		r = &c
		h.ServeHTTP(w, r.WithContext(store.ContextWithSession(r.Context(), sess)))
	})
}

// sessionKey is a request's key in the table: a digest of the kind of id,
// the caller's Authorization header, the method, the path and query, and
// the id.
func sessionKey(kind, id string, r *http.Request) [store.SessionKeySize]byte {
	h := sha256.New()
	for _, part := range []string{"squall request session", kind, r.Header.Get("Authorization"), r.Method, r.URL.EscapedPath(), r.URL.RawQuery, id} {
		_, _ = io.WriteString(h, part)
		_, _ = h.Write([]byte{0})
	}
	var k [store.SessionKeySize]byte
	h.Sum(k[:0])
	return k
}

// hashingBody digests what is read of a request body.
type hashingBody struct {
	r io.ReadCloser
	h hash.Hash
}

func (b *hashingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	return n, err
}

func (b *hashingBody) Close() error { return b.r.Close() }

// sum is the digest of what was read.
func (b *hashingBody) sum() [32]byte {
	var fp [32]byte
	b.h.Sum(fp[:0])
	return fp
}
