// The chat page (demo/chat.html): build/demo/chat.tandem (demo/build_chat.py: a transformers
// checkpoint folder through export_pretrained, its tokenizer and chat template in the file) in a
// Web Worker. Each turn: the whole conversation through generate(model, messages) from an empty
// cache (the template applied with the generation prompt, greedy), the reply streamed as text.
import { load, generate } from '/web/tandem.js';

const $ = (id) => document.getElementById(id);
const model = await load('/build/demo/chat.tandem', { worker: true });
const messages = [];
let controller = null;

$('model-info').textContent = `${model.metadata.model_type}, ${model.metadata.vocab_size} tokens, ` +
  `a KV cache of ${model.metadata.max_cache_len} positions`;
$('loading').hidden = true;
$('app').hidden = false;

function bubble(role, text) {
  const div = document.createElement('div');
  div.className = `msg ${role}`;
  div.textContent = text;
  $('log').append(div);
  $('log').scrollTop = $('log').scrollHeight;
  return div;
}

/** How many of the oldest messages to leave out so the templated conversation and the reply fit the
 * KV cache (the last message always stays). */
function fit(maxTokens) {
  const capacity = model.metadata.max_cache_len;
  let drop = 0;
  const template = { addGenerationPrompt: true, tokenize: true };
  const promptLength = (from) => model.tokenizer.applyChatTemplate(messages.slice(from), template).length;
  while (drop < messages.length - 1 && promptLength(drop) + maxTokens > capacity) drop += 1;
  return drop;
}

function busy(on) {
  document.body.dataset.busy = on ? '1' : '0';
  $('send').disabled = on;
  $('stop').disabled = !on;
  $('clear').disabled = on;
}

async function send(text) {
  messages.push({ role: 'user', content: text });
  bubble('user', text);
  const reply = bubble('assistant', '');
  busy(true);
  controller = new AbortController();
  const t0 = performance.now();
  let tokens = 0;
  try {
    const maxTokens = Number($('max-tokens').value) || 24;
    const dropped = fit(maxTokens);
    await model.reset(); // the conversation is prefilled again in full, so nothing is left over
    const run = generate(model, messages.slice(dropped), { temperature: 0, maxTokens,
      signal: controller.signal, onToken: () => { tokens += 1; } });
    for await (const piece of run.text()) {
      reply.textContent += piece;
      $('log').scrollTop = $('log').scrollHeight;
    }
    messages.push({ role: 'assistant', content: reply.textContent });
    const s = (performance.now() - t0) / 1000;
    $('status').textContent = `${tokens} tokens in ${s.toFixed(2)} s (${run.reason})` +
      (dropped ? `; the ${dropped} oldest messages left out to fit the cache` : '');
  } catch (e) {
    messages.pop();
    reply.remove();
    $('status').textContent = `${e.code ?? e.name}: ${e.message}`;
  } finally {
    controller = null;
    busy(false);
  }
}

$('chat-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('input').value.trim();
  if (!text || controller) return;
  $('input').value = '';
  send(text);
});
$('stop').addEventListener('click', () => controller?.abort());
$('clear').addEventListener('click', () => {
  messages.length = 0;
  $('log').replaceChildren();
  $('status').textContent = '';
});
busy(false);
document.body.dataset.ready = '1';
