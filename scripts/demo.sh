#!/usr/bin/env bash
# The main job on the built-in default: installs, builds, then generates text with the
# synthetic tiny model (created on first use; random weights, so the text is meaningless).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/orchard generate "$@"
