// The web page at / in headless Chromium: it loads, a chat message gets an answer that
// streams in (the text grows over several updates), and the page shows no errors.
import { chromium } from 'playwright-core';

import { API_KEY, BASE } from './common.mjs';

const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
let failed = null;
try {
  const page = await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(BASE + '/', { waitUntil: 'load' });
  if ((await page.title()) !== 'cachet') throw new Error(`title ${await page.title()}`);
  await page.waitForFunction(() => !document.getElementById('status').textContent.includes('connecting'));
  await page.click('details summary');
  await page.fill('#api_key', API_KEY);
  await page.dispatchEvent('#api_key', 'change');
  await page.evaluate(() => { document.getElementById('max_tokens').value = '200'; });
  // Record every change of the answer's text to see it stream.
  await page.evaluate(() => {
    window.__updates = [];
    new MutationObserver(() => {
      const a = document.querySelector('.msg.assistant');
      if (a) window.__updates.push(a.textContent.length);
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
  await page.fill('#prompt', 'Good morrow, what news?');
  await page.click('#send');
  await page.waitForSelector('.msg.user');
  await page.waitForSelector('.msg.assistant[data-done="1"]', { timeout: 60000 });
  const answer = await page.textContent('.msg.assistant');
  const cls = await page.getAttribute('.msg.assistant', 'class');
  const updates = await page.evaluate(() => window.__updates);
  const usage = await page.textContent('#usage');
  if (cls.includes('error')) throw new Error(`the page shows an error: ${answer}`);
  if (!answer || answer.length === 0) throw new Error('no answer text');
  const distinct = new Set(updates.filter((n) => n > 0)).size;
  if (distinct < 2) throw new Error(`the answer did not stream (lengths seen: ${updates})`);
  if (!/prompt tokens/.test(usage)) throw new Error(`no usage line: ${usage}`);
  // A second turn sends the conversation; its earlier part comes from the prefix cache.
  await page.fill('#prompt', 'And what else?');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-done="1"]').length === 2,
    null, { timeout: 60000 });
  const usage2 = await page.textContent('#usage');
  const cached = Number((usage2.match(/\((\d+) cached\)/) || [])[1] || 0);
  if (!(cached > 0)) throw new Error(`the second turn reused nothing: ${usage2}`);
  // Speech, when the server has it: the audio element gets a WAV.
  const health = await (await fetch(BASE + '/health')).json();
  let audioBytes = null;
  if (health.tts) {
    await page.click('#tab-speech');
    await page.waitForSelector('#speak:not([disabled])');
    await page.fill('#speech-text', 'Hello from the page.');
    await page.click('#speak');
    await page.waitForFunction(() => Number(document.getElementById('audio').dataset.bytes || 0) > 44,
      null, { timeout: 120000 });
    audioBytes = Number(await page.getAttribute('#audio', 'data-bytes'));
    const note = await page.textContent('#speech-note');
    if (note.startsWith('Error')) throw new Error(note);
  } else {
    await page.click('#tab-speech');
    const note = await page.textContent('#speech-note');
    if (!/not loaded/.test(note)) throw new Error(`speech note without TTS: ${note}`);
    if (!(await page.isDisabled('#speak'))) throw new Error('Speak is enabled without TTS');
  }
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join('; ')}`);
  console.log(JSON.stringify({ ok: true, answer_chars: answer.length, updates: distinct, usage: usage2,
    audio_bytes: audioBytes }));
} catch (e) {
  failed = e;
} finally {
  await browser.close();
}
if (failed) {
  console.log(`web page test failed: ${failed.stack || failed}`);
  process.exit(1);
}
