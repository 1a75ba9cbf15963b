package engine

import "testing"

func TestTraceIDOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string // "" means not a trace id
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", ""}, // version 00 has no more fields
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""}, // upper case is invalid
		{"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", ""},
		{"", ""},
	} {
		got, ok := traceIDOf([]byte(tc.in))
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("traceIDOf(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
