package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// badConfigs lists every file of testdata/bad: export files that must fail
// DecodeExport or, when validation is set, decode and then fail Validate
// with a *ValidationError at path, rule and field. err is the class the
// error must match with errors.Is (nil: a JSON syntax error, no class), msg
// a substring of its message. Each file is a one-point mutation of
// testdata/export/bad_base.input.json.
var badConfigs = []struct {
	file              string
	err               error
	msg               string
	validation        bool
	path, rule, field string
}{
	{file: "unknown_field_top", err: ErrUnknownField, msg: "extra: unknown field"},
	{file: "unknown_field_node", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.pippo: unknown field"},
	{file: "unknown_field_filter_settings", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.filter.pippo: unknown field"},
	{file: "unknown_field_iterator_settings", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[0].Iterator.iterator.filter: unknown field"},
	{file: "unknown_field_ruleset", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.description: unknown field"},
	{file: "ruleset_with_children", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.nodes: unknown field"},
	{file: "unknown_field_rule", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].priority: unknown field"},
	{file: "unknown_field_rule_case", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].Actions: unknown field"},
	{file: "unknown_field_constraint", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHEN: unknown field"},
	{file: "unknown_field_extractor", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.to: unknown field"},
	{file: "unknown_field_regex", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.case_insensitive: unknown field"},
	{file: "unknown_field_regex_key_all_matches", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.all_matches: unknown field"},
	{file: "unknown_field_regex_named_idx", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.group_match_idx: unknown field"},
	{file: "unknown_field_modifier", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].chars: unknown field"},
	{file: "unknown_field_modifier_map", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].default: unknown field"},
	{file: "unknown_field_operator", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.third: unknown field"},
	{file: "unknown_field_operator_regex", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.first: unknown field"},
	{file: "unknown_field_operator_and", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.filter.filter.operator: unknown field"},
	{file: "unknown_field_operator_nested", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.operators[0].operator.third: unknown field"},
	{file: "unknown_field_action", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions[0].retries: unknown field"},
	{file: "unknown_kind_key", err: ErrUnknownField, msg: "Filter.nodes[0].Filter.nodes[0].Rules: unknown field"},
	{file: "unknown_kind_lowercase", err: ErrUnknownField, msg: "filter: unknown field"},
	{file: "missing_version", err: ErrMissingField, msg: "version: missing required field"},
	{file: "missing_kind", err: ErrMissingField, msg: "missing required field: one of Filter, Iterator, Ruleset"},
	{file: "missing_node_name", err: ErrMissingField, msg: "Filter.nodes[0].Filter.name: missing required field"},
	{file: "missing_filter_settings", err: ErrMissingField, msg: "Filter.nodes[0].Filter.filter: missing required field"},
	{file: "missing_filter_condition", err: ErrMissingField, msg: "Filter.nodes[0].Filter.filter.filter: missing required field"},
	{file: "missing_filter_description", err: ErrMissingField, msg: "Filter.nodes[0].Filter.filter.description: missing required field"},
	{file: "missing_filter_active", err: ErrMissingField, msg: "Filter.nodes[0].Filter.filter.active: missing required field"},
	{file: "missing_nodes", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes: missing required field"},
	{file: "missing_iterator_settings", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[0].Iterator.iterator: missing required field"},
	{file: "missing_iterator_target", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[0].Iterator.iterator.target: missing required field"},
	{file: "missing_rules", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules: missing required field"},
	{file: "missing_rule_continue", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].continue: missing required field"},
	{file: "missing_rule_active", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].active: missing required field"},
	{file: "missing_constraint", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint: missing required field"},
	{file: "missing_with", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH: missing required field"},
	{file: "missing_actions", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions: missing required field"},
	{file: "missing_extractor_from", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.from: missing required field"},
	{file: "missing_extractor_regex", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex: missing required field"},
	{file: "missing_regex_pattern", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex: missing required field: one of match, named_match or single_key_match"},
	{file: "missing_regex_typed_pattern", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.single_key_match: missing required field"},
	{file: "missing_operator_type", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.type: missing required field"},
	{file: "missing_operator_second", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.second: missing required field"},
	{file: "missing_operator_operators", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.operators: missing required field"},
	{file: "missing_not_operator", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.operator: missing required field"},
	{file: "missing_regex_operator_target", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.target: missing required field"},
	{file: "empty_operator_in_and", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.operators[0].type: missing required field"},
	{file: "missing_action_id", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions[0].id: missing required field"},
	{file: "missing_action_payload", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions[0].payload: missing required field"},
	{file: "missing_map_mapping", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].mapping: missing required field"},
	{file: "missing_replaceall_replace", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].replace: missing required field"},
	{file: "missing_dateandtime_timezone", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].timezone: missing required field"},
	{file: "missing_modifier_type", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].type: missing required field"},
	{file: "wrong_type_version", err: ErrWrongType, msg: "version: wrong type"},
	{file: "wrong_type_top_array", err: ErrWrongType, msg: "wrong type: expected a JSON object"},
	{file: "wrong_type_node_name", err: ErrWrongType, msg: "Filter.nodes[0].Filter.name: wrong type: got JSON number, want string"},
	{file: "wrong_type_node_not_object", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[0]: wrong type: expected a JSON object"},
	{file: "wrong_type_nodes_object", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes: wrong type"},
	{file: "wrong_type_nodes_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes: wrong type: got JSON null"},
	{file: "wrong_type_rules_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules: wrong type: got JSON null"},
	{file: "wrong_type_active_string", err: ErrWrongType, msg: "Filter.nodes[0].Filter.filter.active: wrong type"},
	{file: "wrong_type_active_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.filter.active: wrong type: got JSON null"},
	{file: "wrong_type_description_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[0].Iterator.iterator.description: wrong type: got JSON null"},
	{file: "wrong_type_filter_array", err: ErrWrongType, msg: "Filter.nodes[0].Filter.filter.filter: wrong type: expected a JSON object"},
	{file: "wrong_type_target_number", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[0].Iterator.iterator.target: wrong type"},
	{file: "wrong_type_rule_name_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].name: wrong type: got JSON null"},
	{file: "wrong_type_continue_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].continue: wrong type: got JSON null"},
	{file: "wrong_type_continue_string", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].continue: wrong type"},
	{file: "wrong_type_constraint_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint: wrong type: expected a JSON object"},
	{file: "wrong_type_with_array", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH: wrong type"},
	{file: "wrong_type_with_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH: wrong type"},
	{file: "wrong_type_actions_object", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions: wrong type"},
	{file: "wrong_type_actions_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions: wrong type"},
	{file: "wrong_type_action_id_number", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions[0].id: wrong type"},
	{file: "wrong_type_payload_string", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions[0].payload: wrong type: expected an object"},
	{file: "wrong_type_payload_array", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions[0].payload: wrong type: expected an object"},
	{file: "wrong_type_payload_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].actions[0].payload: wrong type: expected an object"},
	{file: "wrong_type_from_number", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.from: wrong type"},
	{file: "wrong_type_regex_string", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex: wrong type: expected a JSON object"},
	{file: "wrong_type_group_match_idx_string", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.group_match_idx: wrong type"},
	{file: "wrong_type_group_match_idx_float", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.group_match_idx: wrong type"},
	{file: "wrong_type_all_matches_string", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.all_matches: wrong type"},
	{file: "wrong_type_regex_type_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.type: wrong type: got JSON null"},
	{file: "wrong_type_modifiers_object", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post: wrong type"},
	{file: "wrong_type_modifiers_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post: wrong type: got JSON null"},
	{file: "wrong_type_mapping_value", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].mapping: wrong type"},
	{file: "wrong_type_mapping_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].mapping: wrong type"},
	{file: "wrong_type_is_regex_string", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].is_regex: wrong type"},
	{file: "wrong_type_operator_type_number", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.type: wrong type"},
	{file: "wrong_type_operators_object", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.operators: wrong type"},
	{file: "wrong_type_operators_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.operators: wrong type"},
	{file: "wrong_type_not_operator_null", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.operator: wrong type: expected a JSON object"},
	{file: "wrong_type_regex_operator_target", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.target: wrong type"},
	{file: "wrong_type_where_array", err: ErrWrongType, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE: wrong type: expected a JSON object"},
	{file: "unknown_operator", err: ErrInvalidOperator, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WHERE.type: invalid operator: unknown operator \"startsWith\""},
	{file: "unknown_operator_case", err: ErrInvalidOperator, msg: "Filter.nodes[0].Filter.filter.filter.type: invalid operator: unknown operator \"Equals\""},
	{file: "unknown_operator_true", err: ErrInvalidOperator, msg: "unknown operator \"true\""},
	{file: "unknown_modifier", err: ErrInvalidValue, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.modifiers_post[0].type: invalid value: unknown modifier \"Uppercase\""},
	{file: "unknown_modifier_case", err: ErrInvalidValue, msg: "unknown modifier \"lowercase\""},
	{file: "unknown_regex_type", err: ErrInvalidValue, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.type: invalid value: unknown regex type \"Glob\""},
	{file: "empty_regex_type", err: ErrInvalidValue, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.type: invalid value: unknown regex type \"\""},
	{file: "two_regex_keys", err: ErrInvalidValue, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex: invalid value: only one of match, named_match and single_key_match"},
	{file: "negative_group_match_idx", err: ErrInvalidValue, msg: "Filter.nodes[0].Filter.nodes[1].Ruleset.rules[0].constraint.WITH.x.regex.group_match_idx: invalid value: must not be negative"},
	{file: "bad_version", err: ErrInvalidValue, msg: "version: invalid value: unsupported version \"2.0\""},
	{file: "bad_version_empty", err: ErrInvalidValue, msg: "unsupported version \"\""},
	{file: "two_kind_keys_top", err: ErrInvalidValue, msg: "invalid value: a node has exactly one of Filter, Iterator, Ruleset"},
	{file: "two_kind_keys_nested", err: ErrInvalidValue, msg: "Filter.nodes[0].Filter.nodes[1]: invalid value: a node has exactly one of"},
	{file: "empty_node_object", err: ErrMissingField, msg: "Filter.nodes[0].Filter.nodes[0]: missing required field: one of Filter, Iterator, Ruleset"},
	{file: "duplicate_key_rule", err: ErrDuplicateField, msg: "rules[0].name: duplicate field"},
	{file: "duplicate_key_top", err: ErrDuplicateField, msg: "version: duplicate field"},
	{file: "duplicate_kind_key", err: ErrDuplicateField, msg: "Ruleset: duplicate field"},
	{file: "trailing_data", err: nil, msg: "invalid character '{' after top-level value"},
	{file: "not_json", err: nil, msg: "invalid character"},
	{file: "truncated", err: nil, msg: "unexpected end of JSON input"},
	{file: "empty_file", err: ErrWrongType, msg: "expected a JSON object"},
	{file: "invalid_node_name_space", err: ErrInvalidName, msg: "invalid name", validation: true, path: "root.master tenant", rule: "", field: "name"},
	{file: "invalid_node_name_dots", err: ErrInvalidName, msg: "\"wrong.because.of.dots\"", validation: true, path: "root.master.wrong.because.of.dots", rule: "", field: "name"},
	{file: "invalid_node_name_empty", err: ErrInvalidName, msg: "invalid name: it must match ^[a-zA-Z0-9_]+$: \"\"", validation: true, path: "root.master.", rule: "", field: "name"},
	{file: "invalid_root_name", err: ErrInvalidName, msg: "invalid name", validation: true, path: "root!", rule: "", field: "name"},
	{file: "invalid_rule_name", err: ErrInvalidName, msg: "node root.master.rs, rule a-b, name: invalid name", validation: true, path: "root.master.rs", rule: "a-b", field: "name"},
	{file: "rule_without_name", err: ErrInvalidName, msg: "node root.master.rs, rules[0].name: invalid name", validation: true, path: "root.master.rs", rule: "", field: "rules[0].name"},
	{file: "invalid_rule_name_inactive", err: ErrInvalidName, msg: "rule not valid, name", validation: true, path: "root.master.rs", rule: "not valid", field: "name"},
	{file: "invalid_variable_name", err: ErrInvalidName, msg: "variable \"var.with.dot\"", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.var.with.dot"},
	{file: "invalid_action_id", err: ErrInvalidName, msg: "action id", validation: true, path: "root.master.rs", rule: "r1", field: "actions[0].id"},
	{file: "invalid_action_id_empty", err: ErrInvalidName, msg: "action id \"\"", validation: true, path: "root.master.rs", rule: "r1", field: "actions[0].id"},
	{file: "duplicate_sibling_names", err: ErrDuplicateName, msg: "two children are named \"alerts\"", validation: true, path: "root.master", rule: "", field: "nodes"},
	{file: "duplicate_sibling_filters", err: ErrDuplicateName, msg: "two children are named \"alerts\"", validation: true, path: "root.master", rule: "", field: "nodes"},
	{file: "duplicate_rule_names", err: ErrDuplicateName, msg: "two rules are named \"r1\"", validation: true, path: "root.master.rs", rule: "r1", field: "name"},
	{file: "duplicate_rule_names_inactive", err: ErrDuplicateName, msg: "two rules are named \"r1\"", validation: true, path: "root.master.rs", rule: "r1", field: "name"},
	{file: "nested_iterator_direct", err: ErrNestedIterator, msg: "may not be nested", validation: true, path: "root.master.alerts.inner", rule: "", field: ""},
	{file: "nested_iterator_via_filter", err: ErrNestedIterator, msg: "may not be nested", validation: true, path: "root.master.alerts.f.g.inner", rule: "", field: ""},
	{file: "bad_regex_filter", err: ErrInvalidRegex, msg: "node root.master, filter.regex: invalid regular expression", validation: true, path: "root.master", rule: "", field: "filter.regex"},
	{file: "bad_regex_under_inactive_filter", err: ErrInvalidRegex, msg: "invalid regular expression", validation: true, path: "root.master", rule: "", field: "filter.regex"},
	{file: "bad_regex_where_nested", err: ErrInvalidRegex, msg: "constraint.WHERE.operators[1].operator.regex", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WHERE.operators[1].operator.regex"},
	{file: "bad_regex_extractor", err: ErrInvalidRegex, msg: "node root.master.rs, rule r1, constraint.WITH.x.regex: invalid regular expression: error parsing regexp: missing closing )", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.regex"},
	{file: "bad_regex_extractor_named", err: ErrInvalidRegex, msg: "invalid regular expression", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.regex"},
	{file: "bad_regex_extractor_key", err: ErrInvalidRegex, msg: "missing argument to repetition operator", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.regex"},
	{file: "bad_regex_extractor_inactive_rule", err: ErrInvalidRegex, msg: "invalid regular expression", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.regex"},
	{file: "bad_regex_replaceall", err: ErrInvalidRegex, msg: "constraint.WITH.x.modifiers_post[0].find: invalid regular expression", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.modifiers_post[0].find"},
	{file: "named_match_without_named_groups", err: ErrInvalidRegex, msg: "named_match needs at least one named group", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.regex"},
	{file: "bad_accessor_first", err: ErrUnknownRoot, msg: "constraint.WHERE.first: invalid accessor: \"${pippo}\": unknown accessor root", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WHERE.first"},
	{file: "bad_accessor_second", err: ErrInvalidKey, msg: "invalid accessor", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WHERE.second"},
	{file: "bad_accessor_filter", err: ErrUnknownRoot, msg: "node root.master, filter.first: invalid accessor", validation: true, path: "root.master", rule: "", field: "filter.first"},
	{file: "bad_accessor_regex_target", err: ErrInvalidKey, msg: "an index cannot follow event", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WHERE.target"},
	{file: "bad_accessor_from", err: ErrInvalidKey, msg: "_variables needs a variable name", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.from"},
	{file: "bad_accessor_from_index", err: ErrInvalidKey, msg: "an index cannot follow _variables", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.from"},
	{file: "bad_accessor_replace", err: ErrUnknownRoot, msg: "invalid accessor", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.modifiers_post[0].replace"},
	{file: "bad_accessor_payload", err: ErrEmptyAccessor, msg: "actions[0].payload.a.b[1]: invalid accessor", validation: true, path: "root.master.rs", rule: "r1", field: "actions[0].payload.a.b[1]"},
	{file: "bad_accessor_payload_index", err: ErrInvalidIndex, msg: "invalid array index", validation: true, path: "root.master.rs", rule: "r1", field: "actions[0].payload.msg"},
	{file: "bad_accessor_iterator_index", err: ErrInvalidIndex, msg: "invalid array index", validation: true, path: "root.master.alerts", rule: "", field: "target"},
	{file: "iterator_target_constant", err: ErrNotSimpleTarget, msg: "node root.master.alerts, target: invalid accessor: \"alerts\": not a simple accessor", validation: true, path: "root.master.alerts", rule: "", field: "target"},
	{file: "iterator_target_interpolated", err: ErrNotSimpleTarget, msg: "not a simple accessor", validation: true, path: "root.master.alerts", rule: "", field: "target"},
	{file: "iterator_target_variables", err: ErrNotSimpleTarget, msg: "not a simple accessor", validation: true, path: "root.master.alerts", rule: "", field: "target"},
	{file: "iterator_target_item", err: ErrNotSimpleTarget, msg: "not a simple accessor", validation: true, path: "root.master.alerts", rule: "", field: "target"},
	{file: "iterator_target_unknown_root", err: ErrUnknownRoot, msg: "unknown accessor root", validation: true, path: "root.master.alerts", rule: "", field: "target"},
	{file: "unknown_timezone", err: ErrUnknownTimezone, msg: "constraint.WITH.x.modifiers_post[1].timezone: unknown time zone: \"Europe/Atlantis\"", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.modifiers_post[1].timezone"},
	{file: "timezone_local", err: ErrUnknownTimezone, msg: "unknown time zone: \"Local\"", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.modifiers_post[0].timezone"},
	{file: "timezone_empty", err: ErrUnknownTimezone, msg: "unknown time zone", validation: true, path: "root.master.rs", rule: "r1", field: "constraint.WITH.x.modifiers_post[0].timezone"},
}

func TestBadConfigs(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/bad/*.json")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, c := range badConfigs {
		listed[c.file] = true
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".json"); !listed[name] {
			t.Errorf("%s has no entry in badConfigs", f)
		}
	}
	for _, tt := range badConfigs {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata", "bad", tt.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			ex, err := DecodeExport(data)
			if !tt.validation {
				if err == nil {
					t.Fatalf("DecodeExport succeeded, want an error containing %q", tt.msg)
				}
				if tt.err != nil && !errors.Is(err, tt.err) {
					t.Errorf("DecodeExport error %q is not %v", err, tt.err)
				}
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Errorf("DecodeExport error %q is not a *DecodeError", err)
				}
				if !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("DecodeExport error\n  %s\ndoes not contain\n  %s", err, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeExport: %v", err)
			}
			err = Validate(ex.Node)
			if err == nil {
				t.Fatalf("Validate succeeded, want %v at node %s, rule %q, field %q", tt.err, tt.path, tt.rule, tt.field)
			}
			ve := findValidationError(err, tt.path, tt.rule, tt.field)
			if ve == nil {
				t.Fatalf("no *ValidationError at node %s, rule %q, field %q among:\n%v", tt.path, tt.rule, tt.field, err)
			}
			if !errors.Is(ve, tt.err) {
				t.Errorf("%q is not %v", ve, tt.err)
			}
			if !strings.Contains(ve.Error(), tt.msg) {
				t.Errorf("validation error\n  %s\ndoes not contain\n  %s", ve, tt.msg)
			}
			// A problem is reported once.
			if n := len(validationErrors(err)); n != 1 {
				t.Errorf("Validate reported %d problems, want 1:\n%v", n, err)
			}
		})
	}
}

// validationErrors flattens what Validate returns.
func validationErrors(err error) []*ValidationError {
	var out []*ValidationError
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ve *ValidationError
		if errors.As(err, &ve) {
			out = append(out, ve)
		}
	}
	walk(err)
	return out
}

func findValidationError(err error, path, rule, field string) *ValidationError {
	for _, ve := range validationErrors(err) {
		if PathString(ve.Path) == path && ve.Rule == rule && ve.Field == field {
			return ve
		}
	}
	return nil
}

func TestValidate_Good(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("testdata/export/*.input.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			t.Parallel()
			ex, err := DecodeExport(readFile(t, in))
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(ex.Node); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
	t.Run("implicit root", func(t *testing.T) {
		t.Parallel()
		if err := Validate(NewRoot()); err != nil {
			t.Error(err)
		}
	})
	t.Run("accepted corner cases", func(t *testing.T) {
		t.Parallel()
		rule := &Rule{Name: "r", Active: true, With: map[string]*Extractor{
			// A constant from, a literal ReplaceAll find that is no regex,
			// an unknown root inside an interpolation, ${item} text.
			"v": {From: "constant text", Regex: ExtractorRegex{Kind: RegexIndexed, Pattern: "(t)"},
				Modifiers: []*Modifier{{Type: ModReplaceAll, Find: "(", Replace: "x ${pippo}"}, {Type: ModDateAndTime, Timezone: " UTC "}}},
		}, Actions: []*Action{{ID: "foreach", Payload: map[string]any{
			"target": "${event.payload.list}", "n": json.Number("1"), "nil": nil,
			"actions": []any{map[string]any{"id": "logger", "payload": map[string]any{"msg": "${item.name} ${item}"}}},
		}}}}
		root := &Node{Kind: KindFilter, Name: "root", Active: true, Children: []*Node{
			// The same name at different levels is fine.
			{Kind: KindFilter, Name: "a", Children: []*Node{{Kind: KindFilter, Name: "a"}}},
			{Kind: KindIterator, Name: "it", Target: "${event}", Children: []*Node{
				{Kind: KindRuleset, Name: "rs", Rules: []*Rule{rule}},
			}},
			// Iterators side by side are not nested.
			{Kind: KindIterator, Name: "it2", Target: "${event.payload.x}"},
			// Literal strings inside literal arrays are not accessors.
			{Kind: KindFilter, Name: "lit", Filter: &Operator{Type: OpContains, First: []any{"${.}"}, Second: "${event.type}"}},
		}}
		if err := Validate(root); err != nil {
			t.Error(err)
		}
	})
}

func TestValidate_ReportsEveryProblem(t *testing.T) {
	t.Parallel()
	root := &Node{Kind: KindFilter, Name: "root", Active: true, Children: []*Node{
		{Kind: KindFilter, Name: "a", Filter: &Operator{Type: OpRegex, Regex: "(", Target: "${event.type}"}, Children: []*Node{
			{Kind: KindRuleset, Name: "b", Rules: []*Rule{
				{Name: "r", With: map[string]*Extractor{
					"x": {From: "${event.payload}", Regex: ExtractorRegex{Kind: RegexIndexed, Pattern: "["}},
					"y": {From: "${nope}", Regex: ExtractorRegex{Kind: RegexNamed, Pattern: "(a)"}},
				}},
				{Name: "r", Actions: []*Action{{ID: "bad id", Payload: map[string]any{}}}},
			}},
			{Kind: KindIterator, Name: "i", Target: "${event.payload}", Children: []*Node{
				{Kind: KindIterator, Name: "j", Target: "nope"},
			}},
		}},
		{Kind: KindFilter, Name: "a"},
	}}
	err := Validate(root)
	want := []string{
		"node root, nodes: name is not unique: two children are named \"a\"",
		"node root.a, filter.regex: invalid regular expression: error parsing regexp: missing closing ): `(`",
		"node root.a.b, rule r, constraint.WITH.x.regex: invalid regular expression: error parsing regexp: missing closing ]: `[`",
		"node root.a.b, rule r, constraint.WITH.y.from: invalid accessor: \"${nope}\": unknown accessor root: it must start with event or _variables",
		"node root.a.b, rule r, constraint.WITH.y.regex: invalid regular expression: named_match needs at least one named group (?P<name>...)",
		"node root.a.b, rule r, name: name is not unique: two rules are named \"r\"",
		"node root.a.b, rule r, actions[0].id: invalid name: it must match ^[a-zA-Z0-9_]+$: action id \"bad id\"",
		"node root.a.i.j: an iterator may not be nested inside another iterator",
		"node root.a.i.j, target: invalid accessor: \"nope\": not a simple accessor rooted at event",
	}
	var got []string
	for _, ve := range validationErrors(err) {
		got = append(got, ve.Error())
	}
	// The duplicate is reported when the second "a" is reached, after the
	// first one's subtree.
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Validate reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err.Error() != strings.Join(func() []string {
		var s []string
		for _, ve := range validationErrors(err) {
			s = append(s, ve.Error())
		}
		return s
	}(), "\n") {
		t.Errorf("Error() is not the problems one per line:\n%s", err)
	}
}

func TestValidationError_Error(t *testing.T) {
	t.Parallel()
	cause := errors.New("boom")
	tests := []struct {
		err  *ValidationError
		want string
	}{
		{&ValidationError{Path: []string{"root", "a", "b"}, Rule: "r", Field: "constraint.WITH.x.regex", Err: cause},
			"node root.a.b, rule r, constraint.WITH.x.regex: boom"},
		{&ValidationError{Path: []string{"root", "a"}, Field: "filter.regex", Err: cause}, "node root.a, filter.regex: boom"},
		{&ValidationError{Path: []string{"root", "it"}, Err: cause}, "node root.it: boom"},
		{&ValidationError{Path: []string{"root", "rs"}, Rule: "r", Err: cause}, "node root.rs, rule r: boom"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if !errors.Is(tt.err, cause) {
			t.Errorf("%v does not unwrap to its cause", tt.err)
		}
	}
}

// Trees built in Go (not decoded) can hold what no JSON can; Validate
// reports those too rather than letting the engine trip on them.
func TestValidate_Model(t *testing.T) {
	t.Parallel()
	rs := func(rules ...*Rule) *Node { return &Node{Kind: KindRuleset, Name: "rs", Rules: rules} }
	under := func(n *Node) *Node { return &Node{Kind: KindFilter, Name: "root", Active: true, Children: []*Node{n}} }
	okRule := func() *Rule { return &Rule{Name: "r", With: map[string]*Extractor{}} }
	tests := []struct {
		name              string
		root              *Node
		err               error
		path, rule, field string
	}{
		{name: "nil root", root: nil, err: ErrInvalidNode, path: ""},
		{name: "nil child", root: under(nil), err: ErrInvalidNode, path: "root"},
		{name: "unknown kind", root: under(&Node{Name: "x"}), err: ErrInvalidNode, path: "root.x", field: "type"},
		{name: "ruleset with children", root: under(&Node{Kind: KindRuleset, Name: "x", Children: []*Node{{Kind: KindRuleset, Name: "y"}}}),
			err: ErrInvalidNode, path: "root.x", field: "nodes"},
		{name: "filter with rules", root: under(&Node{Kind: KindFilter, Name: "x", Rules: []*Rule{okRule()}}),
			err: ErrInvalidNode, path: "root.x", field: "rules"},
		{name: "alias in the model", root: under(&Node{Kind: KindFilter, Name: "x", Filter: &Operator{Type: "equal"}}),
			err: ErrInvalidOperator, path: "root.x", field: "filter.type"},
		{name: "unknown operator", root: under(&Node{Kind: KindFilter, Name: "x", Filter: &Operator{Type: "xor"}}),
			err: ErrInvalidOperator, path: "root.x", field: "filter.type"},
		{name: "NOT without operand", root: under(&Node{Kind: KindFilter, Name: "x", Filter: &Operator{Type: OpNot}}),
			err: ErrInvalidOperator, path: "root.x", field: "filter.operator"},
		{name: "nil AND child", root: under(&Node{Kind: KindFilter, Name: "x", Filter: &Operator{Type: OpAnd, Operators: []*Operator{nil}}}),
			err: ErrInvalidOperator, path: "root.x", field: "filter.operators[0]"},
		{name: "nil rule", root: under(rs(okRule(), nil)), err: ErrInvalidNode, path: "root.rs", field: "rules[1]"},
		{name: "nil extractor", root: under(rs(&Rule{Name: "r", With: map[string]*Extractor{"v": nil}})),
			err: ErrInvalidNode, path: "root.rs", rule: "r", field: "constraint.WITH.v"},
		{name: "unknown regex kind", root: under(rs(&Rule{Name: "r", With: map[string]*Extractor{"v": {From: "x"}}})),
			err: ErrInvalidRegex, path: "root.rs", rule: "r", field: "constraint.WITH.v.regex"},
		{name: "nil modifier", root: under(rs(&Rule{Name: "r", With: map[string]*Extractor{"v": {From: "x", Regex: ExtractorRegex{Kind: RegexSingleKey, Pattern: "a"}, Modifiers: []*Modifier{nil}}}})),
			err: ErrInvalidNode, path: "root.rs", rule: "r", field: "constraint.WITH.v.modifiers_post[0]"},
		{name: "unknown modifier", root: under(rs(&Rule{Name: "r", With: map[string]*Extractor{"v": {From: "x", Regex: ExtractorRegex{Kind: RegexSingleKey, Pattern: "a"}, Modifiers: []*Modifier{{Type: "Upper"}}}}})),
			err: ErrInvalidNode, path: "root.rs", rule: "r", field: "constraint.WITH.v.modifiers_post[0].type"},
		{name: "Map without mapping", root: under(rs(&Rule{Name: "r", With: map[string]*Extractor{"v": {From: "x", Regex: ExtractorRegex{Kind: RegexSingleKey, Pattern: "a"}, Modifiers: []*Modifier{{Type: ModMap}}}}})),
			err: ErrInvalidNode, path: "root.rs", rule: "r", field: "constraint.WITH.v.modifiers_post[0].mapping"},
		{name: "nil action", root: under(rs(&Rule{Name: "r", Actions: []*Action{nil}})), err: ErrInvalidNode, path: "root.rs", rule: "r", field: "actions[0]"},
		{name: "nil payload", root: under(rs(&Rule{Name: "r", Actions: []*Action{{ID: "a"}}})), err: ErrInvalidNode, path: "root.rs", rule: "r", field: "actions[0].payload"},
		{name: "unnamed rule's other fields", root: under(rs(&Rule{With: map[string]*Extractor{"v": {From: "${.}", Regex: ExtractorRegex{Kind: RegexSingleKey, Pattern: "a"}}}})),
			err: ErrEmptyAccessor, path: "root.rs", field: "rules[0].constraint.WITH.v.from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Validate(tt.root)
			ve := findValidationError(err, tt.path, tt.rule, tt.field)
			if ve == nil {
				t.Fatalf("no problem at node %q, rule %q, field %q in:\n%v", tt.path, tt.rule, tt.field, err)
			}
			if !errors.Is(ve, tt.err) {
				t.Errorf("%v is not %v", ve, tt.err)
			}
		})
	}
}

func TestValidate_Bounded(t *testing.T) {
	t.Parallel()
	root := &Node{Kind: KindFilter, Name: "root"}
	for range 200 {
		root.Children = append(root.Children, &Node{Kind: KindFilter, Name: "bad name"})
	}
	// 200 invalid names and 199 duplicates, reported up to the bound.
	if n := len(validationErrors(Validate(root))); n != maxValidationErrors {
		t.Errorf("Validate reported %d problems, want %d", n, maxValidationErrors)
	}
}

// Node and rule names are Tornado's: ^[a-zA-Z0-9_]+$ (docs/rules.md, "Rules").
func TestValidName(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"hello", "Hello_WORLD", "_", "1", "__0__C__", "root"} {
		if !ValidName(s) {
			t.Errorf("ValidName(%q) = false", s)
		}
	}
	for _, s := range []string{"", " ", "!", "hello world", "hello!?^ì", "var.with.dot", "a-b", "hello\n", "ünï"} {
		if ValidName(s) {
			t.Errorf("ValidName(%q) = true", s)
		}
	}
}

func TestLoadTimezone(t *testing.T) {
	t.Parallel()
	for _, z := range []string{"Europe/Rome", " Europe/London ", "America/New_York", "UTC"} {
		if _, err := LoadTimezone(z); err != nil {
			t.Errorf("LoadTimezone(%q): %v", z, err)
		}
	}
	for _, z := range []string{"", "Local", "Europe/Atlantis", "../etc/passwd"} {
		if _, err := LoadTimezone(z); !errors.Is(err, ErrUnknownTimezone) {
			t.Errorf("LoadTimezone(%q) error = %v, want ErrUnknownTimezone", z, err)
		}
	}
}

// TestValidateRules: every version of the rules decides as Validate on
// the good and bad trees of testdata (Rules1 is the only version so far),
// and a version this build does not have is an error, not a guess.
func TestValidateRules(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := DecodeExport(b)
		if err != nil {
			continue
		}
		want := Validate(ex.Node)
		for r := Rules1; r <= LatestRules; r++ {
			if got := ValidateRules(ex.Node, r); (got == nil) != (want == nil) {
				t.Errorf("%s: rules %d: %v, Validate: %v", f, r, got, want)
			}
		}
	}
	root := NewRoot()
	edit := &Edit{Op: EditReplaceNode, Path: []string{RootName}, Node: NewRoot()}
	for _, r := range []Rules{0, LatestRules + 1} {
		if err := ValidateRules(root, r); !errors.Is(err, ErrUnknownRules) {
			t.Errorf("ValidateRules with rules %d: %v, want ErrUnknownRules", r, err)
		}
		if _, _, err := edit.ApplyRules(root, 0, r); !errors.Is(err, ErrUnknownRules) {
			t.Errorf("ApplyRules with rules %d: %v, want ErrUnknownRules", r, err)
		}
	}
	if _, _, err := edit.ApplyRules(root, 0, LatestRules); err != nil {
		t.Errorf("ApplyRules with the latest rules: %v", err)
	}
}
