#!/usr/bin/env python3
"""LangGraph's PostgresSaver: the baseline phaseo-agent's durable runs are compared against.

The state saved is a paused tool-using agent run: a `messages` channel of 20
langchain-core messages (user / assistant with a tool call / tool result, about
200 B of text each; the last one an assistant `send_email` call waiting for
approval), a `pending_approval` channel (a dict) and an inline
`branch:to:human_review` channel, with LangGraph-style versions and metadata.

Measured, on the PostgreSQL of URL (tables in their own schema, dropped after):

  latency     one client: put, get_tuple (latest checkpoint of the thread) and
              put + get_tuple, median and p90, with the saver on one connection,
              on a connection pool, and on one connection in pipeline mode.
              Each thread is a run of --run-len checkpoints, each the child of
              the one before (only `messages` gets a new version); then a new
              thread starts.
  throughput  put + get_tuple per second with 1 and with --threads threads on a
              pool of as many connections, each thread on its own thread_id,
              for --seconds each.
  growth      bytes stored (pg_total_relation_size of LangGraph's tables) after
              each count of --growth steps of one growing conversation: every
              step appends an assistant tool call and its tool result to the
              messages and puts a checkpoint, as an agent loop does.

Prints a table; --json PATH writes every figure.

  python langgraph_bench.py --url postgres://postgres@127.0.0.1:15432/phaseo --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from datetime import datetime, timezone
from importlib.metadata import version as pkg_version

import psycopg
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

WORDS = (
    "the a to of and in for on with is that it as be this by from at or your flight hotel "
    "booking customer order invoice refund shipment account request status update schedule "
    "report summary price total amount date time city airport seat please check confirm "
    "cancel change send email draft reply review approve policy balance payment card pending "
    "completed failed options tomorrow monday berlin paris lisbon we you can would need found "
    "results next details reference number ticket support agent"
).split()
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def text(r: random.Random, nbytes: int) -> str:
    words: list[str] = []
    n = 0
    while n < nbytes:
        words.append(r.choice(WORDS))
        n += len(words[-1]) + 1
    return " ".join(words)[: nbytes - 1] + "."


def tool_call(r: random.Random, step: int, name: str | None = None) -> tuple[AIMessage, dict]:
    """An assistant message calling one tool, as an OpenAI-backed chat model returns it."""
    if name == "send_email":
        args = {"to": f"client{r.randint(1, 999)}@example.org", "subject": "Your booking",
                "body": text(r, 120)}
    else:
        name = r.choice(["get_order_status", "search_flights", "lookup_customer"])
        args = {"order_id": f"ORD-{r.randint(100000, 999999)}", "include_items": True}
    call_id = "call_" + uuid.UUID(int=r.getrandbits(128)).hex[:24]
    msg = AIMessage(
        content=text(r, 200),
        id=f"run-{uuid.UUID(int=r.getrandbits(128))}-0",
        tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}],
        additional_kwargs={"tool_calls": [{"id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": json.dumps(args)}}]},
        response_metadata={"model_name": "gpt-4o-2024-08-06", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 900 + 60 * step, "output_tokens": 48,
                        "total_tokens": 948 + 60 * step},
    )
    return msg, {"name": name, "args": args, "id": call_id}


def tool_result(r: random.Random, call: dict) -> ToolMessage:
    return ToolMessage(content=json.dumps({"ok": True, "data": text(r, 170)}),
                       tool_call_id=call["id"], name=call["name"],
                       id=str(uuid.UUID(int=r.getrandbits(128))))


def paused_conversation(seed: int = 7):
    """20 messages, user / assistant tool call / tool result; the last a send_email
    call waiting for approval. Returns (messages, pending_approval)."""
    r = random.Random(seed)
    msgs: list = []
    call: dict = {}
    for i in range(20):
        if i % 3 == 0:
            msgs.append(HumanMessage(content=text(r, 200), id=str(uuid.UUID(int=r.getrandbits(128)))))
        elif i % 3 == 1:
            msg, call = tool_call(r, i, "send_email" if i == 19 else None)
            msgs.append(msg)
        else:
            msgs.append(tool_result(r, call))
    pending = {"tool_call_id": call["id"], "tool_name": call["name"], "args": call["args"],
               "status": "pending", "reason": "send_email requires human approval",
               "requested_at": "2026-09-10T12:00:00+00:00"}
    return msgs, pending


class Thread:
    """One LangGraph thread: checkpoints each the child of the one before, with the
    saver's own version strings; only `messages` changes after the first."""

    def __init__(self, saver: PostgresSaver, thread_id: str):
        self.saver = saver
        self.thread_id = thread_id
        self.config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        nv = saver.get_next_version
        self.versions = {"__start__": nv(None, None), "messages": nv(None, None),
                         "pending_approval": nv(None, None), "branch:to:agent": nv(None, None),
                         "branch:to:human_review": nv(None, None)}
        self.step = 0

    def put(self, msgs, pending) -> dict:
        if self.step == 0:
            new_versions = dict(self.versions)
        else:
            self.versions["messages"] = self.saver.get_next_version(self.versions["messages"], None)
            new_versions = {"messages": self.versions["messages"]}
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": msgs, "pending_approval": pending,
                                "branch:to:human_review": None}
        cp["channel_versions"] = dict(self.versions)
        cp["versions_seen"] = {"__input__": {}, "__start__": {"__start__": self.versions["__start__"]},
                               "agent": {"branch:to:agent": self.versions["branch:to:agent"]}}
        cp["updated_channels"] = list(new_versions)
        metadata = {"source": "loop", "step": self.step, "parents": {}, "run_id": self.thread_id,
                    "graph_id": "support_agent", "user_id": "user_48151623",
                    "interrupt": {"type": "approval", "tool": "send_email"}}
        self.config = self.saver.put(self.config, cp, metadata, new_versions)
        self.step += 1
        return cp

    def get(self):
        return self.saver.get_tuple({"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}})


def check(tup, cp, msgs, pending) -> None:
    assert tup is not None and tup.checkpoint["id"] == cp["id"], "get_tuple did not return the last put"
    values = tup.checkpoint["channel_values"]
    assert values["messages"] == msgs, "messages did not round-trip"
    last_call = next(m for m in reversed(msgs) if isinstance(m, AIMessage))
    assert next(m for m in reversed(values["messages"]) if isinstance(m, AIMessage)).tool_calls \
        == last_call.tool_calls
    assert values["pending_approval"] == pending, "pending_approval did not round-trip"


def stats(ns: list[int]) -> dict:
    ms = sorted(x / 1e6 for x in ns)
    return {"n": len(ms), "median_ms": statistics.median(ms),
            "p90_ms": ms[min(len(ms) - 1, int(0.9 * len(ms)))], "mean_ms": statistics.fmean(ms)}


class Runs:
    """Thread ids for one client: a new thread every `run_len` checkpoints."""

    def __init__(self, saver: PostgresSaver, prefix: str, run_len: int):
        self.saver, self.prefix, self.run_len, self.n = saver, prefix, run_len, 0
        self.current = Thread(saver, f"{prefix}-0")
        self.done: list[Thread] = []

    def next(self) -> Thread:
        if self.current.step >= self.run_len:
            self.done.append(self.current)
            self.n += 1
            self.current = Thread(self.saver, f"{self.prefix}-{self.n}")
        return self.current


def latency(saver, msgs, pending, iters: int, warmup: int, run_len: int, tag: str) -> dict:
    runs = Runs(saver, tag, run_len)
    for _ in range(warmup):
        t = runs.next()
        cp = t.put(msgs, pending)
        check(t.get(), cp, msgs, pending)
    out = {}
    gc.collect()
    lat = []
    for _ in range(iters):
        t = runs.next()
        t0 = time.perf_counter_ns()
        t.put(msgs, pending)
        lat.append(time.perf_counter_ns() - t0)
    out["put"] = stats(lat)
    gc.collect()
    threads = runs.done + [runs.current]
    lat = []
    for i in range(iters):
        t = threads[i % len(threads)]
        t0 = time.perf_counter_ns()
        tup = t.get()
        lat.append(time.perf_counter_ns() - t0)
        assert tup is not None
    out["get_tuple"] = stats(lat)
    gc.collect()
    lat = []
    for _ in range(iters):
        t = runs.next()
        t0 = time.perf_counter_ns()
        cp = t.put(msgs, pending)
        tup = t.get()
        lat.append(time.perf_counter_ns() - t0)
        check(tup, cp, msgs, pending)
    out["put_get"] = stats(lat)
    return out


def throughput(url: str, conn_kwargs: dict, msgs, pending, n_threads: int, seconds: float,
               run_len: int, shared: bool) -> dict:
    """put + get_tuple as fast as n_threads threads go, each on its own thread ids,
    on one pool of n_threads connections. `shared`: all threads call one
    PostgresSaver (which holds a lock around every call, pool or not); else each
    thread has its own PostgresSaver on the shared pool."""
    with ConnectionPool(url, min_size=n_threads, max_size=n_threads, kwargs=conn_kwargs, open=True) as pool:
        pool.wait()
        shared_saver = PostgresSaver(pool)
        lat: list[list[int]] = [[] for _ in range(n_threads)]
        start = threading.Barrier(n_threads + 1)
        deadline = [0.0]
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            try:
                saver = shared_saver if shared else PostgresSaver(pool)
                runs = Runs(saver, f"tp{n_threads}-{k}-{uuid.uuid4().hex[:6]}", run_len)
                for _ in range(20):
                    t = runs.next()
                    t.put(msgs, pending)
                    t.get()
                start.wait()
                while time.perf_counter() < deadline[0]:
                    t = runs.next()
                    t0 = time.perf_counter_ns()
                    cp = t.put(msgs, pending)
                    tup = t.get()
                    lat[k].append(time.perf_counter_ns() - t0)
                    assert tup.checkpoint["id"] == cp["id"]
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                errors.append(e)
                start.abort()

        workers = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
        for w in workers:
            w.start()
        deadline[0] = time.perf_counter() + 3600
        start.wait()
        t0 = time.perf_counter()
        deadline[0] = t0 + seconds
        for w in workers:
            w.join()
        wall = time.perf_counter() - t0
        if errors:
            raise errors[0]
    all_lat = [x for per in lat for x in per]
    return {"threads": n_threads, "saver": "shared" if shared else "per thread", "seconds": wall, "put_get": len(all_lat),
            "put_get_per_s": len(all_lat) / wall, **{f"latency_{k}": v for k, v in stats(all_lat).items()}}


def sizes(admin) -> dict:
    out = {t: admin.execute("SELECT pg_total_relation_size(%s::regclass) AS s", (t,)).fetchone()["s"]
           for t in TABLES}
    out["total"] = sum(out[t] for t in TABLES)
    row = admin.execute("SELECT count(*) AS n, coalesce(sum(octet_length(blob)), 0) AS raw "
                        "FROM checkpoint_blobs").fetchone()
    out["blob_rows"], out["blob_bytes_raw"] = row["n"], row["raw"]
    out["checkpoint_rows"] = admin.execute("SELECT count(*) AS n FROM checkpoints").fetchone()["n"]
    return out


def growth(saver, admin, counts: list[int]) -> list[dict]:
    """One conversation growing by an assistant tool call and its tool result per step."""
    admin.execute("TRUNCATE " + ", ".join(TABLES))
    r = random.Random(11)
    msgs: list = [HumanMessage(content=text(r, 200), id=str(uuid.UUID(int=r.getrandbits(128))))]
    pending = {"status": "none"}
    t = Thread(saver, "growth")
    out = []
    put_ns: list[int] = []
    for step in range(1, max(counts) + 1):
        msg, call = tool_call(r, step)
        msgs = msgs + [msg, tool_result(r, call)]
        t0 = time.perf_counter_ns()
        cp = t.put(msgs, pending)
        put_ns.append(time.perf_counter_ns() - t0)
        if step in counts:
            gets = []
            for _ in range(5):
                g0 = time.perf_counter_ns()
                tup = t.get()
                gets.append(time.perf_counter_ns() - g0)
            check(tup, cp, msgs, pending)
            _, blob = saver.serde.dumps_typed(msgs)
            row = {"steps": step, "messages": len(msgs), "conversation_bytes": len(blob),
                   "last_put_ms": statistics.median(put_ns[-5:]) / 1e6,
                   "get_ms": statistics.median(gets) / 1e6, **sizes(admin)}
            row["bytes_per_step"] = row["total"] / step
            row["stored_over_conversation"] = row["total"] / len(blob)
            out.append(row)
            print(f"  growth: {step} steps, {row['total'] / 1e6:.2f} MB stored", file=sys.stderr, flush=True)
    return out


def serve(a, kwargs: dict, pool_kwargs: dict, msgs, pending) -> None:
    """Rounds told by another process (the durable bench), one command a line on stdin, one JSON
    line on stdout each:

      hello                  -> versions and the server
      latency N              -> N put + get_tuple on one connection (what `from_conn_string`
                                makes), in pipeline mode unless --serve-saver connection (the
                                best of the three in the latency part); {"ms": per operation}
      throughput T N         -> T threads on a pool of T connections, a saver per thread (its
                                best), each doing N put + get_tuple after a barrier;
                                {"ms": wall time / (T * N)}
      quit

    Every round trip is checked outside the timer."""
    def answer(obj) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    stack = ExitStack()
    conn = stack.enter_context(psycopg.connect(**kwargs))
    if a.serve_saver == "pipeline":
        saver = PostgresSaver(conn, stack.enter_context(conn.pipeline()))
    else:
        saver = PostgresSaver(conn)
    one = Runs(saver, "serve-1", a.run_len)
    pools: dict[int, tuple] = {}
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "hello":
            answer({"langgraph-checkpoint-postgres": pkg_version("langgraph-checkpoint-postgres"),
                    "langgraph-checkpoint": pkg_version("langgraph-checkpoint"),
                    "psycopg": pkg_version("psycopg"), "psycopg_impl": psycopg.pq.__impl__,
                    "saver": f"one connection ({a.serve_saver}), autocommit, prepare_threshold=0; "
                             "threads: a pool, a saver per thread"})
        elif cmd[0] == "latency":
            n = int(cmd[1])
            gc.collect()
            total = 0
            for _ in range(n):
                t = one.next()
                t0 = time.perf_counter_ns()
                cp = t.put(msgs, pending)
                tup = t.get()
                total += time.perf_counter_ns() - t0
                check(tup, cp, msgs, pending)
            answer({"ms": total / n / 1e6})
        elif cmd[0] == "throughput":
            threads, n = int(cmd[1]), int(cmd[2])
            if threads not in pools:
                pool = ConnectionPool(a.url, min_size=threads, max_size=threads, kwargs=pool_kwargs,
                                      open=True)
                pool.wait()
                pools[threads] = (pool, [Runs(PostgresSaver(pool), f"serve-{threads}-{k}", a.run_len)
                                         for k in range(threads)])
            _, runs = pools[threads]
            barrier = threading.Barrier(threads + 1)
            errors: list[BaseException] = []

            def worker(r: Runs) -> None:
                try:
                    barrier.wait()
                    for _ in range(n):
                        t = r.next()
                        cp = t.put(msgs, pending)
                        tup = t.get()
                        assert tup.checkpoint["id"] == cp["id"]
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)
                    barrier.abort()

            gc.collect()
            workers = [threading.Thread(target=worker, args=(r,)) for r in runs]
            for w in workers:
                w.start()
            barrier.wait()
            t0 = time.perf_counter_ns()
            for w in workers:
                w.join()
            wall = time.perf_counter_ns() - t0
            if errors:
                raise errors[0]
            answer({"ms": wall / (threads * n) / 1e6})
        else:
            raise SystemExit(f"unknown command {line!r}")
    for pool, _ in pools.values():
        pool.close()
    stack.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="postgres://... of the cluster")
    ap.add_argument("--schema", default="langgraph_bench",
                    help="schema for LangGraph's tables (dropped after)")
    ap.add_argument("--iters", type=int, default=1000, help="timed operations of each kind per repeat")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3,
                    help="repeats of the latency part, configurations interleaved")
    ap.add_argument("--run-len", type=int, default=100, help="checkpoints per thread before a new one starts")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of each throughput run")
    ap.add_argument("--growth", default="10,100,1000", help="step counts of the growth part ('' to skip)")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--keep", action="store_true", help="keep the schema and its tables")
    ap.add_argument("--serve", action="store_true",
                    help="measure rounds told on stdin (see serve()); for benches/durable.rs")
    ap.add_argument("--serve-saver", choices=("pipeline", "connection"), default="pipeline",
                    help="--serve: the one-client saver's connection")
    a = ap.parse_args()

    kwargs = {"conninfo": a.url, "autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
              "options": f"-c search_path={a.schema}"}
    pool_kwargs = {k: v for k, v in kwargs.items() if k != "conninfo"}
    msgs, pending = paused_conversation()
    result: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "args": vars(a)}

    with psycopg.connect(a.url, autocommit=True, row_factory=dict_row) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{a.schema}" CASCADE')
        admin.execute(f'CREATE SCHEMA "{a.schema}"')
        admin.execute(f'SET search_path = "{a.schema}"')
        try:
            with psycopg.connect(**kwargs) as conn:
                saver = PostgresSaver(conn)
                saver.setup()
                _, blob = saver.serde.dumps_typed(msgs)
                result["env"] = {
                    "python": platform.python_version(),
                    **{p: pkg_version(p) for p in ("langgraph-checkpoint", "langgraph-checkpoint-postgres",
                                                   "langchain-core", "psycopg", "psycopg-pool", "ormsgpack")},
                    "psycopg_impl": psycopg.pq.__impl__, "libpq": psycopg.pq.version(),
                    "server": admin.execute("SHOW server_version").fetchone()["server_version"],
                    "settings": {r["name"]: r["s"] for r in admin.execute(
                        "SELECT name, current_setting(name) AS s FROM pg_settings WHERE name IN "
                        "('fsync', 'synchronous_commit', 'wal_sync_method', 'full_page_writes', "
                        "'shared_buffers')")},
                    "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
                    "messages_blob_bytes": len(blob),
                }
            print(json.dumps(result["env"]), file=sys.stderr, flush=True)
            if a.serve:
                serve(a, kwargs, pool_kwargs, msgs, pending)
                return 0

            # --- latency, one client: three ways to give the saver its connection ---
            def connection():
                conn = psycopg.connect(**kwargs)
                return PostgresSaver(conn), conn.close

            def pool():
                p = ConnectionPool(a.url, min_size=1, max_size=1, kwargs=pool_kwargs, open=True)
                p.wait()
                return PostgresSaver(p), p.close

            def pipeline():
                stack = ExitStack()
                conn = stack.enter_context(psycopg.connect(**kwargs))
                return PostgresSaver(conn, stack.enter_context(conn.pipeline())), stack.close

            configs = {"connection": connection, "pool": pool, "pipeline": pipeline}
            per_rep: dict[str, list[dict]] = {c: [] for c in configs}
            for rep in range(a.repeats):
                for name, make in configs.items():
                    admin.execute("TRUNCATE " + ", ".join(TABLES))
                    saver, close = make()
                    try:
                        r = latency(saver, msgs, pending, a.iters, a.warmup, a.run_len, f"{name}-{rep}")
                    finally:
                        close()
                    per_rep[name].append(r)
                    print(f"  rep {rep} {name:10s} " + "  ".join(
                        f"{op} {r[op]['median_ms']:.3f} ms" for op in r), file=sys.stderr, flush=True)
            result["latency"] = {
                name: {op: {"median_ms": statistics.median(x[op]["median_ms"] for x in reps),
                            "p90_ms": statistics.median(x[op]["p90_ms"] for x in reps),
                            "median_ms_per_repeat": [x[op]["median_ms"] for x in reps]}
                       for op in reps[0]}
                for name, reps in per_rep.items()}

            # --- throughput on a pool -----------------------------------------------
            admin.execute("TRUNCATE " + ", ".join(TABLES))
            result["throughput"] = []
            for n, shared in [(1, False), (a.threads, False), (a.threads, True)]:
                tp = throughput(a.url, pool_kwargs, msgs, pending, n, a.seconds, a.run_len, shared)
                result["throughput"].append(tp)
                print(f"  throughput {n} threads, {tp['saver']} saver: {tp['put_get_per_s']:.0f} put+get/s",
                      file=sys.stderr, flush=True)

            # --- storage growth -----------------------------------------------------
            if a.growth:
                with psycopg.connect(**kwargs) as conn:
                    result["growth"] = growth(PostgresSaver(conn), admin,
                                              [int(x) for x in a.growth.split(",")])
            result["env"]["loadavg_end"] = os.getloadavg()
        finally:
            if not a.keep:
                admin.execute(f'DROP SCHEMA IF EXISTS "{a.schema}" CASCADE')

    report(result)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
        print(f"\nJSON: {a.json}")
    return 0


