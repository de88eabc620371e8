#!/usr/bin/env python3
"""The official Python MCP client (PyPI `mcp`) against our stdio server.

Usage: interop/mcp_server_check.py SERVER_BINARY

Run by interop/mcp_server.sh with the interpreter of the venv that holds
`mcp` (it does not install anything itself). SERVER_BINARY is the built
`mcp_server` example; it is started as `SERVER_BINARY --stdio`.

Checks, each printed as `ok ...` or `FAIL ...`:
  - initialize, and tools/list: exactly ship_order, index_docs, deploy, add,
    with ship_order's title and outputSchema;
  - every tool called: ship_order answers structuredContent (the client also
    checks it against the outputSchema), index_docs sends one progress
    notification per step, deploy asks the person (elicitation, accepted here)
    with the call's arguments shown, add answers 5;
  - bad arguments (`add` with a string) are a result with isError and the
    validation message;
  - a long index_docs call, cancelled by the client after its first progress
    (the client sends notifications/cancelled), is observed by the tool: the
    server's stderr says `index_docs: cancelled after`.
Exit code 0 if every check passed, 1 otherwise.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

EXPECTED_TOOLS = ["ship_order", "index_docs", "deploy", "add"]
FAILURES: list[str] = []


def check(ok: bool, what: str, detail: object = "") -> None:
    if ok:
        print(f"ok   {what}", flush=True)
    else:
        FAILURES.append(what)
        print(f"FAIL {what}: {detail}", flush=True)


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


ASKED: list[str] = []


async def approve(context, params) -> types.ElicitResult:
    ASKED.append(getattr(params, "message", ""))
    return types.ElicitResult(action="accept", content={})


async def run(binary: str, errlog) -> None:
    params = StdioServerParameters(command=binary, args=["--stdio"])
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=30, elicitation_callback=approve) as session:
            init = await session.initialize()
            check(init.server_info.name == "phaseo-example", "initialize", init.server_info)

            listed = await session.list_tools()
            names = [tool.name for tool in listed.tools]
            check(names == EXPECTED_TOOLS, "tools/list names", names)
            by_name = {tool.name: tool for tool in listed.tools}
            ship = by_name.get("ship_order")
            check(ship is not None and ship.title == "Ship an order", "ship_order title", ship)
            check(ship is not None and bool(ship.output_schema), "ship_order outputSchema", ship)
            deploy = by_name.get("deploy")
            hints = deploy.annotations if deploy is not None else None
            check(hints is not None and hints.destructive_hint is True, "deploy annotations", hints)

            shipped = await session.call_tool("ship_order", {"order_id": "A-1", "parcels": 2})
            check(
                not shipped.is_error
                and shipped.structured_content == {"order_id": "A-1", "tracking": ["ZX-A-1-1", "ZX-A-1-2"]},
                "call ship_order: structuredContent",
                shipped,
            )

            progress: list[tuple[float, str | None]] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, message))

            indexed = await session.call_tool("index_docs", {"steps": 3}, progress_callback=on_progress)
            check(text_of(indexed) == '{"indexed_steps":3}', "call index_docs", indexed)
            check(
                [p[0] for p in progress] == [1.0, 2.0, 3.0]
                and json.loads(progress[-1][1] or "null") == {"step": 3, "of": 3},
                "index_docs progress notifications",
                progress,
            )

            deployed = await session.call_tool("deploy", {"environment": "staging"})
            check(text_of(deployed) == 'staging deployed', "call deploy (approved)", deployed)
            check(
                len(ASKED) == 1 and '"environment": "staging"' in ASKED[0],
                "deploy asked the person with the arguments",
                ASKED,
            )

            added = await session.call_tool("add", {"a": 2, "b": 3})
            check(text_of(added) == "5" and not added.is_error, "call add", added)

            bad = await session.call_tool("add", {"a": "two", "b": 3})
            check(
                bad.is_error is True and "Invalid tool input: $.a" in text_of(bad),
                "bad arguments: isError",
                bad,
            )

            # A long call, cancelled once it has made progress.
            started = anyio.Event()

            async def first_progress(value: float, total: float | None, message: str | None) -> None:
                started.set()

            async with anyio.create_task_group() as group:

                async def long_call() -> None:
                    await session.call_tool("index_docs", {"steps": 600}, progress_callback=first_progress)

                group.start_soon(long_call)
                with anyio.fail_after(10):
                    await started.wait()
                group.cancel_scope.cancel()
            # The session still works after a cancelled call.
            again = await session.call_tool("add", {"a": 1, "b": 1})
            check(text_of(again) == "2", "a call after the cancelled one", again)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = sys.argv[1]
    with tempfile.TemporaryFile(mode="w+") as errlog:
        try:
            anyio.run(run, binary, errlog)
        except Exception as error:  # a protocol failure: report it as one
            check(False, "session", repr(error))
        # The server notices the cancellation on its own time: give it a moment.
        deadline = time.monotonic() + 5
        seen = ""
        while time.monotonic() < deadline:
            errlog.seek(0)
            seen = errlog.read()
            if "index_docs: cancelled after" in seen:
                break
            time.sleep(0.1)
        check("index_docs: cancelled after" in seen, "cancelled call observed by the tool", seen[-500:])
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed: {', '.join(FAILURES)}", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
