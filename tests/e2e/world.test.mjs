// The coordinator's world page in headless Chromium: a coordinator with three node agents
// running stories260K (dedicated; when-idle; when-idle outside its window, so draining), the
// page showing each node, its machine, models, lending and state, the totals, a job served and
// a node that stopped going offline; the map with each node at the region its owner declared,
// a node's details on a click, the earnings board, and a node joining live. Leaves screenshots
// (world.png, world-map.png) in the artifacts folder.
// Started by run.sh like the other e2e tests (it uses ORCHARD_BINARY and ORCHARD_MODEL; the
// `orchard serve` run.sh starts is not used here).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { chromium } from 'playwright-core';

import { artifactsDir, binary, eventually, modelPath, startOrchard as start } from './harness.mjs';

const pageSource = readFileSync(
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../../src/network/web/world.html'), 'utf8');
const chromiumPath = process.env.ORCHARD_CHROMIUM || '/usr/bin/chromium';

// HH:MM local time `minutes` from now.
function clockIn(minutes) {
  const d = new Date(Date.now() + minutes * 60_000);
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
}

describe('the world page source', () => {
  test('can be compiled in as a raw string by configure_file', () => {
    assert.ok(!pageSource.includes(')orchard_world"'), 'contains the raw string delimiter');
    assert.doesNotMatch(pageSource, /@[A-Za-z0-9_.+/-]+@/, 'contains an at-sign variable');
  });

  test('is self-contained and never writes node data as HTML', () => {
    assert.doesNotMatch(pageSource, /<script[^>]*\ssrc=/i);
    assert.doesNotMatch(pageSource, /<link[^>]*rel="stylesheet"/i);
    assert.doesNotMatch(pageSource, /(src|href)="(https?:)?\/\//i);
    assert.doesNotMatch(pageSource, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });
});

describe('the world page in Chromium', () => {
  let dir, coordinator, url, key, browser, page;
  const nodes = {};          // owner -> { proc, id }
  const problems = [];       // console errors, page errors, requests that left the coordinator

  async function startNode(owner, lending, region) {
    const { proc, match } = await start(
      ['node', '--coordinator', url, '-m', modelPath, '--name', 'stories260K', '--owner', owner,
        '--key', path.join(dir, `${owner}.key`), '--bandwidth', '10', '-t', '1', '--poll-wait', '1',
        '--region', region, ...lending],
      /orchard node (node-[0-9a-f]+): serving/, `the node of ${owner}`);
    nodes[owner] = { proc, id: match[1] };
  }

  const card = (owner) => page.locator(`.node[data-id="${nodes[owner].id}"]`);
  const dot = (owner) => page.locator(`#map .dot[data-id="${nodes[owner].id}"]`);

  before(async () => {
    if (!existsSync(chromiumPath)) {
      throw new Error(`Chromium not found at ${chromiumPath}: run scripts/install-deps.sh or set ORCHARD_CHROMIUM`);
    }
    dir = mkdtempSync(path.join(os.tmpdir(), 'orchard-world-'));
    const c = await start(['network', 'serve', '--data', path.join(dir, 'coordinator'), '--host', '127.0.0.1',
      '--port', '0', '--heartbeat-timeout', '3', '--lease', '3', '--sign-every', '1', '--audit-window', '0', '--audit-rate', '0'],
    /coordinator on (http:\/\/127\.0\.0\.1:\d+)/, 'the coordinator');
    coordinator = c.proc;
    url = c.match[1];
    key = (await promisify(execFile)(binary,
      ['network', 'api-key', 'create', 'carol', '--data', path.join(dir, 'coordinator')])).stdout.trim();
    await startNode('alice', ['--dedicated'], 'Germany');
    await startNode('bob', ['--when-idle', '--idle-load', '1000000'], 'japan');
    // A window that starts in two hours: lending is refused now, so the node says it is draining.
    await startNode('dora', ['--when-idle', '--window', `${clockIn(120)}-${clockIn(180)}`], '-33.87,151.21');

    browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.route('**/*', (route) => {
      if (route.request().url().startsWith(url + '/')) return route.continue();
      problems.push(`external request: ${route.request().url()}`);
      return route.abort();
    });
    await page.goto(url + '/?refresh=300');
  });

  after(async () => {
    await browser?.close();
    for (const n of Object.values(nodes)) await n.proc.stop().catch(() => n.proc.child.kill('SIGKILL'));
    await coordinator?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('is what the coordinator answers at / and /world', async () => {
    for (const route of ['/', '/world']) {
      const res = await fetch(url + route);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /text\/html/);
      assert.ok((await res.text()) === pageSource, `${route} serves another page: rebuild orchard`);
    }
  });

  test('shows every node with its machine, models, lending and state', async () => {
    await eventually(async () => (await page.locator('.node').count()) === 3, 30_000, 'three node cards');
    await eventually(async () => (await card('dora').getAttribute('data-state')) === 'draining', 30_000, 'dora draining');
    const world = await (await fetch(url + '/v1/world')).json();
    for (const [owner, lending, state] of [['alice', 'dedicated', 'idle'], ['bob', 'when-idle', 'idle'],
      ['dora', 'when-idle', 'draining']]) {
      const c = card(owner);
      assert.equal(await c.getAttribute('data-state'), state, owner);
      assert.equal(await c.locator('.state').textContent(), state);
      assert.equal(await c.locator('.owner').textContent(), owner);
      assert.equal(await c.locator('.lending').textContent(), lending);
      assert.equal(await c.locator('.models').textContent(), 'stories260K');
      const n = world.nodes.find((x) => x.id === nodes[owner].id);
      const m = n.machines[0];
      assert.equal(await c.locator('.machine').textContent(),
        `${m.name} · cpu · ${await page.evaluate((b) => bytes(b), m.memory_bytes)} · 10.0 GB/s · ${m.cores} cores`);
      assert.match(await c.locator('.reliability').textContent(), /^1\.000$/);
      // Nothing secret: no key of any kind in what the world sees.
      assert.deepEqual(Object.keys(n).filter((k) => /key|secret|token$/i.test(k)), []);
    }
    assert.equal(await page.textContent('#total-nodes'), '3 of 3');
    assert.equal(await page.textContent('#total-machines'), '3');
    assert.equal(await page.textContent('#jobs-done'), '0');
    assert.equal(await page.textContent('#connection'), 'live');
  });

  test('draws the map from the coordinator and puts each node at its declared region', async () => {
    const res = await fetch(url + '/world/map.svg');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /image\/svg\+xml/);
    const svg = await res.text();
    assert.match(svg, /viewBox="0 0 360 180"/);
    assert.equal((svg.match(/<path /g) || []).length, 177, 'every country of world-atlas 110m');
    await eventually(async () => (await page.locator('#map .dot').count()) === 3, 30_000, 'three dots');
    const world = await (await fetch(url + '/v1/world')).json();
    const regions = Object.fromEntries(Object.entries(nodes).map(([owner, n]) =>
      [owner, world.nodes.find((x) => x.id === n.id).region]));
    // Country centroids from the map's own outlines; a point rounded to whole degrees.
    assert.equal(regions.alice.name, 'Germany');
    assert.ok(Math.abs(regions.alice.lat - 51.2) < 1 && Math.abs(regions.alice.lon - 10.4) < 1, JSON.stringify(regions.alice));
    assert.equal(regions.bob.name, 'Japan');
    assert.deepEqual(regions.dora, { name: '34°S 151°E', lat: -34, lon: 151 });
    const map = await page.locator('#map').boundingBox();
    for (const owner of ['alice', 'bob', 'dora']) {
      const box = await dot(owner).boundingBox();
      const x = box.x + box.width / 2, y = box.y + box.height / 2;
      const want = { x: map.x + ((regions[owner].lon + 180) / 360) * map.width, y: map.y + ((90 - regions[owner].lat) / 180) * map.height };
      assert.ok(Math.abs(x - want.x) < 2 && Math.abs(y - want.y) < 2,
        `${owner}'s dot at ${x.toFixed(1)},${y.toFixed(1)}, its region at ${want.x.toFixed(1)},${want.y.toFixed(1)}`);
      assert.equal(await card(owner).locator('.region').textContent(), regions[owner].name);
    }
    assert.equal(await dot('dora').getAttribute('data-state'), 'draining');
    assert.equal(await dot('alice').getAttribute('data-state'), 'idle');
  });

  test('a click on a node shows its details', async () => {
    await dot('bob').click();
    await eventually(async () => (await page.textContent('#detail .d-owner')) === 'bob', 5_000, 'bob\'s details');
    assert.equal(await page.textContent('#detail .d-id'), nodes.bob.id);
    assert.equal(await page.textContent('#detail .d-region'), 'Japan');
    assert.equal(await page.textContent('#detail .d-models'), 'stories260K');
    assert.match(await dot('bob').getAttribute('class'), /selected/);
    assert.match(await card('bob').getAttribute('class'), /selected/);
    // The selection outlives the next refresh.
    const before = await page.textContent('#updated');
    await eventually(async () => (await page.textContent('#updated')) !== before, 5_000, 'a refresh');
    assert.equal(await page.textContent('#detail .d-owner'), 'bob');
  });

  test('a job served shows in the node\'s record and the totals', async () => {
    const res = await fetch(url + '/v1/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 48, temperature: 0 }),
    });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    await eventually(async () => (await page.textContent('#jobs-done')) === '1', 10_000, 'one job done');
    const served = [];
    for (const owner of ['alice', 'bob']) {
      if (/ 1 served$/.test(await card(owner).locator('.jobs').textContent())) served.push(owner);
    }
    assert.equal(served.length, 1, 'exactly one node served the job');
    const tokens = await card(served[0]).locator('.tokens').textContent();
    assert.match(tokens, new RegExp(`^${body.usage.completion_tokens} generated`));
    assert.match(await card('dora').locator('.jobs').textContent(), / 0 served$/);
    // Paid at once (--audit-window 0): the earnings board names the owner who served it.
    await eventually(async () => (await page.locator('#earnings li').count()) === 1, 10_000, 'an earner');
    assert.equal(await page.textContent('#earnings li .e-owner'), served[0]);
    assert.match(await page.textContent('#earnings li'), / · 1 job$/);
    // The page keeps polling: the tokens/s chart gains points.
    const points = () => page.evaluate(() => document.querySelector('#tps-chart polyline').getAttribute('points').split(' ').length);
    const before = await points();
    await eventually(async () => (await points()) > before, 5_000, 'another poll');
    await page.screenshot({ path: path.join(artifactsDir(), 'world.png'), fullPage: true });
  });

  test('a node that joins appears on the map without a reload', async () => {
    await startNode('erin', ['--dedicated'], 'Brazil');
    await eventually(async () => (await dot('erin').count()) === 1, 20_000, 'erin\'s dot');
    assert.equal(await page.locator('#map .dot').count(), 4);
    await page.screenshot({ path: path.join(artifactsDir(), 'world-map.png'), fullPage: true });
  });

  test('a node that stops goes offline', async () => {
    await nodes.bob.proc.stop();
    await eventually(async () => (await card('bob').getAttribute('data-state')) === 'offline', 20_000, 'bob offline');
    await eventually(async () => (await dot('bob').getAttribute('data-state')) === 'offline', 5_000, 'bob\'s dot offline');
    assert.equal(await page.textContent('#total-nodes'), '3 of 4');
    await eventually(async () => (await page.locator('.node').last().getAttribute('data-id')) === nodes.bob.id,
      5_000, 'the offline node sorted last');
  });

  test('shows a cabled group and a busy node, with what nodes report as plain text', async () => {
    const fixture = {
      now_ms: Date.now(), heartbeat_timeout_ms: 30000,
      totals: { nodes: 1, nodes_online: 1, machines: 2, memory_bytes: 2 * 2 ** 38, jobs_running: 1, jobs_queued: 4,
        jobs_done: 9, jobs_failed: 0, tokens_per_second: 41.5 },
      nodes: [{ id: 'node-pair', owner: '<img src=x onerror="window.pwned=1">', hardware: 'workstation',
        machines: [{ name: 'studio-1', chip: 'm3-ultra', memory_bytes: 2 ** 38, mem_bw_gbs: 819, cores: 32 },
          { name: 'studio-2', chip: 'm3-ultra', memory_bytes: 2 ** 38, mem_bw_gbs: 819, cores: 32 }],
        group: { members: ['studio-1', 'studio-2'], link: 'tb5-rdma', latency_us: 12, gbs: 5 },
        models: ['llama-3.3-70b-q4'], lending: 'dedicated', status: 'busy', state: 'busy', load: 0.5, online: true,
        last_heartbeat_ms: Date.now(), jobs_served: 9, tokens_generated: 1200, reliability: 0.7, active_jobs: 1,
        tokens_per_second: 41.5 }],
    };
    const other = await browser.newPage();
    try {
      await other.route('**/v1/world', (route) => route.fulfill({ json: fixture }));
      await other.goto(url + '/world');
      const c = other.locator('.node[data-id="node-pair"]');
      await c.waitFor();
      assert.equal(await c.getAttribute('data-state'), 'busy');
      assert.equal(await c.locator('.group').textContent(), 'studio-1 + studio-2 over tb5-rdma, 12.0 µs, 5.0 GB/s');
      assert.equal(await c.locator('.machine').count(), 2);
      assert.equal(await c.locator('.owner').textContent(), fixture.nodes[0].owner);
      assert.equal(await other.locator('img').count(), 0);
      assert.equal(await other.evaluate(() => window.pwned), undefined);
      assert.equal(await other.textContent('#total-memory'), '512 GiB');
      assert.equal(await other.textContent('#jobs-queued'), '4');
      assert.equal(await other.textContent('#tokens-per-second'), '41.5');
      assert.match(await c.locator('.load').textContent(), /50 %$/);
      // No region declared: listed, not placed.
      assert.equal(await other.locator('#map .dot').count(), 0);
      assert.equal(await other.isVisible('#unplaced'), true);
    } finally {
      await other.close();
    }
  });

  test('caused no errors and no outside requests', () => {
    assert.deepEqual(problems, []);
  });
});
