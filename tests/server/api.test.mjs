// The OpenAI-compatible API of cachet serve through the official openai client.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import OpenAI from 'openai';

import { API_KEY, BASE, MODEL, client, metric, raw, waitFor } from './common.mjs';

const openai = client();

test('health and models', async () => {
  const h = await raw('/health', { method: 'GET', auth: false });
  assert.equal(h.status, 200);
  assert.equal(h.json.status, 'ok');
  const models = await openai.models.list();
  const ids = [];
  for await (const m of models) ids.push(m.id);
  assert.ok(ids.includes(MODEL), `models: ${ids}`);
});

test('models.retrieve, and the routes without /v1', async () => {
  const m = await openai.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(m.object, 'model');
  await assert.rejects(openai.models.retrieve('no-such-model'),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  // A client given the server's root as its base URL, as llama.cpp's server allows
  const bare = client({ baseURL: BASE });
  const ids = [];
  for await (const x of await bare.models.list()) ids.push(x.id);
  assert.ok(ids.includes(MODEL));
  const a = await bare.completions.create({ model: MODEL, prompt: 'ROMEO:', max_tokens: 6, temperature: 0 });
  const b = await openai.completions.create({ model: MODEL, prompt: 'ROMEO:', max_tokens: 6, temperature: 0 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  const c = await bare.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
  assert.equal(c.object, 'chat.completion');
});

test('logit_bias steers sampling; presence and frequency ignore the prompt', async () => {
  const base = { model: MODEL, prompt: 'ROMEO:', max_tokens: 1, temperature: 0 };
  const first = await openai.completions.create(base);
  // Ban, one at a time, every token the greedy choice could be: the text must change
  const ids = [];
  for (let id = 0; id < 1024 && ids.length < 1; ++id) {
    const r = await openai.completions.create({ ...base, logit_bias: { [id]: -100 } });
    if (r.choices[0].text !== first.choices[0].text) ids.push(id);
  }
  assert.equal(ids.length, 1, 'no single token ban changed the greedy choice');
  // ... and a large positive bias makes a token the greedy choice
  const other = (ids[0] + 1) % 1024;
  const pushed = await openai.completions.create({ ...base, max_tokens: 1, logit_bias: { [other]: 100 } });
  const banned = await openai.completions.create({ ...base, max_tokens: 1, logit_bias: { [ids[0]]: -100 } });
  assert.notEqual(pushed.choices[0].text, first.choices[0].text);
  assert.notEqual(banned.choices[0].text, first.choices[0].text);
  // Presence and frequency count the tokens sampled so far, not the prompt's: here the greedy
  // text is "\nI", and "I", in the prompt, is not penalised (counting the prompt, as the CLI
  // does like llama.cpp, gives "\nWhat")
  const prompt = 'ROMEO:\nI will go.\n\nJULIET:';
  const plain = await openai.completions.create({ ...base, prompt, max_tokens: 2 });
  assert.equal(plain.choices[0].text, '\nI');
  for (const pen of [{ presence_penalty: 2 }, { frequency_penalty: 2 }]) {
    const r = await openai.completions.create({ ...base, prompt, max_tokens: 2, ...pen });
    assert.equal(r.choices[0].text, plain.choices[0].text, JSON.stringify(pen));
  }
  // What would change the output and is not implemented is refused
  await assert.rejects(
    openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_object' } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format');
  await assert.rejects(
    openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools');
  const big = await raw('/v1/completions', { body: JSON.stringify({ ...base, logit_bias: { 99999999: 1 } }) });
  assert.equal(big.status, 400);
  assert.equal(big.json.error.param, 'logit_bias');
});

test('completion with usage', async () => {
  const r = await openai.completions.create({
    model: MODEL, prompt: 'The king said', max_tokens: 12, temperature: 0.7, seed: 3,
  });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.choices[0].text.length > 0);
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 1);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  // The same seed gives the same text.
  const again = await openai.completions.create({
    model: MODEL, prompt: 'The king said', max_tokens: 12, temperature: 0.7, seed: 3,
  });
  assert.equal(again.choices[0].text, r.choices[0].text);
});

test('streamed completion equals the non-streamed one', async () => {
  const req = { model: MODEL, prompt: 'To be, or not', max_tokens: 16, temperature: 0 };
  const full = await openai.completions.create(req);
  const stream = await openai.completions.create({ ...req, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, full.choices[0].text);
  assert.equal(finish, full.choices[0].finish_reason);
});

test('streaming chat with include_usage', async () => {
  const stream = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Tell me of the sea.' }],
    max_tokens: 16,
    seed: 11,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    chunks += 1;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.choices.length > 0) {
      const d = chunk.choices[0].delta;
      if (d.role) role = d.role;
      if (d.content) text += d.content;
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
      assert.equal(chunk.usage, null);
    } else {
      usage = chunk.usage;
    }
  }
  assert.equal(role, 'assistant');
  assert.ok(chunks >= 3, `only ${chunks} chunks`);
  assert.ok(text.length > 0);
  assert.ok(['length', 'stop'].includes(finish));
  assert.ok(usage, 'no usage chunk');
  assert.ok(usage.completion_tokens >= 1 && usage.completion_tokens <= 16);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
});

test('chat: stop strings end the text', async () => {
  const r = await openai.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Speak.' }], max_tokens: 64, temperature: 0,
  });
  const text = r.choices[0].message.content;
  assert.equal(r.choices[0].message.role, 'assistant');
  // Stop at the second character of the greedy answer: the answer is then its first character.
  if (text.length >= 2) {
    const stop = text.slice(1, 2);
    const s = await openai.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Speak.' }], max_tokens: 64,
      temperature: 0, stop: [stop],
    });
    assert.equal(s.choices[0].finish_reason, 'stop');
    assert.ok(!s.choices[0].message.content.includes(stop));
    assert.ok(text.startsWith(s.choices[0].message.content));
  }
});

