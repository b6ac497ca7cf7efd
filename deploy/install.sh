#!/bin/sh
# Installs a built ledger wheel into a new virtualenv: the image's install step (Dockerfile), and what
# tests/test_wheel.py runs in a clean virtualenv outside the repository.
#   deploy/install.sh WHEEL VENV [EXTRAS]      e.g. deploy/install.sh dist/ledger-0.1.0-py3-none-any.whl /opt/ledger s3
set -eu
wheel=$1
venv=$2
extras=${3:-}
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
if [ -n "$extras" ]; then
    "$venv/bin/python" -m pip install --quiet "ledger[$extras] @ file://$(realpath "$wheel")"
else
    "$venv/bin/python" -m pip install --quiet "$wheel"
fi
"$venv/bin/ledger" version