def report(res: dict) -> None:
    env = res["env"]
    print(f"\nLangGraph PostgresSaver ({env['langgraph-checkpoint-postgres']}, langgraph-checkpoint "
          f"{env['langgraph-checkpoint']}, psycopg {env['psycopg']} {env['psycopg_impl']}), "
          f"PostgreSQL {env['server']}, " + " ".join(f"{k}={v}" for k, v in sorted(env["settings"].items())))
    a = res["args"]
    print(f"paused conversation: 20 messages, messages blob {env['messages_blob_bytes']} B msgpack\n")
    print(f"latency, one client ({a['repeats']} x {a['iters']} of each; median of the repeats' medians, ms; "
          f"a thread is a run of {a['run_len']} checkpoints)")
    print(f"{'saver on':12s} {'put':>8s} {'get_tuple':>10s} {'put+get':>9s} {'put+get p90':>12s}")
    for name, ops in res["latency"].items():
        print(f"{name:12s} {ops['put']['median_ms']:8.3f} {ops['get_tuple']['median_ms']:10.3f} "
              f"{ops['put_get']['median_ms']:9.3f} {ops['put_get']['p90_ms']:12.3f}")
    print(f"\nthroughput, pool of N connections, each thread its own thread_ids, {a['seconds']:.0f} s")
    print(f"{'threads':>7s} {'PostgresSaver':>14s} {'put+get/s':>10s} {'median ms':>10s} {'p90 ms':>8s}")
    for tp in res["throughput"]:
        print(f"{tp['threads']:7d} {tp['saver']:>14s} {tp['put_get_per_s']:10.0f} "
              f"{tp['latency_median_ms']:10.3f} {tp['latency_p90_ms']:8.3f}")
    if res.get("growth"):
        print("\nstorage growth, one conversation, +1 tool call +1 tool result and a checkpoint per step")
        print(f"{'steps':>6s} {'messages':>8s} {'conversation':>13s} {'stored':>12s} {'per step':>10s} "
              f"{'stored/conv':>11s} {'put ms':>7s} {'get ms':>7s}")
        for g in res["growth"]:
            print(f"{g['steps']:6d} {g['messages']:8d} {g['conversation_bytes']:13,d} {g['total']:12,d} "
                  f"{g['bytes_per_step']:10,.0f} {g['stored_over_conversation']:10.1f}x "
                  f"{g['last_put_ms']:7.2f} {g['get_ms']:7.2f}")
        print("(conversation: msgpack of the messages; stored: pg_total_relation_size of checkpoints, "
              "checkpoint_blobs, checkpoint_writes)")


if __name__ == "__main__":
    sys.exit(main())
