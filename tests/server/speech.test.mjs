// POST /v1/audio/speech through the openai client, on a server started with --tts.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import OpenAI from 'openai';

import { client, metric, raw } from './common.mjs';

const openai = client({ timeout: 300000 });

function parseWav(buf) {
  assert.equal(buf.toString('ascii', 0, 4), 'RIFF');
  assert.equal(buf.toString('ascii', 8, 12), 'WAVE');
  assert.equal(buf.toString('ascii', 12, 16), 'fmt ');
  const format = buf.readUInt16LE(20);
  const channels = buf.readUInt16LE(22);
  const rate = buf.readUInt32LE(24);
  const bits = buf.readUInt16LE(34);
  assert.equal(buf.toString('ascii', 36, 40), 'data');
  const size = buf.readUInt32LE(40);
  assert.equal(buf.readUInt32LE(4), 36 + size);
  assert.equal(buf.length, 44 + size);
  return { format, channels, rate, bits, data: buf.subarray(44) };
}

test('speech model is listed', async () => {
  const ids = [];
  for await (const m of await openai.models.list()) ids.push(m.id);
  assert.ok(ids.includes('metavoice'), `models: ${ids}`);
});

test('wav and pcm speech', async () => {
  const before = await metric('cachet_speech_requests_total');
  const res = await openai.audio.speech.create({
    model: 'metavoice', voice: 'alloy', input: 'Hello from the test.', response_format: 'wav',
    seed: 7,
  });
  assert.match(res.headers.get('content-type'), /audio\/wav/);
  const wav = parseWav(Buffer.from(await res.arrayBuffer()));
  assert.equal(wav.format, 1);
  assert.equal(wav.channels, 1);
  assert.equal(wav.rate, 24000);
  assert.equal(wav.bits, 16);
  assert.ok(wav.data.length >= 2 * 320, `only ${wav.data.length} bytes of audio`);
  let nonzero = 0;
  for (let i = 0; i < wav.data.length; i += 2) if (wav.data.readInt16LE(i) !== 0) nonzero += 1;
  assert.ok(nonzero > 0, 'the audio is silent');

  // The same seed gives the same samples, as raw PCM.
  const pcm = await openai.audio.speech.create({
    model: 'metavoice', voice: 'alloy', input: 'Hello from the test.', response_format: 'pcm',
    seed: 7,
  });
  assert.match(pcm.headers.get('content-type'), /audio\/pcm/);
  const samples = Buffer.from(await pcm.arrayBuffer());
  assert.ok(samples.equals(wav.data), 'pcm differs from the wav data of the same seed');
  assert.ok(await metric('cachet_speech_requests_total') >= before + 2);
});

test('speech errors', async () => {
  await assert.rejects(
    openai.audio.speech.create({ model: 'metavoice', voice: 'alloy', input: '' }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  const cases = [
    [{ model: 'metavoice' }, 'input'],
    [{ model: 'metavoice', input: 5 }, 'input'],
    [{ model: 'metavoice', input: 'hi', response_format: 'mp3' }, 'response_format'],
    [{ model: 'metavoice', input: 'hi', voice: 'nobody' }, 'voice'],
    [{ model: 'metavoice', input: 'x'.repeat(100000) }, 'input'],
  ];
  for (const [body, param] of cases) {
    const r = await raw('/v1/audio/speech', { body: JSON.stringify(body) });
    assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
    assert.equal(r.json.error.param, param);
  }
});
