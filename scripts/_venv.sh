# Shared by scripts/test, scripts/demo and scripts/bench*: create or refresh .venv and install the
# project into it. Needs only python3 (>= 3.11) with venv; adb comes from the adbutils wheel.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "crate-harness needs Python >= 3.11, found " + sys.version.split()[0])'
# Say what is happening on a first install (it downloads and takes a few minutes); say nothing
# when there is nothing to do.
if [ ! -x .venv/bin/python ]; then
  echo "scripts: creating .venv in $ROOT (first run)" >&2
  "$PY" -m venv .venv
fi
# reinstall only when the project's dependency list changed since the last install
STAMP=.venv/.crate-harness-installed
WANT="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  if [ -f "$STAMP" ]; then why="pyproject.toml changed"; else why="first run: a few minutes"; fi
  echo "scripts: installing crate-harness and its dependencies into .venv ($why; log: .venv/install.log)" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  if ! .venv/bin/python -m pip install -q -e ".[test,farm]" > .venv/install.log 2>&1; then
    cat .venv/install.log >&2
    echo "scripts: installing crate-harness into .venv failed (log above, also in .venv/install.log)" >&2
    exit 1
  fi
  echo "$WANT" > "$STAMP"
  echo "scripts: .venv is ready (done)" >&2
fi
export PATH="$ROOT/.venv/bin:$PATH"
