package engine

// HeaderTraceparent is the Kafka header carrying the event's W3C trace
// context, set by the intake that accepted it.
const HeaderTraceparent = "traceparent"

// traceIDOf returns the trace id of a W3C traceparent value
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"), and false
// when the value is not one or its trace id is invalid (all zeros).
func traceIDOf(tp []byte) (string, bool) {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || (len(tp) > 55 && tp[55] != '-') {
		return "", false
	}
	// Version ff is invalid; version 00 has exactly 55 bytes; later
	// versions may append fields after a dash.
	if string(tp[:2]) == "ff" || (string(tp[:2]) == "00" && len(tp) != 55) {
		return "", false
	}
	id := tp[3:35]
	zero := true
	for _, c := range id {
		switch {
		case c == '0':
		case '1' <= c && c <= '9', 'a' <= c && c <= 'f':
			zero = false
		default:
			return "", false
		}
	}
	if zero {
		return "", false
	}
	return string(id), true
}
