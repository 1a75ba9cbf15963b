// Package config is Squall's processing-tree model: nodes (Filter, Iterator,
// Ruleset), rules with their WHERE/WITH constraint and actions, operators,
// extractors and modifiers, as plain data.
//
// # Forms
//
// Users write trees in two JSON forms, both decoded strictly (unknown fields
// are errors):
//
//   - The API forms of the v2_beta configuration API: NodeDetails for node
//     create and edit ([DecodeNodeEdit]), and rules ([DecodeRule]) whose
//     extractor regex carries a type tag (Regex, RegexNamedGroups, KeyRegex).
//   - The export file ([DecodeExport], [EncodeExport]):
//     {"version": "1.1", "Filter": {"name": ..., "filter": {...}, "nodes": [...]}}
//     whose rules name the regex variant by key (match, named_match,
//     single_key_match).
//
// Both forms accept both extractor shapes and every operator alias
// (equal, contain, notEquals, ...); output always uses canonical names.
// JSON numbers are kept as [encoding/json.Number] so that integers and
// floats keep their written form.
//
// Decoding rejects unknown fields, a field given twice, and JSON null where a
// value is required (null is accepted only for the optional WHERE, filter,
// group_match_idx, all_matches, is_regex and default_value, and as an
// operator argument or payload value). A rule's name may be omitted, as in
// Tornado's rule files: it decodes as "" and [Validate] rejects it. Errors
// are [*DecodeError] values whose Field is the path inside the document,
// such as Filter.nodes[0].Ruleset.rules[2].constraint.WITH.x.regex.match;
// match their class with errors.Is ([ErrUnknownField], [ErrMissingField],
// [ErrWrongType], [ErrDuplicateField], [ErrInvalidValue], [ErrInvalidOperator]).
//
// # Expressions
//
// Strings in operator arguments, extractor sources, action payloads,
// ReplaceAll replacements and iterator targets are expressions ([ParseExpr]):
// a constant, a single ${...} accessor that resolves to a typed value, or an
// interpolated string.
//
// # Validation
//
// [Validate] checks a whole tree and reports every problem as a
// [*ValidationError] naming the node path, the rule and the field.
//
// The package is pure: no I/O, no network.
package config
