package webhooks_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/squallhq/squall/webhooks"
)

func ExampleCollector_Collect() {
	w, err := webhooks.Parse(strings.NewReader(`{
		"id": "github_repository",
		"token": "a-long-random-token",
		"collector_config": {
			"event_type": "${commits[0].committer.name}",
			"payload": {
				"source": "github",
				"ref": "${ref}",
				"owner_id": "${repository.owner.id}",
				"commits": "${length(commits)}",
				"missing": "${no.such.field}",
				"greeting": "Hello ${name}"
			}
		}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	if !w.CheckToken("a-long-random-token") {
		fmt.Println("401")
		return
	}
	body := []byte(`{
		"ref": "refs/heads/main",
		"repository": {"owner": {"id": 960885}},
		"commits": [{"committer": {"name": "GitHub"}}]
	}`)
	ev, err := w.Collector().Collect(body, time.UnixMilli(1554130814854), "master")
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := json.MarshalIndent(ev, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "type": "GitHub",
	//   "created_ms": 1554130814854,
	//   "metadata": {
	//     "tenant_id": "master"
	//   },
	//   "payload": {
	//     "commits": 1,
	//     "greeting": "Hello ${name}",
	//     "missing": null,
	//     "owner_id": 960885,
	//     "ref": "refs/heads/main",
	//     "source": "github"
	//   }
	// }
}

func ExampleParse_error() {
	_, err := webhooks.Parse(strings.NewReader(`{
		"id": "my hook",
		"token": "a-long-random-token",
		"collector_config": {"event_type": "e", "payload": {"ref": "${ref[}"}}
	}`))
	fmt.Println(err)
	// Output:
	// id "my hook": must contain only ASCII letters, digits, '_', '.' and '-'
	// collector_config.payload.ref "${ref[}": invalid JMESPath expression: SyntaxError: Expected tStar, received: tEOF
}

// A Stripe webhook with two secrets during a rotation: the request is
// signed with the second.
func ExampleWebhook_signature() {
	w, err := webhooks.Parse(strings.NewReader(`{
		"id": "payments",
		"token": "a-long-test-token",
		"signature": {"scheme": "stripe", "secrets": ["whsec_new", "whsec_old"], "tolerance": "5m"},
		"collector_config": {"event_type": "${type}", "payload": {}}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body := []byte(`{"type": "charge.succeeded"}`)
	now := time.Unix(1700000000, 0)
	h := http.Header{}
	h.Set("Stripe-Signature", "t=1700000000,v1=e076e363b6f8a8863f08888c7eaf046192c3202e7a746a93077c94b0c532d341")
	fmt.Println(w.Signature.Verify(h, body, now))
	fmt.Println(w.Signature.Verify(h, body, now.Add(10*time.Minute)))
	h.Set("Stripe-Signature", "t=1700000000,v1=00")
	fmt.Println(w.Signature.Verify(h, body, now))
	// Output:
	// 1 <nil>
	// -1 signature header Stripe-Signature: timestamp outside the tolerance
	// -1 signature header Stripe-Signature: no signature matches
}

func ExampleParseSize() {
	for _, s := range []string{"12345", "2m", "512KiB", "invalid"} {
		n, err := webhooks.ParseSize(s)
		fmt.Println(s, n, err != nil)
	}
	// Output:
	// 12345 12345 false
	// 2m 2097152 false
	// 512KiB 524288 false
	// invalid 0 true
}

func ExampleWebhook_String() {
	w, err := webhooks.Parse(strings.NewReader(`{"id": "h", "token": "do-not-print-this-token", "tenant_id": "tenant_a",
		"collector_config": {"event_type": "e", "payload": {}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w)
	// Output:
	// webhook h (max_payload_size=5242880 tenant_id=tenant_a token=[redacted])
}