test('prefix cache: a repeated system prompt is reused', async () => {
  const system = 'You are a herald of the court. You answer in the manner of old plays, briefly, ' +
    'and you never forget the names of the lords and ladies you have met. ' + Date.now();
  const ask = (content) => openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'system', content: system }, { role: 'user', content }],
    max_tokens: 8,
    temperature: 0,
  });
  const hitsBefore = await metric('cachet_prefix_cache_hits_total');
  const a = await ask('Who comes?');
  assert.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
  const b = await ask('What news from the north?');
  const cached = b.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 20 && cached < b.usage.prompt_tokens,
    `cached ${cached} of ${b.usage.prompt_tokens} prompt tokens`);
  // The identical request is served entirely from the cache and gives the same greedy text.
  const c = await ask('What news from the north?');
  assert.equal(c.usage.prompt_tokens_details.cached_tokens, c.usage.prompt_tokens);
  assert.equal(c.choices[0].message.content, b.choices[0].message.content);
  assert.ok(await metric('cachet_prefix_cache_hits_total') >= hitsBefore + 2);
  assert.ok(await metric('cachet_prefix_cache_hit_tokens_total') > 0);
});

test('a conversation continues from the state of its previous turn', async () => {
  const messages = [{ role: 'user', content: `Hail, friend ${Date.now()}!` }];
  const first = await openai.chat.completions.create({ model: MODEL, messages, max_tokens: 6, temperature: 0 });
  messages.push({ role: 'assistant', content: first.choices[0].message.content });
  messages.push({ role: 'user', content: 'And then?' });
  const second = await openai.chat.completions.create({ model: MODEL, messages, max_tokens: 6, temperature: 0 });
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
    `cached ${second.usage.prompt_tokens_details.cached_tokens}, first prompt ${first.usage.prompt_tokens}`);
});

test('batched decoding gives the same greedy text as decoding alone', async () => {
  const prompts = ['Now is the winter', 'My lord, the', 'Good morrow,', 'What light through'];
  const alone = [];
  for (const p of prompts) {
    const r = await openai.completions.create({ model: MODEL, prompt: p, max_tokens: 24, temperature: 0 });
    alone.push(r.choices[0].text);
  }
  const steps = await metric('cachet_decode_steps_total');
  const rows = await metric('cachet_decode_rows_total');
  const together = await Promise.all(prompts.map((p) =>
    openai.completions.create({ model: MODEL, prompt: p, max_tokens: 24, temperature: 0 })));
  assert.deepEqual(together.map((r) => r.choices[0].text), alone);
  // Some steps advanced several sequences at once.
  const dSteps = (await metric('cachet_decode_steps_total')) - steps;
  const dRows = (await metric('cachet_decode_rows_total')) - rows;
  assert.ok(dRows > dSteps, `${dRows} rows in ${dSteps} steps: nothing was batched`);
});

