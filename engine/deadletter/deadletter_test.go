package deadletter

import "testing"

func TestParseID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want ID
		ok   bool
	}{
		{"squall.events.dlq/0/42", ID{"squall.events.dlq", 0, 42}, true},
		{"a-b_c/12/0", ID{"a-b_c", 12, 0}, true},
		{"t/0", ID{}, false},
		{"/0/1", ID{}, false},
		{"t/x/1", ID{}, false},
		{"t/1/-1", ID{}, false},
		{"t/-1/1", ID{}, false},
		{"a/b/1/2", ID{}, false},
		{"", ID{}, false},
	} {
		got, err := ParseID(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseID(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	for _, h := range []string{HeaderError, HeaderErrorStage, HeaderErrorActions, HeaderErrorRules, HeaderTreeIndex, HeaderEngine, HeaderDeadAt, HeaderOrigin, HeaderOriginTime} {
		if !IsReason(h) || IsReplay(h) {
			t.Errorf("%s: reason %v, replay %v", h, IsReason(h), IsReplay(h))
		}
	}
	for _, h := range []string{HeaderReplayCount, HeaderReplayOf, HeaderReplayBy, HeaderReplayed} {
		if IsReason(h) || !IsReplay(h) {
			t.Errorf("%s: reason %v, replay %v", h, IsReason(h), IsReplay(h))
		}
	}
	if IsReason("squall-event-id") || IsReplay("squall-webhook") {
		t.Error("an event's own header counted as the dead letter's")
	}
	if ParseCount([]byte("3")) != 3 || ParseCount([]byte("x")) != 0 || ParseCount([]byte("-2")) != 0 || ParseCount(nil) != 0 {
		t.Error("ParseCount")
	}
}
