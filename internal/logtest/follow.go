package logtest

import (
	"bufio"
	"encoding/json"
	"io"
)

// Follow copies the JSON log lines of a process, read from r, into b until
// r ends (lines up to 1 MiB; what follows a longer one is read and
// dropped), and sends on found, once, the string field key of the first
// line whose msg is msg: the address a process logs once it listens.
// found needs room for the value (a buffer of one).
func Follow(r io.Reader, b *Buffer, msg, key string, found chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		_, _ = b.Write(append(sc.Bytes(), '\n'))
		var rec map[string]any
		if !sent && json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
			v, _ := rec[key].(string)
			found <- v
			sent = true
		}
	}
	_, _ = io.Copy(io.Discard, r)
}
