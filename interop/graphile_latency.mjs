// graphile-worker's latency from a job added to its task started, with graphile-worker's public
// API: one worker (`run()`, concurrency 1) in this process, jobs added one at a time through
// `makeWorkerUtils().addJob` (a pool of its own, as another process's would be). Each job waits
// for the worker to be idle again before it is added: the previous job's row is gone (completed)
// and 10 ms have passed, so every sample is "an idle worker hears of a new job", as the Rust
// test of phaseo-agent's workers measures it (tests/it/interop/workers_example.rs).
//
//   node interop/graphile_latency.mjs --prefix NPM_PREFIX --url URL [--samples 500] [--warmup 50]
//
// NPM_PREFIX holds node_modules/graphile-worker (interop/graphile.sh installs it). URL names a
// database of a cluster where this may create one: the measurement runs in a fresh database,
// dropped at the end. Prints two `[graphile] latency` lines (from addJob called, and from addJob
// returned, to the task's first line) and one `[graphile] json` line; exits non-zero on failure.

import { createRequire } from "node:module";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

const args = Object.fromEntries(
  process.argv
    .slice(2)
    .reduce((pairs, word, i, all) => (i % 2 === 0 ? [...pairs, [word.replace(/^--/, ""), all[i + 1]]] : pairs), []),
);
if (!args.prefix || !args.url) {
  console.error("usage: graphile_latency.mjs --prefix NPM_PREFIX --url URL [--samples N] [--warmup N]");
  process.exit(2);
}
const SAMPLES = Number(args.samples ?? 500);
const WARMUP = Number(args.warmup ?? 50);
const SETTLE_MS = 10;
const START_TIMEOUT_MS = 10_000;

const require = createRequire(path.join(path.resolve(args.prefix), "package.json"));
const { run, makeWorkerUtils, Logger } = require("graphile-worker");
const { Client } = require("pg");
const version = require("graphile-worker/package.json").version;

/** `url` with its database replaced by `database`. */
function withDatabase(url, database) {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function admin(url, sql) {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** avg, p50, p99, max of milliseconds (nearest rank). */
function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (q) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
  const avg = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  return { avg, p50: rank(0.5), p99: rank(0.99), max: sorted[sorted.length - 1] };
}

const show = (s) =>
  `avg ${s.avg.toFixed(2)} ms, p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms, max ${s.max.toFixed(2)} ms`;

async function measure(url) {
  const started = new Map(); // job id -> resolve(time the task began)
  const silent = new Logger(() => () => {});
  const runner = await run({
    connectionString: url,
    concurrency: 1,
    noHandleSignals: true,
    logger: silent,
    taskList: {
      latency: async (payload) => {
        const now = performance.now();
        started.get(payload.id)?.(now);
      },
    },
  });
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent });
  const samples = [];
  try {
    for (let id = 0; id < WARMUP + SAMPLES; id++) {
      const begun = new Promise((resolve, reject) => {
        started.set(id, resolve);
        setTimeout(() => reject(new Error(`job ${id} did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS).unref();
      });
      const called = performance.now();
      await utils.addJob("latency", { id });
      const returned = performance.now();
      const start = await begun;
      started.delete(id);
      if (id >= WARMUP) samples.push({ called, returned, start });
      // Idle again: the job's row is gone (graphile-worker deletes a completed job), then a pause.
      for (;;) {
        const { rows } = await utils.withPgClient((c) =>
          c.query("select count(*)::int as n from graphile_worker._private_jobs"),
        );
        if (rows[0].n === 0) break;
        await sleep(1);
      }
      await sleep(SETTLE_MS);
    }
  } finally {
    await utils.release();
    await runner.stop();
  }
  return samples;
}

async function main() {
  const database = `graphile_latency_${process.pid}_${Date.now()}`;
  await admin(args.url, `CREATE DATABASE ${database}`);
  let samples;
  try {
    samples = await measure(withDatabase(args.url, database));
  } finally {
    await admin(args.url, `DROP DATABASE ${database} WITH (FORCE)`);
  }
  const fromCalled = summary(samples.map((s) => s.start - s.called));
  const fromReturned = summary(samples.map((s) => s.start - s.returned));
  const add = summary(samples.map((s) => s.returned - s.called));
  const shape = `graphile-worker ${version}, N=${samples.length}, one worker, concurrency 1`;
  console.log(`[graphile] latency (${shape}) addJob called -> task started: ${show(fromCalled)}`);
  console.log(`[graphile] latency (${shape}) addJob returned -> task started: ${show(fromReturned)}`);
  console.log(`[graphile] latency (${shape}) addJob itself: ${show(add)}`);
  console.log(`[graphile] json ${JSON.stringify({ version, samples: samples.length, fromCalled, fromReturned, add })}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
