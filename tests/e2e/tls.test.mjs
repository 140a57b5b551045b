// The network over TLS (issue 26), as a user runs it: `orchard network serve --tls-cert
// --tls-key` with a certificate made by `openssl req`, a node pinning it with `--ca-cert`, and the
// official openai client trusting only that certificate; a greedy completion over https equals
// the golden text. A node pinning another certificate stops at once, saying the coordinator is
// not trusted, and a plain-HTTP client gets nothing from the TLS port.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import OpenAI from 'openai';

import { Proc, binary, golden, run, stories } from './network_procs.mjs';

// A self-signed certificate for 127.0.0.1 and its key, as an operator makes one.
async function certificate(dir, name) {
  const cert = path.join(dir, `${name}.crt`), key = path.join(dir, `${name}.key`);
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key,
    '-out', cert, '-days', '1', '-subj', `/CN=${name}`, '-addext', 'subjectAltName=IP:127.0.0.1']);
  return { cert, key };
}

// GET over https trusting only `ca`; resolves with [status, body].
function getJson(url, ca) {
  return new Promise((resolve, reject) => {
    https.get(url, { ca }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve([res.statusCode, body]));
    }).on('error', reject);
  });
}

describe('the network over TLS', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'orchard-tls-'));
  const procs = [];
  let url, ca, key, client;

  before(async () => {
    const good = await certificate(dir, 'coordinator');
    const other = await certificate(dir, 'stranger');
    ca = readFileSync(good.cert);
    const coordinator = new Proc('tls-coordinator', ['network', 'serve', '--data', path.join(dir, 'coordinator'),
      '--host', '127.0.0.1', '--port', '0', '--tls-cert', good.cert, '--tls-key', good.key]);
    procs.push(coordinator);
    url = (await coordinator.waitFor(/coordinator on (https:\/\/127\.0\.0\.1:\d+)/))[1];
    const { stdout } = await run(binary, ['network', 'api-key', 'create', 'carol', '--data', path.join(dir, 'coordinator')]);
    key = /ok-[0-9a-f]+/.exec(stdout)?.[0];
    assert.ok(key, `no key in: ${stdout}`);
    // The openai client with an agent that trusts the coordinator's certificate alone.
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 120_000,
      httpAgent: new https.Agent({ ca }) });

    const node = (name, caFile) => new Proc(`tls-${name}`, ['node', '--coordinator', url, '--ca-cert', caFile, '-m', stories,
      '--name', 'stories260K', '--key', path.join(dir, `node-${name}.key`), '--owner', name, '--dedicated',
      '--bandwidth', '10', '-t', '1', '-c', '256', '--poll-wait', '1']);
    procs.push(node('pinned', good.cert));
    const stranger = node('stranger', other.cert);
    procs.push(stranger);
    await stranger.exited;
    assert.notEqual(stranger.child.exitCode, 0, stranger.text());
    assert.match(stranger.text(), /TLS certificate is not trusted/);
    const deadline = Date.now() + 120_000;
    for (;;) {
      const [status, body] = await getJson(`${url}/health`, ca);
      if (status === 200 && JSON.parse(body).nodes_available >= 1) break;
      if (Date.now() > deadline) throw new Error(`no node came online over TLS: ${body}\n${procs[1].text()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  });

  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  test('a greedy completion through the openai client over https equals the golden text', async () => {
    const { data } = await client.completions.create(
      { model: 'stories260K', prompt: 'Once upon a time', max_tokens: 64, temperature: 0 }).withResponse();
    const file = path.join(golden, 'stories260K.once_upon_a_time.greedy64.kvf32.json');
    assert.equal(data.choices[0].text, JSON.parse(readFileSync(file, 'utf8')).generated_text);
  });

  test('a client that does not trust the certificate, and plain HTTP, get nothing', async () => {
    await assert.rejects(getJson(`${url}/health`, undefined), /self[- ]signed|certificate/i);
    const plain = url.replace('https://', 'http://');
    await assert.rejects(fetch(`${plain}/health`));
  });
});
