package satellite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/kafkasink"
)

// recordVersion is the first byte of a spooled record.
const recordVersion = 1

var errBadRecord = errors.New("bad spooled record")

// messageParts holds the headers and the key of a message in one
// allocation: an event has up to 5 headers (intake.Record) and its key is
// a tenant id.
type messageParts struct {
	headers [5]kafkasink.Header
	key     [48]byte
}

// toMessage turns an accepted event into a Kafka message with its own
// headers and key.
func toMessage(rec intake.Record) kafkasink.Message {
	var hs []kafkasink.Header
	var key []byte
	if len(rec.Headers) <= len(messageParts{}.headers) && len(rec.Key) <= len(messageParts{}.key) {
		p := new(messageParts)
		hs = p.headers[:len(rec.Headers):len(rec.Headers)]
		key = append(p.key[:0:len(rec.Key)], rec.Key...)
	} else {
		hs = make([]kafkasink.Header, len(rec.Headers))
		key = []byte(rec.Key)
	}
	for i, h := range rec.Headers {
		hs[i] = kafkasink.Header{Key: h.Key, Value: h.Value}
	}
	return kafkasink.Message{Key: key, Value: rec.Value, Headers: hs, Time: rec.Time}
}

// encodeRecord encodes a message for the spool: the version, the timestamp
// in milliseconds, the key, the headers (each a length-prefixed key and
// value), then the value, which runs to the end.
func encodeRecord(m kafkasink.Message) []byte {
	n := 1 + 3*binary.MaxVarintLen64 + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += 2*binary.MaxVarintLen64 + len(h.Key) + len(h.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, recordVersion)
	b = binary.AppendVarint(b, m.Time.UnixMilli())
	b = appendBytes(b, m.Key)
	b = binary.AppendUvarint(b, uint64(len(m.Headers)))
	for _, h := range m.Headers {
		b = appendBytes(b, []byte(h.Key))
		b = appendBytes(b, h.Value)
	}
	return append(b, m.Value...)
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// decodeRecord decodes a spooled record.
func decodeRecord(b []byte) (kafkasink.Message, error) {
	var m kafkasink.Message
	if len(b) == 0 || b[0] != recordVersion {
		return m, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	b = b[1:]
	ms, n := binary.Varint(b)
	if n <= 0 {
		return m, fmt.Errorf("%w: timestamp", errBadRecord)
	}
	b = b[n:]
	m.Time = time.UnixMilli(ms)
	var err error
	if m.Key, b, err = readBytes(b); err != nil {
		return m, err
	}
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return m, fmt.Errorf("%w: header count", errBadRecord)
	}
	b = b[n:]
	m.Headers = make([]kafkasink.Header, count)
	for i := range m.Headers {
		var k []byte
		if k, b, err = readBytes(b); err != nil {
			return m, err
		}
		m.Headers[i].Key = string(k)
		if m.Headers[i].Value, b, err = readBytes(b); err != nil {
			return m, err
		}
	}
	m.Value = b
	return m, nil
}

func readBytes(b []byte) ([]byte, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, fmt.Errorf("%w: length", errBadRecord)
	}
	b = b[n:]
	return b[:l:l], b[l:], nil
}
