package config_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/squallhq/squall/config"
)

func ExampleDecodeExport() {
	file := []byte(`{
	  "version": "1.1",
	  "Filter": {
	    "name": "master",
	    "filter": {"description": "master tenant", "active": true,
	               "filter": {"type": "equal", "first": "${event.metadata.tenant_id}", "second": "master"}},
	    "nodes": [
	      {"Ruleset": {"name": "emails", "rules": [
	        {"name": "temperature", "description": "", "continue": true, "active": true,
	         "constraint": {"WITH": {"degrees": {"from": "${event.payload.body}",
	                                              "regex": {"match": "([0-9]+) Degrees", "group_match_idx": 1}}}},
	         "actions": [{"id": "logger", "payload": {"msg": "${_variables.degrees} degrees"}}]}]}}
	    ]
	  }
	}`)
	ex, err := config.DecodeExport(file)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := config.Validate(ex.Node); err != nil {
		fmt.Println(err)
		return
	}
	ex.Node.Walk(func(path []string, n *config.Node) bool {
		fmt.Println(n.Kind, config.PathString(path), len(n.Rules))
		return true
	})
	// The operator alias "equal" is written back with its canonical name.
	fmt.Println(ex.Node.Filter.Type)

	out, err := config.EncodeExport(ex.Node.Child("emails"))
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Stdout.Write(out)
	// Output:
	// Filter master 0
	// Ruleset master.emails 1
	// equals
	// {
	//   "version": "1.1",
	//   "Ruleset": {
	//     "name": "emails",
	//     "rules": [
	//       {
	//         "name": "temperature",
	//         "description": "",
	//         "continue": true,
	//         "active": true,
	//         "constraint": {
	//           "WHERE": null,
	//           "WITH": {
	//             "degrees": {
	//               "from": "${event.payload.body}",
	//               "regex": {
	//                 "match": "([0-9]+) Degrees",
	//                 "group_match_idx": 1,
	//                 "all_matches": false
	//               },
	//               "modifiers_post": []
	//             }
	//           }
	//         },
	//         "actions": [
	//           {
	//             "id": "logger",
	//             "payload": {
	//               "msg": "${_variables.degrees} degrees"
	//             }
	//           }
	//         ]
	//       }
	//     ]
	//   }
	// }
}

func ExampleParseExpr() {
	for _, s := range []string{
		"email",
		"${event.payload.oids.\"SNMPv2-SMI::enterprises.14848.2.1.1.6.0\"}",
		"Host ${event.payload.host} is ${_variables.state}",
		"my item is ${item.name}!",
		"cost: ${}",
		"${events.type}",
	} {
		e, err := config.ParseExpr(s)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		switch e.Kind {
		case config.ExprConstant:
			fmt.Printf("constant %q\n", e.Text)
		case config.ExprSingle:
			fmt.Printf("single accessor, path %v\n", e.Accessor.Path)
		case config.ExprInterpolated:
			fmt.Printf("interpolation of %d parts, constant: %v\n", len(e.Parts), e.IsConstant())
		}
	}
	// Output:
	// constant "email"
	// single accessor, path [payload oids "SNMPv2-SMI::enterprises.14848.2.1.1.6.0"]
	// interpolation of 4 parts, constant: false
	// interpolation of 3 parts, constant: true
	// constant "cost: ${}"
	// error: "${events.type}": unknown accessor root: it must start with event or _variables
}

func ExampleValidate() {
	root := config.NewRoot()
	root.Children = []*config.Node{
		{Kind: config.KindIterator, Name: "alerts", Active: true, Target: "${event.payload.alerts}", Children: []*config.Node{
			{Kind: config.KindIterator, Name: "labels", Active: true, Target: "${event.iterator.item.labels}"},
			{Kind: config.KindRuleset, Name: "per_alert", Rules: []*config.Rule{{
				Name: "critical", Active: true,
				With: map[string]*config.Extractor{
					"host": {From: "${event.iterator.item.host}", Regex: config.ExtractorRegex{Kind: config.RegexIndexed, Pattern: "([a-z]+"}},
				},
				Actions: []*config.Action{{ID: "logger", Payload: map[string]any{"msg": "${_variables.host}"}}},
			}}},
		}},
	}
	err := config.Validate(root)
	fmt.Println(err)

	// Each problem is a *ValidationError that names where it is.
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Path, errors.Is(err, config.ErrNestedIterator), errors.Is(err, config.ErrInvalidRegex))
	}
	// Output:
	// node root.alerts.labels: an iterator may not be nested inside another iterator
	// node root.alerts.per_alert, rule critical, constraint.WITH.host.regex: invalid regular expression: error parsing regexp: missing closing ): `([a-z]+`
	// [root alerts labels] true true
}
