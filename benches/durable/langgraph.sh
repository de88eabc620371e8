#!/usr/bin/env bash
# LangGraph's PostgresSaver on the cluster at URL: the baseline of the durable
# runs (see langgraph_bench.py for what it measures).
#
#   benches/durable/langgraph.sh URL [langgraph_bench.py options...]
#
# First use: a venv $PHASEO_INTEROP_CACHE/venv-langgraph with pinned
# langgraph-checkpoint-postgres, langgraph-checkpoint, langchain-core, psycopg
# (binary) and psycopg-pool from PyPI (the interop suite's cache and helpers,
# interop/lib.sh). Prints the table on stdout; the JSON goes to
# $PHASEO_INTEROP_CACHE/durable/langgraph-DATE.json unless --json is given.
# shellcheck source-path=SCRIPTDIR source=../../interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../interop/lib.sh"

URL="${1:-}"
[[ -n "$URL" && "$URL" != -* ]] || die "usage: $0 URL [langgraph_bench.py options...]"
shift
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

VENV="$(ensure_venv venv-langgraph \
    "langgraph-checkpoint-postgres==3.2.0" "langgraph-checkpoint==4.3.2" "langchain-core==1.8.3" \
    "psycopg[binary]==3.3.9" "psycopg-pool==3.3.3")"

ARGS=("$@")
if [[ " ${ARGS[*]} " != *" --json "* ]]; then
    mkdir -p "$INTEROP_CACHE/durable"
    ARGS+=(--json "$INTEROP_CACHE/durable/langgraph-$(date -u +%Y%m%dT%H%M%SZ).json")
fi
exec "$VENV/bin/python" "$HERE/langgraph_bench.py" --url "$URL" "${ARGS[@]}"
