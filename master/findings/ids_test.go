package findings_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/store"
)

// TestViewOf_IDs: tool.id and organization.id are the spec's Integers,
// the cluster's ids of the tool code and the tenant; a finding read from
// a cluster that has no ids yet (a master runs a release before feature
// level 6) answers them null, as releases before did.
func TestViewOf_IDs(t *testing.T) {
	f := store.Finding{UID: "u", Tenant: "acme", ToolCode: "leaks", MonitoredDomainID: 7, ResourceURL: "https://example.com/", State: "Unassigned"}
	for _, tc := range []struct {
		toolID, orgID int64
		want          []string
	}{
		{3, 9, []string{`"tool":{"name":"leaks","id":3}`, `"organization":{"name":"acme","id":9}`}},
		{0, 0, []string{`"tool":{"name":"leaks","id":null}`, `"organization":{"name":"acme","id":null}`}},
	} {
		f.ToolID, f.OrgID = tc.toolID, tc.orgID
		b, err := json.Marshal(findings.ViewOf(f))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range append(tc.want, `"monitored_domain":{"name":"domain-7","id":7}`) {
			if !strings.Contains(string(b), w) {
				t.Errorf("ids %d, %d: %s lacks %s", tc.toolID, tc.orgID, b, w)
			}
		}
	}
}
