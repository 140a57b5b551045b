# What every e2e runner needs before its tests (sourced by run.sh and network.sh): the test
# data (stories260K and its goldens, in the repository's tests/data; else exit 77, CTest's
# SKIP_RETURN_CODE, or a failure with CI=true), the binary, Node 18+ and npm, and the npm
# packages pinned by package-lock.json. Expects `binary` set; sets `here`, `repo`, `data`,
# `model` (stories260K) and makes `binary` absolute.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
data=${ORCHARD_TEST_DATA:-$repo/tests/data}
model=$data/models/stories260K.gguf
if [[ ! -f $model ]]; then
  if [[ ${CI:-} == true || ${CI:-} == 1 ]]; then
    echo "e2e: CI=true but $model is absent" >&2
    exit 1
  fi
  echo "e2e: SKIPPED: $model not found (set ORCHARD_TEST_DATA to a folder with models/ and golden/)"
  exit 77
fi
if [[ ! -x $binary ]]; then
  echo "e2e: $binary is not an executable: build it (ninja -C build orchard) or pass its path" >&2
  exit 1
fi
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "e2e: node and npm are needed: run scripts/install-deps.sh" >&2
  exit 1
fi
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'; then
  echo "e2e: node $(node --version) is too old: 18 or newer is needed" >&2
  exit 1
fi

# The npm packages (versions pinned by package-lock.json), installed again when the lock changed.
cd "$here"
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "e2e: npm ci"
  npm ci --no-audit --no-fund
fi
