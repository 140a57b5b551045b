// The volunteer network end to end, as real processes on localhost: a coordinator (`orchard
// network serve`), two single-machine node agents and one node that is a 2-rank cabled group
// running tensor parallel (`orchard run --nodes 2 --node --parallel tensor`), with jobs sent
// through the official openai client. It checks that placement obeys memory (a model too big for
// a single node goes to the group) and speed (a model every node fits goes to the faster one),
// that greedy answers equal the golden text, and that a node SIGKILLed mid-stream still leaves
// the client with the complete, correct answer. network.sh runs it.
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import OpenAI from 'openai';

import { Proc, binary, golden, run, stories } from './network_procs.mjs';

// Memory every machine reports (--memory). stories260K (1.2 MB of weights) fits it; the `big`
// model (the tiny synthetic shape in F32, 21 MB of weights) does not fit one machine, but split
// in two by tensor parallelism each half does: only the group can take it.
const MEMORY_MIB = 16, MEMORY = `${MEMORY_MIB}MiB`;

// The speed placement predicts follows each machine's memory bandwidth. All the nodes here share
// one machine, so measuring would give every node the same (noisy) figure; instead each node
// reports the bandwidth its owner gives it, as a slower machine would have measured it: node A
// 20 GB/s, node B 5 GB/s. The planner predicts A faster, so A must get a job both can run.
// Equal scores go to the lower node id, so A is given the higher id of the two: only the
// speed can make A win.
const FAST_GBS = 20, SLOW_GBS = 5;

// A node key as `orchard node` keeps it (PEM, PKCS#8 Ed25519) and the id it derives from it:
// "node-" + the first 16 bytes of SHA-256 over the raw public key.
function makeNodeKey() {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
  return { pem: privateKey.export({ format: 'pem', type: 'pkcs8' }), id: 'node-' + createHash('sha256').update(raw).digest('hex').slice(0, 32) };
}

