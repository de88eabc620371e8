#!/usr/bin/env bash
# server-everything: the reference MCP server of the Model Context Protocol project
# (npm @modelcontextprotocol/server-everything), which our MCP client
# (tests/it/interop/mcp_client.rs) starts as a child process and uses over stdio.
#
#   interop/mcp_everything.sh install   prints the path of the server's entry point;
#                                       run it as `node PATH stdio`
#
# First use: `npm install @modelcontextprotocol/server-everything@2026.8.31` into
# the cache ($PHASEO_INTEROP_CACHE/node/server-everything). Nothing runs until a
# client starts it; the client ends it (the process is the client's child).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

EVERYTHING_VERSION="2026.8.31"
CMD="${1:-}"

install() {
    require_cmd node "install Node.js >= 20.15"
    local prefix js
    prefix="$(ensure_npm server-everything "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION")"
    js="$(npm_bin "$prefix" @modelcontextprotocol/server-everything)"
    [[ -f "$js" ]] || die "server-everything's entry point $js does not exist"
    log "server-everything $EVERYTHING_VERSION: node $js stdio"
    printf '%s\n' "$js"
}

case "$CMD" in
    install) install ;;
    *) die "usage: $0 install" ;;
esac
