// The chat page (demo/chat.html): demo/chat.tandem (demo/train_chat.py: a small Llama and its
// tokenizer trained on Debian's fortunes as chat turns, exported with its tokenizer and chat
// template) in a Web Worker, driven by a chat session (model.chat): each turn prefills only what it
// adds to the conversation the KV cache holds; "Again" regenerates the last reply from the state
// saved before it, "Undo" takes the last turn back. The status line shows each turn's time to first
// token, tokens/s and how many tokens it prefilled.
import { load } from '/web/tandem.js';

const $ = (id) => document.getElementById(id);
const model = await load('/demo/chat.tandem', { worker: true });
// sampled (a small model's greedy replies repeat themselves); a reply also ends where the model
// starts another turn
const OPTIONS = { system: 'You answer with a fortune.', temperature: 0.7, topK: 40, seed: 1,
  stop: model.tokenizer.encode('<|im_start|>', { addSpecialTokens: false }) };
let chat = model.chat(OPTIONS);
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

function busy(on) {
  document.body.dataset.busy = on ? '1' : '0';
  for (const id of ['send', 'again', 'undo', 'clear']) $(id).disabled = on;
  $('stop').disabled = !on;
}

function report(s) {
  const ms = (x) => (x === null ? '–' : `${x.toFixed(0)} ms`);
  $('status').textContent = `${s.newTokens} tokens (${s.reason}); first token after ${ms(s.ttftMs)}, ` +
    `${s.tokensPerSecond === null ? '–' : s.tokensPerSecond.toFixed(1)} tokens/s; prefilled ${s.prefillTokens} of ` +
    `${s.promptTokens} tokens (${s.cachedTokens} from the ${s.restored === 'cache' ? 'cache' : s.restored === 'snapshot' ?
      'saved state' : 'start'})` + (s.droppedMessages ? `; the ${s.droppedMessages} oldest messages left out to fit the cache` : '');
}

/** Runs one turn (chat.send or chat.regenerate) into a new reply bubble. */
async function turn(run) {
  const reply = bubble('assistant', '');
  busy(true);
  controller = new AbortController();
  const options = {
    maxNewTokens: Number($('max-tokens').value) || 48, signal: controller.signal,
    onText: (piece) => {
      reply.textContent += piece;
      $('log').scrollTop = $('log').scrollHeight;
    },
  };
  try {
    reply.textContent = await run(options);
    report(chat.stats);
    return true;
  } catch (e) {
    reply.remove();
    $('status').textContent = `${e.code ?? e.name}: ${e.message}`;
    return false;
  } finally {
    controller = null;
    busy(false);
  }
}

async function send(text) {
  const mine = bubble('user', text);
  if (!await turn((o) => chat.send(text, o))) mine.remove();
}

$('chat-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('input').value.trim();
  if (!text || controller) return;
  $('input').value = '';
  send(text);
});
$('stop').addEventListener('click', () => controller?.abort());
$('again').addEventListener('click', async () => {
  if (controller || chat.messages.at(-1)?.role !== 'assistant') return;
  const last = $('log').querySelector('.msg.assistant:last-child');
  last?.remove();
  await turn((o) => chat.regenerate(o));
});
$('undo').addEventListener('click', async () => {
  if (controller || !chat.messages.some((m) => m.role === 'user')) return;
  await chat.undo();
  // the bubbles after the last user message, and that message
  const bubbles = [...$('log').children];
  const at = bubbles.findLastIndex((b) => b.classList.contains('user'));
  bubbles.slice(at).forEach((b) => b.remove());
  $('status').textContent = 'the last turn was taken back';
});
$('clear').addEventListener('click', () => {
  chat.dispose();
  chat = model.chat(OPTIONS);
  $('log').replaceChildren();
  $('status').textContent = '';
});
busy(false);
document.body.dataset.ready = '1';