// Stands between node A and the coordinator, passing every request through unchanged (the node
// signs path and body, not the host). Once `hold()` is armed, the first output a job streams
// passes and every later report on jobs (output, complete) is held unanswered, while heartbeats
// and polls go on: the node is stuck mid-stream, so it cannot finish the job however fast it
// generates, until the test kills it or `release()`s what was held.
class Relay {
  constructor(target) {
    this.target = new URL(target);
    this.armed = false;
    this.holding = false;
    this.held = [];
    this.server = http.createServer((req, res) => this.pass(req, res));
  }
  async listen() {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return `http://127.0.0.1:${this.server.address().port}`;
  }
  hold() {
    this.armed = true;
    this.passedOutput = new Promise((resolve) => { this.onOutput = resolve; });
  }
  release() {
    this.armed = this.holding = false;
    const held = this.held;
    this.held = [];
    for (const [req, res] of held) this.pass(req, res);
  }
  pass(req, res) {
    const report = req.url.startsWith('/v1/node/jobs/');
    if (this.holding && report) {
      this.held.push([req, res]);
      return;
    }
    const output = this.armed && req.method === 'POST' && /\/v1\/node\/jobs\/[^/]+\/output$/.test(req.url);
    if (output) this.holding = true;  // from now on no report of this node gets through
    const upstream = http.request({
      host: this.target.hostname, port: this.target.port, method: req.method, path: req.url, headers: req.headers,
    }, (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
      if (output) up.on('end', () => this.onOutput());
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  }
  close() {
    for (const [, res] of this.held) res.destroy();
    this.server.closeAllConnections?.();
    this.server.close();
  }
}

function goldenText(prompt) {
  const file = path.join(golden, `stories260K.${prompt}.greedy64.kvf32.json`);
  return JSON.parse(readFileSync(file, 'utf8')).generated_text;
}

// Polls `check` until it is true, for up to a minute.
async function eventually(check, what) {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// `promise`, or an error naming `what` after a minute.
function within(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 60_000); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function collect(stream) {
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  return text;
}

describe('a network of three nodes, one a tensor-parallel group', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'orchard-network-'));
  const big = path.join(dir, 'big.gguf');
  const procs = [];
  let url, key, client, relay, nodeA, ids, expected;

  async function jobOf(id) {
    const res = await fetch(`${url}/v1/jobs/${id}`, { headers: { Authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200, await res.clone().text());
    return res.json();
  }
  async function world() {
    return (await fetch(`${url}/v1/world`)).json();
  }
  // Waits until the owner's node is online, says it is available and holds no job.
  async function free(owner) {
    await eventually(async () => {
      const n = (await world()).nodes.find((x) => x.owner === owner);
      return n.online && n.status === 'available' && n.active_jobs === 0;
    }, `the node of ${owner} to be free`);
  }

  before(async () => {
    await run(binary, ['make-model', '--shape', 'tiny', '--type', 'F32', '--seed', '7', '-o', big], { timeout: 120_000 });
    // Short timeouts, so the job of the killed node moves on within seconds.
    const coordinator = new Proc('coordinator', ['network', 'serve', '--data', path.join(dir, 'coordinator'),
      '--host', '127.0.0.1', '--port', '0', '--heartbeat-timeout', '2', '--lease', '2', '--queue-timeout', '120',
      // Paid at once and no audit jobs: the ledger check below counts the clients' jobs.
      '--audit-window', '0', '--audit-rate', '0']);
    procs.push(coordinator);
    url = (await coordinator.waitFor(/coordinator on (http:\/\/127\.0\.0\.1:\d+)/))[1];
    const { stdout } = await run(binary, ['network', 'api-key', 'create', 'carol', '--data', path.join(dir, 'coordinator')]);
    key = /ok-[0-9a-f]+/.exec(stdout)?.[0];
    assert.ok(key, `no key in: ${stdout}`);
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 120_000, fetch: globalThis.fetch });

    relay = new Relay(url);
    const relayUrl = await relay.listen();
    const common = ['--dedicated', '--memory', MEMORY, '-t', '1', '-c', '256', '--poll-wait', '1'];
    // A and B hold both models; the group holds the big one only.
    const keys = [makeNodeKey(), makeNodeKey()].sort((a, b) => (a.id < b.id ? 1 : -1));
    expected = { alice: keys[0].id, bob: keys[1].id };
    writeFileSync(path.join(dir, 'node-a.key'), keys[0].pem, { mode: 0o600 });
    writeFileSync(path.join(dir, 'node-b.key'), keys[1].pem, { mode: 0o600 });
    const single = (name, owner, coordinatorUrl, gbs) => new Proc(name, ['node', '--coordinator', coordinatorUrl,
      '-m', stories, '--name', 'stories260K', '-m', big, '--name', 'big', '--key', path.join(dir, `${name}.key`),
      '--owner', owner, '--bandwidth', String(gbs), ...common]);
    nodeA = single('node-a', 'alice', relayUrl, FAST_GBS);
    procs.push(nodeA, single('node-b', 'bob', url, SLOW_GBS));
    procs.push(new Proc('node-group', ['run', '--nodes', '2', '--node', '--parallel', 'tensor', '--coordinator', url,
      '-m', big, '--name', 'big', '--key', path.join(dir, 'group.key'), '--owner', 'gina', '--bandwidth', '10',
      ...common]));
    const deadline = Date.now() + 180_000;
    for (;;) {
      const w = await world();
      if (w.nodes.filter((n) => n.online).length === 3) {
        ids = Object.fromEntries(w.nodes.map((n) => [n.owner, n.id]));
        break;
      }
      for (const p of procs) if (!p.alive()) throw new Error(`${p.name} exited:\n${p.text()}`);
      if (Date.now() > deadline) throw new Error(`3 nodes did not come online: ${JSON.stringify(w)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  });

  after(async () => {
    relay?.close();
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  test('the group registers as one node: both ranks\' machines and the link they measured', async () => {
    const group = (await world()).nodes.find((n) => n.owner === 'gina');
    assert.equal(group.machines.length, 2);
    assert.deepEqual(group.group.members, group.machines.map((m) => m.name));
    assert.ok(group.group.latency_us > 0 && group.group.gbs > 0, JSON.stringify(group.group));
    for (const m of group.machines) assert.equal(m.memory_bytes, MEMORY_MIB * 1024 * 1024);
    assert.deepEqual(group.models, ['big']);
  });

  test('a model too big for one machine goes to the group, and its greedy answer equals one machine\'s', async () => {
    const prompt = 'Once upon a time';
    const { stdout } = await run(binary, ['generate', '-m', big, '-p', prompt, '-n', '24', '--temp', '0', '-t', '1'],
      { timeout: 120_000, maxBuffer: 1 << 20 });
    assert.ok(stdout.startsWith(prompt) && stdout.endsWith('\n'), stdout);
    const want = stdout.slice(prompt.length, -1);

    const { data, response } = await client.completions.create(
      { model: 'big', prompt, max_tokens: 24, temperature: 0 }).withResponse();
    assert.equal(data.choices[0].text, want);
    assert.equal(data.usage.completion_tokens, 24);
    const job = await jobOf(response.headers.get('x-orchard-job'));
    assert.equal(job.node_id, ids.gina, `ran on ${job.node_id}`);

    const streamed = await client.completions.create(
      { model: 'big', prompt, max_tokens: 24, temperature: 0, stream: true }).withResponse();
    assert.equal(await collect(streamed.data), want);
    assert.equal((await jobOf(streamed.response.headers.get('x-orchard-job'))).node_id, ids.gina);
  });

  test('a model every node fits goes to the faster node, and greedy equals the golden text', async () => {
    // The nodes use the keys made above, and the faster one has the higher id (no tie-break win).
    assert.equal(ids.alice, expected.alice);
    assert.equal(ids.bob, expected.bob);
    assert.ok(ids.alice > ids.bob);
    const { data, response } = await client.completions.create(
      { model: 'stories260K', prompt: 'Once upon a time', max_tokens: 64, temperature: 0 }).withResponse();
    assert.equal(data.choices[0].text, goldenText('once_upon_a_time'));
    assert.equal(data.choices[0].finish_reason, 'length');
    const job = await jobOf(response.headers.get('x-orchard-job'));
    assert.equal(job.node_id, ids.alice, `ran on ${job.node_id}, not the faster node A`);
    assert.equal(job.attempts, 1);
  });

  test('a client that hangs up cancels its job; its node stops, is not paid, and takes the next job', async (t) => {
    await free('alice');
    relay.hold();
    const controller = new AbortController();
    const { data: stream, response } = await client.completions.create(
      { model: 'stories260K', prompt: 'Once upon a time', max_tokens: 64, temperature: 0, stream: true },
      { signal: controller.signal }).withResponse();
    const id = response.headers.get('x-orchard-job');
    assert.equal((await jobOf(id)).node_id, ids.alice);  // placed at once, on the faster node
    await within(relay.passedOutput, 'node A\'s first output');  // A streamed part of the answer, and waits
    for await (const chunk of stream) if (chunk.choices[0]?.text) break;  // the first text, then hang up
    controller.abort();
    // The coordinator notices at its next write to the client (a chunk or a ping).
    await eventually(async () => (await jobOf(id)).state === 'cancelled', 'the job to be cancelled');
    // A hears that its output is refused (403), stops generating and is free again.
    relay.release();
    await eventually(async () => /attempt is cancelled/.test(nodeA.text()), 'node A to hear the job was cancelled');
    await free('alice');
    const { data, response: next } = await client.completions.create(
      { model: 'stories260K', prompt: 'Once upon a time', max_tokens: 64, temperature: 0 }).withResponse();
    assert.equal(data.choices[0].text, goldenText('once_upon_a_time'));
    assert.equal((await jobOf(next.headers.get('x-orchard-job'))).node_id, ids.alice);
    // How much was stored depends on how much A had batched into its first post (the relay let
    // that one through); nothing after it was, and nothing is paid (the ledger check below).
    const job = await jobOf(id);
    t.diagnostic(`the cancelled job holds ${job.chunks} chunk(s)`);
    assert.equal(job.state, 'cancelled');
    assert.equal(job.usage, undefined);
  });

  test('a node SIGKILLed mid-stream: the client still gets the complete, correct answer', async (t) => {
    await free('alice');
    relay.hold();
    const { data: stream, response } = await client.completions.create(
      { model: 'stories260K', prompt: 'The little dog', max_tokens: 64, temperature: 0, stream: true }).withResponse();
    const id = response.headers.get('x-orchard-job');
    const text = collect(stream);
    assert.equal((await jobOf(id)).node_id, ids.alice);  // placed at once, on the faster node
    await within(relay.passedOutput, 'node A\'s first output');  // A streamed part of the answer, and waits
    const before = await jobOf(id);
    t.diagnostic(`node A stored ${before.chunks} chunk(s) before it was killed`);
    assert.ok(before.chunks >= 1);
    nodeA.child.kill('SIGKILL');
    await nodeA.exited;
    // The coordinator finds A silent, requeues the job with its output, and B continues after it.
    assert.equal(await text, goldenText('the_little_dog'));
    const job = await jobOf(id);
    assert.equal(job.state, 'done');
    assert.equal(job.attempts, 2);
    assert.equal(job.node_id, ids.bob);
    assert.equal(job.usage.completion_tokens, 64);

    // Every completed job was paid once (five: the cancelled one is not), and the ledger verifies.
    const ledger = path.join(dir, 'coordinator', 'ledger.sqlite');
    const { stdout } = await run(binary, ['network', 'ledger', '--db', ledger, '--verify']);
    assert.match(stdout, /ledger verifies: 5 entries/);
  });
});
