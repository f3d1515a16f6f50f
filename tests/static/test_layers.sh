#!/bin/sh
# make check: the house's layers (tests/static/layers.py says which).
exec "${PYTHON3:-python3}" "${SK_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/static/layers.py"
