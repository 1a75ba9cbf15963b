package tornado

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/squallhq/squall/config"
)

func TestRead_fixtures(t *testing.T) {
	t.Parallel()
	fsys := os.DirFS("testdata")
	tests := []struct {
		dir    string
		counts config.Counts
		names  string
	}{
		{"rules.d", config.Counts{Filters: 3, Rules: 12}, "SNMPTRAD ruleset_01 tenant_id_alpha tenant_id_beta"},
		{"v2/test_config", config.Counts{Filters: 6, Iterators: 1, Rules: 4}, "empty_filter master tenant_a"},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			root, err := Read(fsys, tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := config.Validate(root); err != nil {
				t.Fatalf("validate: %v", err)
			}
			// Tornado's sample trees are well within the limits.
			if err := config.CheckLimits(root); err != nil {
				t.Fatalf("limits: %v", err)
			}
			if got := root.Count(); got != tc.counts {
				t.Errorf("counts %+v, want %+v", got, tc.counts)
			}
			var names []string
			for _, c := range root.Children {
				names = append(names, c.Name)
			}
			if got := strings.Join(names, " "); got != tc.names {
				t.Errorf("children %q, want %q", got, tc.names)
			}
		})
	}
	t.Run("an empty directory is the root alone", func(t *testing.T) {
		root, err := Read(fstest.MapFS{"r": {Mode: fs.ModeDir}}, "r")
		if err != nil || root.Count() != (config.Counts{Filters: 1}) {
			t.Fatalf("%v %+v", err, root)
		}
	})
	t.Run("ruleset name comes from its file, not its directory", func(t *testing.T) {
		root, err := Read(fsys, "rules.d")
		if err != nil {
			t.Fatal(err)
		}
		if n := root.Find([]string{"tenant_id_alpha", "tenant_id_alpha_logger"}); n != nil {
			t.Errorf("found the ruleset by its directory name")
		}
		alpha := root.Child("tenant_id_alpha")
		if len(alpha.Children) != 1 || alpha.Children[0].Kind != config.KindRuleset {
			t.Fatalf("alpha: %+v", alpha)
		}
	})
}

func TestRead_errors(t *testing.T) {
	t.Parallel()
	erroneous := func(name string) []byte {
		b, err := os.ReadFile("testdata/v2/erroneous_configs/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	version := &fstest.MapFile{Data: []byte(`{"version": "2.0"}`)}
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"filter_missing_field", fstest.MapFS{"r/version.json": version, "r/x/filter.json": {Data: erroneous("filter_missing_field.json")}}, "name"},
		{"filter_unknown_field", fstest.MapFS{"r/version.json": version, "r/x/filter.json": {Data: erroneous("filter_unknown_field.json")}}, "pippo"},
		{"filter_wrong_data", fstest.MapFS{"r/version.json": version, "r/x/filter.json": {Data: erroneous("filter_wrong_data.json")}}, "name"},
		{"filter_wrong_type", fstest.MapFS{"r/version.json": version, "r/x/filter.json": {Data: erroneous("filter_wrong_type.json")}}, "type"},
		{"config_wrong_version", fstest.MapFS{"r/version.json": {Data: erroneous("config_wrong_version/version.json")}}, "0.0.0"},
		{"old version", fstest.MapFS{"r/version.json": {Data: []byte(`{"version":"1.0"}`)}}, "rules-upgrade"},
		{"dir_missing_node_file", fstest.MapFS{"r/version.json": version, "r/x/filter.json.hidden": {}}, "does not contain"},
		{"filter_extra_file", fstest.MapFS{"r/version.json": version, "r/x/filter.json": {Data: erroneous("filter_extra_file/filter.json")}, "r/x/000000010_rule.json": {Data: erroneous("filter_extra_file/000000010_rule.json")}}, "unexpected file"},
		{"no version", fstest.MapFS{"r/x/filter.json": {Data: erroneous("filter_extra_file/filter.json")}}, "version.json"},
		{"null filter", fstest.MapFS{"r/version.json": version, "r/x/filter.json": {Data: []byte(`{"type":"filter","name":"x","description":"","active":true,"filter":null}`)}}, "filter"},
		{"bad rule", fstest.MapFS{"r/version.json": version, "r/x/ruleset.json": {Data: []byte(`{"type":"ruleset","name":"x"}`)}, "r/x/rules/1_a.json": {Data: []byte(`{"name":"a"}`)}}, "rules/1_a.json"},
		{"missing directory", fstest.MapFS{}, "read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(tc.fsys, "r")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	_, err := Read(fstest.MapFS{"r/x/filter.json": {Data: []byte("{}")}}, "r")
	if !errors.Is(err, ErrLayout) {
		t.Errorf("layout errors are ErrLayout: %v", err)
	}
}
