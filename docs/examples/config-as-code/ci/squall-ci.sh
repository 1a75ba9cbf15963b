#!/bin/sh
# The CI job of a config-as-code repository (docs/examples/config-as-code).
#
#   ci/squall-ci.sh check   every change: run the rule tests (JUnit report in
#                           rule-tests.xml) and print what would change on the
#                           masters
#   ci/squall-ci.sh apply   the main branch: test, then deploy the tree
#
# Needs squall on PATH, SQUALL_MASTER (a master's URL) and SQUALL_TOKEN_FILE
# (a file holding a token with edit at the root). SQUALL_MESSAGE, if set, is
# recorded with the deploy.
set -eu
cd "$(dirname "$0")/.."

case "${1:-}" in
check)
	squall test --tree tree.json --junit rule-tests.xml tests
	squall tree apply --file tree.json --tests tests --dry-run \
		--master "$SQUALL_MASTER" --token-file "$SQUALL_TOKEN_FILE"
	;;
apply)
	squall tree apply --file tree.json --tests tests \
		--message "${SQUALL_MESSAGE:-applied by CI}" \
		--master "$SQUALL_MASTER" --token-file "$SQUALL_TOKEN_FILE"
	;;
*)
	echo "usage: $0 check|apply" >&2
	exit 2
	;;
esac
