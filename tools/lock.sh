#!/usr/bin/env bash
# Rewrites constraints.txt: pyproject.toml's ranges resolved in a fresh venv (`python3.11` unless
# PYTHON names another), then `pip freeze`. Run it after changing a range, then run the tests.
#   tools/lock.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
"${PYTHON:-python3.11}" -m venv "$venv"
"$venv/bin/pip" install -q -e ".[dev]"
header=$(sed -n '/^#/p;/^[^#]/q' constraints.txt)
{ printf '%s\n' "$header"; "$venv/bin/pip" freeze --exclude-editable | grep -v '^lengen' | sed 's/+[a-z0-9.]*$//'; } \
    > constraints.txt.new
mv constraints.txt.new constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) packages"
