// Tool calls end to end through the official clients: the openai client (its runTools loop,
// its stream helper, a hand-written loop), Anthropic's SDK (tool_use / tool_result, streamed
// and not) and the ollama client (tools, with Orchard's tool_choice). The served model is tiny
// and would not call a tool by itself, so each first turn forces the call with tool_choice; the
// client then runs the tool, sends the result back, and gets an answer.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

import { servedModel, serverUrl } from './harness.mjs';

const model = await servedModel();
const openai = new OpenAI({ baseURL: serverUrl + '/v1', apiKey: 'unused', maxRetries: 0, fetch: globalThis.fetch });
const anthropic = new Anthropic({ baseURL: serverUrl, apiKey: 'unused', maxRetries: 0, fetch: globalThis.fetch });
const ollama = new Ollama({ host: serverUrl });

const weatherSchema = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 24 },
    unit: { enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};

// The tool itself: refuses arguments that do not follow its schema, as a real one would.
const calls = [];
function getWeather(args) {
  assert.equal(typeof args, 'object');
  assert.equal(typeof args.city, 'string');
  assert.ok(args.city.length >= 1 && [...args.city].length <= 24, `city ${JSON.stringify(args.city)}`);
  assert.ok(['celsius', 'fahrenheit'].includes(args.unit), `unit ${args.unit}`);
  assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
  calls.push(args);
  return { city: args.city, temperature: args.unit === 'celsius' ? 21 : 70, sky: 'clear' };
}

const question = 'What is the weather in Paris?';
const openaiTools = [{ type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: weatherSchema } }];

describe('tool calls', () => {
  test('openai: a forced call, the tool run, the result sent back, an answer', async () => {
    const messages = [{ role: 'user', content: question }];
    const first = await openai.chat.completions.create({ model, messages, tools: openaiTools, tool_choice: 'required', max_tokens: 150, seed: 1 });
    const choice = first.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.match(call.id, /^call_/);
    const result = getWeather(JSON.parse(call.function.arguments));
    messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: JSON.stringify(result) });
    const second = await openai.chat.completions.create({ model, messages, tools: openaiTools, max_tokens: 30, seed: 2 });
    assert.ok(['stop', 'length'].includes(second.choices[0].finish_reason), second.choices[0].finish_reason);
    assert.equal(typeof second.choices[0].message.content, 'string');
    assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens, 'the second turn carries the call and its result');
  });

  test('openai: the stream helper assembles streamed tool_calls deltas', async () => {
    const stream = openai.beta.chat.completions.stream({
      model, messages: [{ role: 'user', content: question }], tools: openaiTools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 150, seed: 3,
    });
    const final = await stream.finalChatCompletion();
    const choice = final.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.tool_calls[0].function.name, 'get_weather');
    getWeather(JSON.parse(choice.message.tool_calls[0].function.arguments));
  });

  test("openai: runTools runs the client's own tool loop", async () => {
    const before = calls.length;
    const runner = openai.beta.chat.completions.runTools({
      model,
      messages: [{ role: 'user', content: question }],
      tools: [{ type: 'function', function: { name: 'get_weather', function: getWeather, parse: JSON.parse, parameters: weatherSchema } }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 150,
      seed: 4,
    });
    await runner.done();
    assert.equal(calls.length, before + 1, 'the runner called the tool once');
    const toolMessages = runner.messages.filter((m) => m.role === 'tool');
    assert.equal(toolMessages.length, 1);
    assert.equal(JSON.parse(toolMessages[0].content).sky, 'clear');
  });

  test('anthropic: tool_use, then tool_result, then an answer', async () => {
    const tools = [{ name: 'get_weather', description: 'Current weather in a city', input_schema: weatherSchema }];
    const messages = [{ role: 'user', content: question }];
    const first = await anthropic.messages.create({ model, max_tokens: 150, messages, tools, tool_choice: { type: 'any' } });
    assert.equal(first.stop_reason, 'tool_use');
    const use = first.content.find((b) => b.type === 'tool_use');
    assert.ok(use, JSON.stringify(first.content));
    assert.equal(use.name, 'get_weather');
    assert.match(use.id, /^toolu_/);
    const result = getWeather(use.input);
    messages.push({ role: 'assistant', content: first.content });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: JSON.stringify(result) }] });
    const second = await anthropic.messages.create({ model, max_tokens: 30, messages, tools });
    assert.ok(['end_turn', 'max_tokens'].includes(second.stop_reason), second.stop_reason);
    assert.equal(second.content[0].type, 'text');
    assert.ok(second.usage.input_tokens + (second.usage.cache_read_input_tokens ?? 0) > first.usage.input_tokens);
  });

  test('anthropic: a streamed tool_use arrives through input_json_delta', async () => {
    const stream = anthropic.messages.stream({
      model, max_tokens: 150, messages: [{ role: 'user', content: question }],
      tools: [{ name: 'get_weather', input_schema: weatherSchema }], tool_choice: { type: 'tool', name: 'get_weather' },
    });
    const message = await stream.finalMessage();
    assert.equal(message.stop_reason, 'tool_use');
    const use = message.content.find((b) => b.type === 'tool_use');
    assert.ok(use, JSON.stringify(message.content));
    getWeather(use.input);
  });

  test('ollama: tools, a call, the result back, an answer', async () => {
    const messages = [{ role: 'user', content: question }];
    const first = await ollama.chat({ model, messages, tools: openaiTools, tool_choice: 'required', stream: false, options: { num_predict: 150, seed: 5 } });
    assert.equal(first.message.tool_calls.length, 1);
    const call = first.message.tool_calls[0].function;
    assert.equal(call.name, 'get_weather');
    const result = getWeather(call.arguments);
    messages.push(first.message, { role: 'tool', content: JSON.stringify(result), tool_name: 'get_weather' });
    const second = await ollama.chat({ model, messages, tools: openaiTools, stream: false, options: { num_predict: 30, seed: 6 } });
    assert.equal(typeof second.message.content, 'string');
    assert.ok(second.done);
    // Streamed: the call comes in one line before the last.
    const parts = [];
    for await (const part of await ollama.chat({ model, messages: [{ role: 'user', content: question }], tools: openaiTools, tool_choice: 'required', stream: true, options: { num_predict: 150, seed: 7 } })) parts.push(part);
    const withCalls = parts.filter((p) => p.message?.tool_calls?.length);
    assert.equal(withCalls.length, 1);
    getWeather(withCalls[0].message.tool_calls[0].function.arguments);
    assert.ok(parts.at(-1).done);
  });

  test('bad tools are 400s naming the field', async () => {
    const bad = async (body, param, pattern) => {
      const res = await fetch(serverUrl + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], ...body }) });
      assert.equal(res.status, 400);
      const e = (await res.json()).error;
      assert.equal(e.param, param);
      assert.match(e.message, pattern);
    };
    await bad({ tools: [{ type: 'function', function: { name: 'a b' } }] }, 'tools[0]', /tool names are/);
    await bad({ tools: openaiTools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice', /not among the tools/);
    await bad({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string', pattern: 'x' } } }] }, 'tools[0]', /'pattern' is not supported/);
    await bad({ tools: 'all' }, 'tools', /must be a list/);
    await bad({ tool_choice: 'sometimes' }, 'tool_choice', /must be "auto"/);
    await bad({ messages: [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{not json' } }] }] }, 'messages[0].tool_calls[0].function.arguments', /JSON object/);
  });
});
