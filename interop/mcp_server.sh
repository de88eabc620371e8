#!/usr/bin/env bash
# Our MCP server (the `mcp_server` example, on stdio) against the official MCP
# clients. Installs what it needs into the interop cache on first use.
#
#   interop/mcp_server.sh python    BINARY   the Python SDK's client (PyPI mcp==$MCP_PY_VERSION)
#                                            runs interop/mcp_server_check.py: every tool called,
#                                            progress, a cancelled call, isError for bad arguments
#   interop/mcp_server.sh inspector BINARY   the MCP Inspector CLI (npm @modelcontextprotocol/inspector
#                                            @$INSPECTOR_VERSION): `--cli --method tools/list` lists
#                                            exactly the example's four tools
#
# BINARY is the built example (cargo build --example mcp_server); it is started
# as `BINARY --stdio` by the client and ends with it. Exit code 0 on success.
# Env: MCP_PY_VERSION (2.3.0), INSPECTOR_VERSION (2.12.0)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MCP_PY_VERSION="${MCP_PY_VERSION:-2.3.0}"
INSPECTOR_VERSION="${INSPECTOR_VERSION:-2.12.0}"
EXPECTED='["ship_order","index_docs","deploy","add"]'

[[ $# -eq 2 ]] || die "usage: interop/mcp_server.sh python|inspector BINARY"
MODE="$1"
BINARY="$2"
[[ -x "$BINARY" ]] || die "$BINARY is not an executable: build it with cargo build --example mcp_server"

case "$MODE" in
    python)
        VENV="$(ensure_venv venv-mcp "mcp==$MCP_PY_VERSION")"
        exec "$VENV/bin/python" "$INTEROP_DIR/mcp_server_check.py" "$BINARY"
        ;;
    inspector)
        require_cmd node "install Node.js >= 20.15 with npm"
        PREFIX="$(ensure_npm inspector "@modelcontextprotocol/inspector@$INSPECTOR_VERSION")"
        JS="$(npm_bin "$PREFIX" @modelcontextprotocol/inspector mcp-inspector)"
        OUT="$(node "$JS" --cli --method tools/list -- "$BINARY" --stdio 2>>"$INTEROP_RUN/inspector.log")" ||
            die "the inspector failed (log: $INTEROP_RUN/inspector.log)"
        NAMES="$(printf '%s' "$OUT" | node -e '
            let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
                const tools = JSON.parse(s).tools || [];
                console.log(JSON.stringify(tools.map(t => t.name)));
            });')"
        if [[ "$NAMES" != "$EXPECTED" ]]; then
            log "the inspector listed $NAMES, not $EXPECTED; its output:"
            printf '%s\n' "$OUT" >&2
            exit 1
        fi
        log "the inspector listed $NAMES"
        ;;
    *) die "unknown mode '$MODE': python or inspector" ;;
esac
