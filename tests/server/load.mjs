// Load test: CLIENTS concurrent streaming chat clients, each sending REQUESTS requests one after
// another through the openai client. Prints a JSON summary; exits 1 on any error.
import { MODEL, client } from './common.mjs';

const CLIENTS = Number(process.env.LOAD_CLIENTS || 16);
const REQUESTS = Number(process.env.LOAD_REQUESTS || 20);
const MAX_TOKENS = Number(process.env.LOAD_MAX_TOKENS || 8);

const openai = client({ timeout: 120000 });
const system = 'You are a player in a company of actors; answer in a line of verse.';
let ok = 0;
let tokens = 0;
let cached = 0;
const errors = [];

async function one(c, r) {
  const stream = await openai.chat.completions.create({
    model: MODEL,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: `Client ${c}, request ${r}: what say you?` },
    ],
    max_tokens: MAX_TOKENS,
    seed: c * 1000 + r,
    stream: true,
    stream_options: { include_usage: true },
  });
  let finish = null;
  let usage = null;
  let text = '';
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) {
      text += chunk.choices[0].delta.content ?? '';
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    } else {
      usage = chunk.usage;
    }
  }
  if (!finish) throw new Error('the stream ended without a finish_reason');
  if (!usage) throw new Error('the stream ended without usage');
  if (usage.completion_tokens < 1 || usage.completion_tokens > MAX_TOKENS)
    throw new Error(`completion_tokens ${usage.completion_tokens}`);
  tokens += usage.completion_tokens;
  cached += usage.prompt_tokens_details.cached_tokens;
  void text;
}

async function worker(c) {
  for (let r = 0; r < REQUESTS; r++) {
    try {
      await one(c, r);
      ok += 1;
    } catch (e) {
      errors.push(`client ${c} request ${r}: ${e.status ?? ''} ${e.message}`);
    }
  }
}

const t0 = Date.now();
await Promise.all(Array.from({ length: CLIENTS }, (_, c) => worker(c)));
const seconds = (Date.now() - t0) / 1000;
console.log(JSON.stringify({ clients: CLIENTS, requests: REQUESTS, ok, errors: errors.length,
  completion_tokens: tokens, cached_tokens: cached, seconds, first_errors: errors.slice(0, 5) }));
process.exit(errors.length === 0 && ok === CLIENTS * REQUESTS ? 0 : 1);
