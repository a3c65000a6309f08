// Shared helpers of the cachet serve client tests. The server is started by
// tests/py/test_server.py, which passes its address in CACHET_URL (and the key in CACHET_API_KEY).
import OpenAI from 'openai';

export const BASE = process.env.CACHET_URL || 'http://127.0.0.1:8080';
export const API_KEY = process.env.CACHET_API_KEY || 'none';
export const MODEL = process.env.CACHET_MODEL || 'default';

export function client(opts = {}) {
  return new OpenAI({ baseURL: `${BASE}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 60000, ...opts });
}

// A raw HTTP request; returns { status, headers, json, text }.
export async function raw(path, { method = 'POST', body, headers = {}, auth = true } = {}) {
  const h = { ...headers };
  if (auth) h.Authorization = `Bearer ${API_KEY}`;
  if (body !== undefined && !h['Content-Type']) h['Content-Type'] = 'application/json';
  const res = await fetch(`${BASE}${path}`, { method, headers: h, body });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, json, text };
}

// The value of one sample in the Prometheus text of /metrics (0 when absent).
export async function metric(name) {
  const r = await raw('/metrics', { method: 'GET' });
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
  let total = 0;
  let found = false;
  for (const line of r.text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/);
    if (m && m[1] === name) {
      total += Number(m[3]);
      found = true;
    }
  }
  return found ? total : 0;
}

export async function waitFor(cond, ms = 5000, step = 50) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, step));
  }
  return await cond();
}
