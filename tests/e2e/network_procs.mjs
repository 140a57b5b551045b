// What the network's end-to-end tests (network.test.mjs, tls.test.mjs) share: the settings
// network.sh exports, and the processes they start (`orchard network serve`, `orchard node`).
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this test through tests/e2e/network.sh`);
  return value;
}
export const binary = required('ORCHARD_BINARY');
export const stories = required('ORCHARD_MODEL');
export const golden = path.join(required('ORCHARD_TEST_DATA'), 'golden');
export const logs = path.join(required('ORCHARD_ARTIFACTS'), 'network');
mkdirSync(logs, { recursive: true });
export const run = promisify(execFile);

// A process with its stderr and stdout in a log file.
export class Proc {
  constructor(name, args) {
    this.name = name;
    this.log = path.join(logs, `${name}.log`);
    const fd = openSync(this.log, 'w');
    this.child = spawn(binary, args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    this.exited = once(this.child, 'exit');
  }
  text() { return readFileSync(this.log, 'utf8'); }
  alive() { return this.child.exitCode === null && this.child.signalCode === null; }
  // Resolves with the first match of `re` in the log.
  async waitFor(re, ms = 120_000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = re.exec(this.text());
      if (m) return m;
      if (!this.alive()) throw new Error(`${this.name} exited before printing ${re}:\n${this.text()}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not print ${re} within ${ms} ms:\n${this.text()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  async stop() {
    if (!this.alive()) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(timer);
  }
}