test('401 without or with a wrong API key', async () => {
  const bad = client({ apiKey: API_KEY + '-wrong' });
  await assert.rejects(bad.models.list(), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError);
    assert.equal(e.status, 401);
    assert.equal(e.error?.code ?? e.code, 'invalid_api_key');
    return true;
  });
  const none = await raw('/v1/chat/completions', {
    auth: false, body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }),
  });
  assert.equal(none.status, 401);
  assert.equal(none.json.error.type, 'invalid_request_error');
});

test('400 with an OpenAI error object for malformed requests', async () => {
  const cases = [
    ['/v1/chat/completions', '{"messages": [', null],
    ['/v1/chat/completions', '[]', null],
    ['/v1/chat/completions', JSON.stringify({ model: MODEL }), 'messages'],
    ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: 'hi' }), 'messages'],
    ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 5 }] }), 'messages[0].content'],
    ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'wizard', content: 'x' }] }), 'messages[0].role'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', temperature: 'warm' }), 'temperature'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', temperature: 3 }), 'temperature'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: -1 }), 'max_tokens'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 1e9 }), 'max_tokens'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', n: 3 }), 'n'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', stream: 'yes' }), 'stream'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', stop: [1, 2] }), 'stop[]'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: [1, 2, 99999999] }), 'prompt'],
    ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x '.repeat(20000) }), 'prompt'],
  ];
  for (const [path, body, param] of cases) {
    const r = await raw(path, { body });
    assert.equal(r.status, 400, `${path} ${body.slice(0, 80)}: ${r.status} ${r.text.slice(0, 200)}`);
    assert.ok(r.json && r.json.error, `no error object for ${body.slice(0, 80)}`);
    for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in r.json.error, `error lacks ${k}`);
    assert.equal(r.json.error.type, 'invalid_request_error');
    if (param) assert.equal(r.json.error.param, param, body.slice(0, 80));
  }
  // The client surfaces the same as BadRequestError.
  await assert.rejects(
    openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], temperature: 9 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  // Unknown paths and oversized bodies.
  assert.equal((await raw('/v1/nothing', { method: 'GET' })).status, 404);
  const big = await raw('/v1/completions', { body: JSON.stringify({ prompt: 'x'.repeat(3 << 20) }) });
  assert.equal(big.status, 413);
});

test('speech without --tts is a clear error', async () => {
  const h = await raw('/health', { method: 'GET', auth: false });
  if (h.json.tts) return;  // this server has speech
  const r = await raw('/v1/audio/speech', { body: JSON.stringify({ model: 'tts-1', input: 'hi', voice: 'alloy' }) });
  assert.equal(r.status, 404);
  assert.equal(r.json.error.code, 'tts_not_loaded');
  assert.match(r.json.error.message, /--tts/);
});

test('a client that disconnects frees its slot', async () => {
  const cancelledBefore = await metric('cachet_cancelled_total');
  const controller = new AbortController();
  const stream = await openai.completions.create(
    { model: MODEL, prompt: 'Long ago', max_tokens: 3000, stream: true },
    { signal: controller.signal });
  let got = 0;
  try {
    for await (const chunk of stream) {
      got += chunk.choices[0]?.text?.length ?? 0;
      if (got > 0) controller.abort();
    }
  } catch (e) {
    // aborted
  }
  assert.ok(await waitFor(async () => (await metric('cachet_cancelled_total')) >= cancelledBefore + 1),
    'the cancelled stream was not counted');
  assert.ok(await waitFor(async () => (await metric('cachet_active_requests')) === 0),
    'the slot was not freed');
});

test('metrics are Prometheus text', async () => {
  const r = await raw('/metrics', { method: 'GET' });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /text\/plain/);
  for (const name of ['cachet_requests_total', 'cachet_queue_depth', 'cachet_prompt_tokens_total',
    'cachet_request_duration_seconds_bucket', 'cachet_time_to_first_token_seconds_count',
    'cachet_prefix_cache_hits_total', 'cachet_prefix_cache_bytes']) {
    assert.ok(r.text.includes(name), `missing ${name}`);
  }
  for (const line of r.text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
    assert.match(line, /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+$/, line);
  }
  assert.ok(await metric('cachet_requests_total') > 0);
  void BASE;
});
