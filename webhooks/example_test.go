package webhooks_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/squallhq/squall/webhooks"
)

func ExampleCollector_Collect() {
	w, err := webhooks.Parse(strings.NewReader(`{
		"id": "github_repository",
		"token": "secret_token",
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
	if !w.CheckToken("secret_token") {
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
		"token": "secret_token",
		"collector_config": {"event_type": "e", "payload": {"ref": "${ref[}"}}
	}`))
	fmt.Println(err)
	// Output:
	// id "my hook": must contain only ASCII letters, digits, '_', '.' and '-'
	// collector_config.payload.ref "${ref[}": invalid JMESPath expression: SyntaxError: Expected tStar, received: tEOF
}

func ExampleSignature_Verify() {
	w, err := webhooks.Parse(strings.NewReader(`{
		"id": "github",
		"token": "t",
		"signature": {"header": "X-Hub-Signature-256", "secret": "It's a Secret to Everybody", "prefix": "sha256="},
		"collector_config": {"event_type": "push", "payload": {}}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body := []byte("Hello, World!")
	fmt.Println(w.Signature.Verify(body, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"))
	fmt.Println(w.Signature.Verify(body, "sha256=0000000000000000000000000000000000000000000000000000000000000000"))
	// Output:
	// true
	// false
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
	w, err := webhooks.Parse(strings.NewReader(`{"id": "h", "token": "do-not-print", "tenant_id": "tenant_a",
		"collector_config": {"event_type": "e", "payload": {}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w)
	// Output:
	// webhook h (max_payload_size=5242880 tenant_id=tenant_a token=[redacted])
}
