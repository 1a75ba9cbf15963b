package tree_test

import (
	"fmt"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
)

func ExampleTree_Actions() {
	ex, err := config.DecodeExport([]byte(`{"version": "1.1", "Ruleset": {"name": "emails", "rules": [
	  {"name": "temperature", "description": "", "continue": true, "active": true,
	   "constraint": {
	     "WHERE": {"type": "equals", "first": "${event.type}", "second": "email"},
	     "WITH": {"t": {"from": "${event.payload.body}", "regex": {"match": "([0-9]+) Degrees", "group_match_idx": 1},
	                    "modifiers_post": [{"type": "ToNumber"}]}}},
	   "actions": [{"id": "logger", "payload": {"msg": "${event.payload.host} is at ${_variables.t} degrees", "t": "${_variables.t}"}}]}]}}`))
	if err != nil {
		panic(err)
	}
	tr, err := tree.Compile(ex.Node)
	if err != nil {
		panic(err)
	}
	ev, err := tree.DecodeEvent([]byte(`{"type": "email", "created_ms": 1, "payload": {"host": "srv1", "body": "95 Degrees"}}`))
	if err != nil {
		panic(err)
	}
	for _, a := range tr.Actions(ev, nil) {
		fmt.Println(a.ID, a.Payload["msg"], a.Payload["t"])
	}
	// Output: logger srv1 is at 95 degrees 95
}
