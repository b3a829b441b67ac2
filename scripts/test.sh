#!/usr/bin/env bash
# Set everything up, lint (ruff, the version pinned in pyproject's test extras), then run the whole
# test suite. pytest's exit code 5 (no tests collected) fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the report page's browser test drives Debian's Chromium (tests/analyses/report/test_page_browser.py);
# install it when missing (CI runs as root with Debian's registry reachable). With CI=true a missing
# browser fails that test instead of skipping it.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    || echo "scripts/test.sh: could not install chromium; the browser test will skip (or fail under CI=true)" >&2
fi
# OMP_WAIT_POLICY=PASSIVE: torch's idle OpenMP threads sleep rather than spin (two test processes
# share two cores; spinning threads made forwards up to 20x slower)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE
.venv/bin/ruff check .
.venv/bin/ruff format --check .
set +e
# two test processes (pytest-xdist), a file's tests kept in one process so its module fixtures (a
# loaded model, the notebooks' kernel) are built once; PYTEST_WORKERS=0: this process alone
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit $rc
