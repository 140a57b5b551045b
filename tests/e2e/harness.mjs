// What the e2e tests share: where the server run.sh started listens, the binary and model it
// runs, where artifacts go, and small HTTP helpers. run.sh sets the environment; running a test
// file alone needs ORCHARD_URL (and ORCHARD_BINARY, ORCHARD_MODEL for the golden text).
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the e2e tests through tests/e2e/run.sh`);
  return value;
}

export const serverUrl = required('ORCHARD_URL').replace(/\/$/, '');
export const binary = process.env.ORCHARD_BINARY || path.join(repo, 'build/orchard');
export const modelPath = process.env.ORCHARD_MODEL ||
  path.join(process.env.ORCHARD_TEST_DATA || path.join(repo, 'tests/data'), 'models/stories260K.gguf');

export function artifactsDir() {
  const dir = process.env.ORCHARD_ARTIFACTS || path.join(repo, 'build/e2e-artifacts');
  mkdirSync(dir, { recursive: true });
  return dir;
}

// POSTs `body` (an object, or a string sent as is) and returns the response.
export function post(route, body, headers = {}) {
  return fetch(serverUrl + route, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

export async function getJson(route) {
  const res = await fetch(serverUrl + route);
  if (!res.ok) throw new Error(`GET ${route}: HTTP ${res.status}: ${await res.text()}`);
  return res.json();
}

// The model id the server reports at /health, which every API should agree with.
export async function servedModel() {
  return (await getJson('/health')).model;
}

// The CLI's greedy continuation of `prompt` (stdout is the prompt, the generated text and one
// newline; stats go to stderr). The C++ golden tests tie these tokens to llama.cpp's.
export async function cliGreedy(prompt, tokens) {
  const { stdout } = await promisify(execFile)(binary,
    ['generate', '-m', modelPath, '-p', prompt, '-n', String(tokens), '--temp', '0', '-t', '1'],
    { timeout: 60_000, maxBuffer: 1 << 20 });
  if (!stdout.startsWith(prompt) || !stdout.endsWith('\n')) {
    throw new Error(`unexpected output of orchard generate: ${JSON.stringify(stdout)}`);
  }
  return stdout.slice(prompt.length, -1);
}

// Polls `check` until it returns a truthy value or `ms` pass.
export async function eventually(check, ms = 10_000, what = 'condition') {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? ': ' + last.message : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Starts `orchard <args>` and resolves once its stderr matches `ready` (the match is returned).
export async function startOrchard(args, ready, what) {
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const proc = { child, log: '', exited: once(child, 'exit') };
  const match = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} not ready within 60 s: ${proc.log}`)), 60_000);
    child.stderr.on('data', (data) => {
      proc.log += data;
      const m = ready.exec(proc.log);
      if (m) { clearTimeout(timer); resolve(m); }
    });
    proc.exited.then(([code]) => { clearTimeout(timer); reject(new Error(`${what} exited (${code}): ${proc.log}`)); });
  }).catch((e) => { child.kill('SIGKILL'); throw e; });
  proc.stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const [code, signal] = await proc.exited;
    clearTimeout(timer);
    if (code !== 0) throw new Error(`${what} ended with ${signal ?? code} after SIGTERM: ${proc.log}`);
  };
  return { proc, match };
}

// Starts another `orchard serve` (beside the one run.sh started) with extra options, for tests
// that need a differently configured server. Resolves once it listens.
export async function startServer(args) {
  const child = spawn(binary, ['serve', '-m', modelPath, '--host', '127.0.0.1', '--port', '0', '-t', '1', ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const exited = once(child, 'exit');
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`orchard serve did not listen within 60 s: ${log}`)), 60_000);
    child.stderr.on('data', (data) => {
      log += data;
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    exited.then(([code]) => { clearTimeout(timer); reject(new Error(`orchard serve exited (${code}): ${log}`)); });
  }).catch((e) => { child.kill('SIGKILL'); throw e; });
  return {
    url,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const [code, signal] = await exited;
      clearTimeout(timer);
      if (code !== 0) throw new Error(`orchard serve ended with ${signal ?? code} after SIGTERM: ${log}`);
      return code;
    },
  };
}
