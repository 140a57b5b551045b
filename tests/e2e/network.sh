#!/usr/bin/env bash
# End-to-end test of the volunteer network: a coordinator and three node agents on localhost
# (two single machines and one 2-rank tensor-parallel group), jobs through the official openai
# client. network.test.mjs starts and stops the processes itself; their logs go to
# ORCHARD_ARTIFACTS/network/.
#
#   tests/e2e/network.sh [ORCHARD_BINARY [TEST_FILE]]     (default network.test.mjs)
#
# Environment and exit status as run.sh's (77: skipped, no test data).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
binary=${1:-${ORCHARD_BINARY:-$here/../../build/orchard}}

source "$here/prepare.sh"

artifacts=${ORCHARD_ARTIFACTS:-$(dirname "$binary")/e2e-artifacts}
mkdir -p "$artifacts"
artifacts=$(cd "$artifacts" && pwd)

export ORCHARD_BINARY=$binary ORCHARD_MODEL=$model ORCHARD_TEST_DATA=$data ORCHARD_ARTIFACTS=$artifacts
test_file=${2:-network.test.mjs}
echo "e2e: node --test $test_file (process logs: $artifacts/network/)"
node --test --test-reporter=spec "$test_file"
