// The chat page `orchard serve` answers at /, driven in headless Chromium: a streamed reply, a
// second turn carrying the conversation, the stop button, the cluster panel. Leaves a
// screenshot (page.png) in the artifacts folder.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { artifactsDir, eventually, getJson, post, servedModel, serverUrl, startServer } from './harness.mjs';

const pageSource = readFileSync(
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../../src/serve/web/index.html'), 'utf8');
const chromiumPath = process.env.ORCHARD_CHROMIUM || '/usr/bin/chromium';

describe('the page source', () => {
  test('can be compiled in as a raw string by configure_file', () => {
    assert.ok(!pageSource.includes(')orchard_page"'), 'contains the raw string delimiter');
    assert.doesNotMatch(pageSource, /@[A-Za-z0-9_.+/-]+@/, 'contains an at-sign variable');
  });

  test('is self-contained', () => {
    assert.doesNotMatch(pageSource, /<script[^>]*\ssrc=/i);
    assert.doesNotMatch(pageSource, /<link[^>]*rel="stylesheet"/i);
    assert.doesNotMatch(pageSource, /(src|href)="(https?:)?\/\//i);
    assert.doesNotMatch(pageSource, /@import|url\(/i);
  });

  test('is what the server answers at /', async () => {
    const res = await fetch(serverUrl + '/');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/html/);
    const served = await res.text();
    // Not assert.equal: a mismatch would print both 20 KB pages.
    assert.ok(served === pageSource, `the binary serves another page (${served.length} characters, the file has ${pageSource.length}): rebuild orchard`);
  });
});

describe('the page in Chromium', () => {
  let browser, page, model;
  const problems = [];       // console errors, page errors, requests that left the server
  let expectRefusal = false; // Chromium logs the 400 the refusal test asks for as an error

  // Records, at every change of the conversation, the last assistant message's state and
  // length, so a test can tell whether text showed while the request was still in flight.
  function watchReplies(clickStopOnFirstText = false) {
    return page.evaluate((clickStop) => {
      window.replyLog = [];
      const messages = document.getElementById('messages');
      let clicked = false;
      const observer = new MutationObserver(() => {
        const all = messages.querySelectorAll('.assistant');
        const last = all[all.length - 1];
        if (!last) return;
        const length = last.querySelector('.content').textContent.length;
        window.replyLog.push({ state: last.dataset.state, length, t: performance.now() });
        if (clickStop && !clicked && length > 0) {
          clicked = true;
          document.getElementById('stop').click();
        }
      });
      observer.observe(messages, { subtree: true, childList: true, characterData: true, attributes: true });
    }, clickStopOnFirstText);
  }

  async function sendAndWait(prompt) {
    const requestSeen = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    await page.fill('#prompt', prompt);
    await page.click('#send');
    const request = await requestSeen;
    const count = await page.locator('.assistant').count();
    const reply = page.locator('.assistant').nth(count - 1);
    await eventually(async () => (await reply.getAttribute('data-state')) !== 'streaming', 60_000, 'the reply to end');
    return { request: JSON.parse(request.postData()), reply };
  }

  before(async () => {
    if (!existsSync(chromiumPath)) {
      throw new Error(`Chromium not found at ${chromiumPath}: run scripts/install-deps.sh or set ORCHARD_CHROMIUM`);
    }
    model = await servedModel();
    browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      if (expectRefusal && /status of 400/.test(m.text())) return;
      problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.route('**/*', (route) => {
      if (route.request().url().startsWith(serverUrl + '/')) return route.continue();
      problems.push(`external request: ${route.request().url()}`);
      return route.abort();
    });
    await page.goto(serverUrl + '/');
  });

  after(async () => {
    await browser?.close();
  });

  test('lists the served model', async () => {
    await page.waitForSelector(`#model option[value="${model}"]`, { state: 'attached' });
    assert.equal(await page.inputValue('#model'), model);
  });

  test('streams a reply while the request is in flight', async (t) => {
    await page.fill('#temperature', '0');
    await page.fill('#max_tokens', '200');
    await watchReplies();
    const { request, reply } = await sendAndWait('Tell me a story about a dog.');

    assert.equal(await reply.getAttribute('data-state'), 'done');
    assert.equal(request.stream, true);
    assert.equal(request.temperature, 0);
    assert.equal(request.max_tokens, 200);
    assert.deepEqual(request.messages, [{ role: 'user', content: 'Tell me a story about a dog.' }]);

    const log = await page.evaluate(() => window.replyLog);
    const whileStreaming = log.filter((e) => e.state === 'streaming' && e.length > 0);
    assert.ok(whileStreaming.length > 0, `no text before the request ended: ${JSON.stringify(log.slice(0, 20))}`);
    const growth = new Set(whileStreaming.map((e) => e.length)).size;
    t.diagnostic(`reply grew in ${growth} visible steps`);

    // What the page shows is the server's greedy answer to the same request.
    const text = await reply.locator('.content').textContent();
    assert.ok(text.length > 0);
    const res = await post('/v1/chat/completions', { ...request, stream: false });
    const whole = await res.json();
    assert.equal(text, whole.choices[0].message.content);
    const usage = whole.usage.completion_tokens;
    assert.match(await reply.locator('.meta').textContent(), new RegExp(`^${usage} tokens .*finish: ${whole.choices[0].finish_reason}$`));
  });

  test('a second turn sends the conversation so far', async () => {
    const first = await page.locator('.assistant .content').first().textContent();
    const { request, reply } = await sendAndWait('What happened next?');
    assert.equal(await reply.getAttribute('data-state'), 'done');
    assert.deepEqual(request.messages.map((m) => m.role), ['user', 'assistant', 'user']);
    assert.equal(request.messages[1].content, first);
    assert.equal(await page.locator('.user').count(), 2);
    assert.equal(await page.locator('.assistant').count(), 2);
  });

  test('the cluster panel shows the one rank', async () => {
    const cluster = await getJson('/api/cluster');
    const card = page.locator('#cluster .rank');
    await eventually(async () => (await card.count()) === 1, 5_000, 'one rank card');
    const r = cluster.ranks[0];
    assert.equal(await card.getAttribute('data-rank'), String(r.rank));
    assert.equal(await card.locator('.host').textContent(), r.host);
    assert.equal(await card.locator('.layers').textContent(), `[${r.layers[0]}, ${r.layers[1]})`);
    assert.match(await card.locator('.memory').textContent(), /^[\d.]+ (B|KiB|MiB|GiB|TiB)$/);
    const latency = await card.locator('.latency').textContent();
    if (r.link_latency_us === null) assert.equal(latency, '\u2014');
    else assert.match(latency, /\u00b5s$/);
    assert.equal(await page.textContent('#plan-kind'), cluster.kind);
    assert.match(await page.textContent('#slots'), /active of \d+/);
    assert.match(await page.textContent('#tps'), /^[\d.]+$/);

    // The polling keeps going: the tokens/s chart gains points.
    const points = () => page.evaluate(() => document.querySelector('#tps-chart polyline').getAttribute('points').split(' ').length);
    const before = await points();
    await eventually(async () => (await points()) > before, 5_000, 'another cluster poll');

    await page.screenshot({ path: path.join(artifactsDir(), 'page.png'), fullPage: true });
  });

  test('a refused request shows the server\'s message and gives the prompt back', async () => {
    await page.fill('#temperature', '1000');
    expectRefusal = true;
    const { reply } = await sendAndWait('Hello');
    expectRefusal = false;
    await page.fill('#temperature', '0');
    assert.equal(await reply.getAttribute('data-state'), 'error');
    assert.match(await reply.locator('.meta').textContent(), /^Error: 'temperature' must be between/);
    assert.equal(await page.inputValue('#prompt'), 'Hello');
    await page.fill('#prompt', '');
  });

  test('stop ends the reply and the server frees the slot', async () => {
    await page.fill('#max_tokens', '1000');
    await page.fill('#temperature', '1');
    await watchReplies(true);
    const { reply } = await sendAndWait('Tell me a very long story.');
    assert.equal(await reply.getAttribute('data-state'), 'stopped');
    assert.ok((await reply.locator('.content').textContent()).length > 0);
    assert.equal(await page.isDisabled('#stop'), true);
    assert.equal(await page.isDisabled('#send'), false);
    await eventually(async () => (await getJson('/health')).active === 0, 10_000, 'no active slot');
  });

  test('works with a server that wants an API key once the key is entered', async () => {
    const server = await startServer(['--api-key', 'orchard-test-key', '--slots', '1']);
    const keyed = await browser.newPage();
    try {
      await keyed.goto(server.url + '/');
      await keyed.waitForFunction(() => /API key/.test(document.getElementById('cluster-error').textContent));
      assert.equal(await keyed.locator('#cluster .rank').count(), 0);
      await keyed.fill('#api_key', 'orchard-test-key');
      await keyed.locator('#api_key').blur();
      await keyed.waitForSelector('#cluster .rank');
      await keyed.waitForSelector(`#model option[value="${model}"]`, { state: 'attached' });
      await keyed.fill('#max_tokens', '8');
      await keyed.fill('#prompt', 'Hello');
      await keyed.click('#send');
      await keyed.waitForSelector('.assistant[data-state="done"]');
      assert.ok((await keyed.locator('.assistant .content').textContent()).length > 0);
    } finally {
      await keyed.close();
      await server.stop();
    }
  });

  test('caused no errors and no outside requests', () => {
    assert.deepEqual(problems, []);
  });
});
