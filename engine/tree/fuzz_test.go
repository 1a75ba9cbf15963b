package tree

import (
	"encoding/json"
	"testing"
)

// FuzzEvaluate decodes arbitrary bytes as an event and evaluates it against
// Tornado's fixture trees: no input may panic, and live and test evaluation
// must agree.
func FuzzEvaluate(f *testing.F) {
	for _, file := range []string{fullMatchEvent, noMatchEvent, "tornado/openshift_webhook_event.json", "tornado/event_nested_01.json", "tornado/event_with_null_value.json", "worked_example.event.json"} {
		f.Add(readFile(f, file))
	}
	f.Add([]byte(`{"type":"trap","created_ms":1,"payload":{"host_ip":"10.65.5.31","line_11":" 1","line_9":"Sensor 4","line_5":"x","line_6":[1]}}`))
	f.Add([]byte(`{"type":"t","created_ms":18446744073709551615,"payload":{"data":{"alerts":{"b":1,"a":[]}}},"metadata":{"tenant_id":"master"}}`))
	trees := []*Tree{
		ruleFileTree(f, fullMatchRule, ""),
		mustCompile(f, tornadoDir(f, "v2/test_config_iterator")),
		mustCompile(f, tornadoDir(f, "v2/test_config")),
		mustCompile(f, tornadoDir(f, "rules.d")),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeEvent(data)
		if err != nil {
			return
		}
		for _, tr := range trees {
			res, actions := tr.Process(ev)
			if _, err := json.Marshal(res); err != nil {
				t.Fatalf("result does not encode: %v", err)
			}
			checkLive(t, tr, ev, actions)
		}
	})
}
