// `orchard cluster up` seen from the chat page: two agents on this machine (over loopback) find
// each other, the leader runs a two-machine pipeline and serves the API; the page's cluster
// panel lists both machines with the link measured to the other, the leader and the plan, and
// a completion through the split equals the CLI's greedy text. Leaves cluster-page.png.
// Started by run.sh like the other e2e tests (the `orchard serve` run.sh starts is not used).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { chromium } from 'playwright-core';

import { artifactsDir, cliGreedy, eventually, modelPath, startOrchard } from './harness.mjs';

const chromiumPath = process.env.ORCHARD_CHROMIUM || '/usr/bin/chromium';

// A TCP port free now (the kernel's pick, released at once).
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

describe('cluster up and the chat page', () => {
  let dir, browser, page, apiUrl;
  const agents = [];
  const problems = [];

  before(async () => {
    if (!existsSync(chromiumPath)) {
      throw new Error(`Chromium not found at ${chromiumPath}: run scripts/install-deps.sh or set ORCHARD_CHROMIUM`);
    }
    dir = mkdtempSync(path.join(os.tmpdir(), 'orchard-cluster-'));
    const secret = path.join(dir, 'secret');
    writeFileSync(secret, 'an e2e secret\n');
    const [discovery, apiPort, rankPort] = [await freePort(), await freePort(), await freePort()];
    apiUrl = `http://127.0.0.1:${apiPort}`;
    // The first started leads (equal machines: the one up longest), so it starts first.
    for (const name of ['first', 'second']) {
      const { proc } = await startOrchard(
        ['cluster', 'up', '--secret-file', secret, '-m', modelPath, '--name', name, '--interface', 'lo',
          '--port', '0', '--probe-port', '0', '--discovery-port', String(discovery), '--api-port', String(apiPort),
          '--rank-port', String(rankPort), '--parallel', 'pipeline', '-t', '1', '--interval-ms', '200',
          '--timeout-ms', '1500', '--probe-mib', '1'],
        /status on port \d+/, `the agent '${name}'`);
      agents.push(proc);
      await new Promise((r) => setTimeout(r, 50));
    }
    await eventually(async () => (await fetch(apiUrl + '/health')).ok, 60_000, 'the leader serving');
    browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.goto(apiUrl + '/');
  });

  after(async () => {
    await browser?.close();
    for (const a of agents.reverse()) await a.stop().catch(() => a.child.kill('SIGKILL'));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the page lists both machines, the link between them, the leader and the plan', async () => {
    const machines = page.locator('[data-testid="machine"]');
    await eventually(async () => (await machines.count()) === 2 &&
      (await page.locator('[data-testid="machine"] .path').count()) === 1 &&
      /µs/.test(await page.locator('[data-testid="machine"] .path').first().textContent()), 30_000,
    'two machines and a measured link');
    assert.match(await page.locator('[data-testid="machine"][data-name="first"]').textContent(),
      /first \(leader, this machine\)/);
    const second = await page.locator('[data-testid="machine"][data-name="second"]').textContent();
    assert.match(second, /via 127\.0\.0\.1: \d+ µs, \d+ Mbit\/s/);
    await eventually(async () => /Plan: pipeline 2 over 2 machine\(s\), predicted [\d.]+ tokens\/s/.test(
      await page.locator('[data-testid="discovery-plan"]').textContent()), 30_000, 'the plan');
    // The ranks of the split itself, as the page always showed them.
    await eventually(async () => (await page.locator('[data-testid="rank"]').count()) === 2, 30_000, 'two rank cards');
    await page.locator('#cluster').screenshot({ path: path.join(artifactsDir(), 'cluster-page.png') });
    assert.deepEqual(problems, []);
  });

  test('a completion through the split is the greedy text', async () => {
    const want = await cliGreedy('Once upon a time', 24);
    const res = await fetch(apiUrl + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 24, temperature: 0 }),
    });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].text, want);
  });
});
