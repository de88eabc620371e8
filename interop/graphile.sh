#!/usr/bin/env bash
# graphile-worker (npm), the baseline of the workers' latency: how long a job waits from being
# added to its task starting, with one worker at concurrency 1, measured by
# interop/graphile_latency.mjs on the cluster at URL (a fresh database of its own, dropped after).
#
#   interop/graphile.sh install                  prints the npm prefix graphile-worker is in
#   interop/graphile.sh latency URL [SAMPLES]    prints `[graphile] latency ...` lines (stdout)
#
# URL names a database of the cluster the script may create databases from (the interop suite's
# PHASEO_INTEROP_POSTGRES_URL). SAMPLES defaults to 500, after 50 to warm up.
# First use: `npm install graphile-worker@0.17.3` into $PHASEO_INTEROP_CACHE/node/graphile-worker
# (0.17.3: the newest that runs on Node.js 20; 0.18 needs 22.18). An install that fails is an
# error, never a skip. The figures tests/it/interop/workers_example.rs prints for phaseo-agent's
# workers are measured the same way; benches/README.md ("Workers") has both.
# Env: GRAPHILE_WORKER_VERSION (0.17.3)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GRAPHILE_WORKER_VERSION="${GRAPHILE_WORKER_VERSION:-0.17.3}"
CMD="${1:-}"

install() {
    require_cmd node "install Node.js >= 20.15"
    local prefix
    prefix="$(ensure_npm graphile-worker "graphile-worker@$GRAPHILE_WORKER_VERSION")"
    [[ -f "$prefix/node_modules/graphile-worker/package.json" ]] ||
        die "graphile-worker is not in $prefix after npm install"
    printf '%s\n' "$prefix"
}

case "$CMD" in
    install) install ;;
    latency)
        URL="${2:-}"
        SAMPLES="${3:-500}"
        [[ -n "$URL" ]] || die "usage: $0 latency URL [SAMPLES]"
        [[ "$SAMPLES" =~ ^[0-9]+$ ]] || die "SAMPLES must be a number, got '$SAMPLES'"
        PREFIX="$(install)"
        log "graphile-worker $GRAPHILE_WORKER_VERSION: $SAMPLES jobs, one at a time"
        exec node "$INTEROP_DIR/graphile_latency.mjs" --prefix "$PREFIX" --url "$URL" --samples "$SAMPLES"
        ;;
    *) die "usage: $0 install | latency URL [SAMPLES]" ;;
esac
