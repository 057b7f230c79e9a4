// The page: wires the session, the input capture and the toolbar together.

import { Session, signalURL } from './session.js';
import { Input } from './input.js';
import { Recording } from './recording.js';
import { Studio } from './studio.js';
import { LinkPanel } from './stats.js';

const $ = (id) => document.getElementById(id);
const el = {
  stage: $('stage'), video: $('video'), overlay: $('overlay'), overlayText: $('overlay-text'),
  playBtn: $('play-btn'), conn: $('conn'), fps: $('fps'), rtt: $('rtt'), viewOnly: $('viewonly'),
  hint: $('hint'), control: $('control'), viewersBtn: $('viewers-btn'), viewerCount: $('viewer-count'),
  clipBtn: $('clip-btn'), fsBtn: $('fs-btn'), viewersPanel: $('viewers-panel'), viewers: $('viewers'),
  policy: $('policy'), revoke: $('revoke'), clipPanel: $('clip-panel'), clipFrom: $('clip-from'),
  clipTo: $('clip-to'), clipCopy: $('clip-copy'), clipSend: $('clip-send'), toast: $('toast'),
  recPause: $('rec-pause'), reviewLink: $('review-link'),
};

const log = (msg) => console.debug(`[deskenv] ${msg}`);
const session = new Session({ url: signalURL(location), video: el.video, log });

// ---- who may act

function me() {
  return session.control?.viewers?.find((v) => v.id === session.you) ?? null;
}
function isOperator() { return session.hello?.role === 'operator'; }
function isViewOnly() { return !!(me()?.view_only || session.hello?.view_only); }
function policy() { return session.control?.policy ?? 'shared'; }
function holder() { return session.control?.holder ?? null; }
function canAct() {
  return session.state === 'connected' && session.inputOpen && !isViewOnly() &&
    policy() !== 'agent' && holder() != null && holder() === session.you;
}
function canRequest() { return !isViewOnly() && policy() !== 'agent' && session.control != null; }

function sendControl(op, extra = {}) {
  if (!session.sendSignal({ type: 'control', op, ...extra })) toast('not connected');
}

const input = new Input({
  stage: el.stage,
  video: el.video,
  send: (m) => session.sendInput(m),
  enabled: canAct,
  videoSize: () => ({ w: session.hello?.video?.w || el.video.videoWidth, h: session.hello?.video?.h || el.video.videoHeight }),
  maxBytes: () => session.maxInputBytes(),
  onClipTooLarge: (bytes, max) => toast(`clipboard text too large to send (${Math.ceil(bytes / 1024)} KiB, limit ${Math.floor(max / 1024)} KiB)`),
  onBlocked: (what) => {
    if (what !== 'pointer') return;
    if (isViewOnly()) toast('this link is view only');
    else if (policy() === 'agent') toast('the agent has control: people watch only');
    else if (holder() == null && canRequest()) { sendControl('request'); toast('requesting control…'); }
    else if (holder() != null && holder() !== session.you) toast(`${holder()} has control`);
  },
});

// ---- toolbar

let toastTimer = 0;
function toast(text, ms = 2500) {
  el.toast.textContent = text;
  el.toast.classList.add('show');
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.toast.classList.remove('show'), ms);
}

let retryAt = 0;
function renderState() {
  const s = session.state;
  el.conn.dataset.state = s;
  el.conn.textContent = s;
  el.conn.title = session.lastReason || '';
  const playing = s === 'connected' && el.video.readyState >= 2;
  el.overlay.hidden = playing && el.playBtn.hidden;
  if (!playing) {
    let text = s === 'connected' ? 'waiting for the first frame…' : s === 'idle' ? 'stopped' : `${s}…`;
    if ((s === 'reconnecting' || s === 'failed') && retryAt) {
      const secs = Math.max(0, Math.ceil((retryAt - performance.now()) / 1000));
      text = `${s === 'failed' ? 'cannot connect' : 'reconnecting'}${secs ? ` in ${secs} s` : '…'}`;
      if (session.lastReason) text += ` (${session.lastReason})`;
    }
    el.overlayText.textContent = text;
  }
  renderControl();
}

function renderControl() {
  const c = session.control;
  const b = el.control;
  b.classList.remove('primary', 'active');
  el.viewOnly.hidden = !isViewOnly();
  if (!c || session.state !== 'connected') {
    b.disabled = true;
    b.textContent = 'Request control';
  } else if (isViewOnly()) {
    b.disabled = true;
    b.textContent = holder() ? `${label(holder())} has control` : 'View only';
  } else if (policy() === 'agent') {
    b.disabled = true;
    b.textContent = 'Agent has control';
  } else if (holder() === session.you) {
    b.disabled = false;
    b.textContent = 'Release control';
    b.classList.add('active');
  } else if (holder() == null) {
    b.disabled = false;
    b.textContent = 'Request control';
    b.classList.add('primary');
  } else {
    b.disabled = false;
    b.textContent = isOperator() ? `Take control from ${label(holder())}` : `${label(holder())} has control`;
  }
  const acting = canAct();
  el.stage.classList.toggle('acting', acting);
  el.stage.classList.toggle('watching', !acting);
  el.hint.textContent = acting
    ? (document.activeElement === el.stage ? 'keyboard and mouse go to the desktop' : 'click the desktop to type')
    : '';
  renderViewers();
}

function label(id) { return id === session.you ? 'you' : id; }

function renderViewers() {
  const c = session.control;
  const list = c?.viewers ?? [];
  el.viewerCount.textContent = String(list.length);
  const op = isOperator();
  el.policy.disabled = !op || session.state !== 'connected';
  if (document.activeElement !== el.policy) el.policy.value = policy();
  el.revoke.parentElement.hidden = !op;
  el.revoke.disabled = !holder();
  el.viewers.replaceChildren(...list.map((v) => {
    const li = document.createElement('li');
    const who = document.createElement('span');
    who.className = 'who';
    who.textContent = v.id + (v.id === session.you ? ' (you)' : '');
    li.append(who);
    const tags = [];
    if (v.role === 'operator') tags.push(['operator', '']);
    if (v.view_only) tags.push(['view only', '']);
    if (c.holder === v.id) tags.push(['has control', 'holder']);
    for (const [t, cls] of tags) {
      const s = document.createElement('span');
      s.className = `tag ${cls}`;
      s.textContent = t;
      li.append(s);
    }
    if (op && !v.view_only && c.holder !== v.id) {
      const g = document.createElement('button');
      g.type = 'button';
      g.textContent = 'give control';
      g.addEventListener('click', () => sendControl('grant', { viewer: v.id }));
      li.append(g);
    }
    return li;
  }));
}

el.control.addEventListener('click', () => {
  if (holder() === session.you) {
    input.releaseAll();
    sendControl('release');
  } else if (holder() != null && isOperator()) {
    sendControl('grant', { viewer: session.you });
  } else {
    sendControl('request');
  }
  el.stage.focus({ preventScroll: true });
});
el.policy.addEventListener('change', () => sendControl('policy', { policy: el.policy.value }));
el.revoke.addEventListener('click', () => sendControl('revoke'));

function togglePanel(panel, other) {
  other.hidden = true;
  panel.hidden = !panel.hidden;
}
el.viewersBtn.addEventListener('click', () => togglePanel(el.viewersPanel, el.clipPanel));
el.clipBtn.addEventListener('click', () => { el.clipBtn.classList.remove('active'); togglePanel(el.clipPanel, el.viewersPanel); });
el.stage.addEventListener('pointerdown', () => { el.viewersPanel.hidden = true; el.clipPanel.hidden = true; });
el.stage.addEventListener('focus', renderControl);
el.stage.addEventListener('blur', renderControl);

// ---- clipboard

el.clipSend.addEventListener('click', () => {
  if (!canAct()) { toast('take control to set the desktop clipboard'); return; }
  if (input.sendClipboard(el.clipTo.value)) toast('sent to the desktop clipboard');
});
el.clipCopy.addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(el.clipFrom.value);
    toast('copied');
  } catch {
    el.clipFrom.select();
    toast('press ctrl+c to copy');
  }
});
session.addEventListener('clip', async (e) => {
  const text = e.detail.text;
  el.clipFrom.value = text;
  if (text === input.lastClip) return; // our own paste coming back
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Without permission the text waits in the panel.
    el.clipBtn.classList.add('active');
    toast('the desktop copied text: see clipboard');
  }
});

// ---- fullscreen

el.fsBtn.addEventListener('click', async () => {
  try {
    if (document.fullscreenElement) await document.exitFullscreen();
    else await el.stage.requestFullscreen({ navigationUI: 'hide' });
  } catch (e) {
    toast(`fullscreen refused: ${e.message}`);
  }
  el.stage.focus({ preventScroll: true });
});
document.addEventListener('fullscreenchange', async () => {
  // In fullscreen the keyboard lock lets Escape, ctrl+w and the like reach the desktop.
  const kb = navigator.keyboard;
  if (!kb?.lock) return;
  try {
    if (document.fullscreenElement) await kb.lock();
    else kb.unlock();
  } catch (e) {
    log(`keyboard lock: ${e.message}`);
  }
});

// ---- video

el.playBtn.addEventListener('click', () => {
  el.video.play().then(() => { el.playBtn.hidden = true; renderState(); }).catch((e) => toast(e.message));
});
session.addEventListener('autoplay', () => { el.playBtn.hidden = false; renderState(); });
for (const ev of ['loadeddata', 'playing', 'emptied', 'waiting']) el.video.addEventListener(ev, renderState);

// ---- session events

session.addEventListener('state', renderState);
session.addEventListener('retry', (e) => { retryAt = performance.now() + e.detail.inMs; renderState(); });
session.addEventListener('control', () => {
  if (!canAct()) input.forget();
  renderControl();
});
session.addEventListener('hello', renderControl);
session.addEventListener('input', renderControl);
session.addEventListener('servererror', (e) => toast(e.detail.message || e.detail.code || 'server error', 4000));
session.addEventListener('inputerror', (e) => toast(e.detail.message || 'input refused', 3000));
session.addEventListener('rtt', (e) => {
  el.rtt.textContent = `${Math.round(e.detail.ms)} ms`;
});

let last = null;
async function poll() {
  try {
    const s = await session.stats();
    let fps = s.fps;
    const now = performance.now();
    if (fps == null && last && s.framesDecoded >= last.framesDecoded) {
      fps = ((s.framesDecoded - last.framesDecoded) * 1000) / (now - last.t);
    }
    last = { framesDecoded: s.framesDecoded, t: now };
    el.fps.textContent = session.state === 'connected' && fps != null ? `${Math.round(fps)} fps` : '– fps';
    const parts = [];
    if (s.width) parts.push(`${s.width}×${s.height}`);
    if (s.codec) parts.push(s.codec.replace('video/', ''));
    if (s.jitterBufferMs != null) parts.push(`jitter buffer ${s.jitterBufferMs.toFixed(0)} ms`);
    parts.push(`decoded ${s.framesDecoded}`, `dropped ${s.framesDropped}`, `lost ${s.packetsLost}`);
    el.fps.title = parts.join(' · ');
    el.rtt.title = `signalling ping ${session.rttMs == null ? '–' : session.rttMs.toFixed(1)} ms · ICE ${s.iceRttMs == null ? '–' : s.iceRttMs.toFixed(1)} ms`;
    if (session.state !== 'connected') el.rtt.textContent = '– ms';
  } catch (e) {
    log(`stats: ${e.message}`);
  }
  renderState();
}
setInterval(poll, 1000);

// For tests and the latency benchmark.
window.deskenv = {
  get state() { return session.state; },
  get pc() { return session.pc; },
  get control() { return session.control; },
  get you() { return session.you; },
  get hello() { return session.hello; },
  get canAct() { return canAct(); },
  stats: () => session.stats(),
  session,
  input,
  video: el.video,
};

session.start();
el.stage.focus({ preventScroll: true });
renderState();

// The recording marker and, for operators, the record button.
const recording = new Recording({
  marker: $('rec'), button: $('rec-btn'), pause: $('rec-pause'),
  token: new URL(location.href).searchParams.get('token'), toast,
});
const recordingFromStream = () => recording.fromStream(session.control && session.control.recording);
session.addEventListener('control', recordingFromStream);
session.addEventListener('hello', recordingFromStream);

// The privacy pause is one key, Ctrl+Alt+P (by position, so any layout),
// which the desktop never gets: it is caught on the window before the
// stage's input capture sees it. Ctrl and Alt already went down on the
// desktop; they are let go there only once the recorder has paused (or
// resumed), so their releases fall inside the pause and the recording gets
// no stray "ctrl" or "alt" step (the reducer forgets modifiers held into a
// pause).
function isPrivacyKey(e) {
  return e.code === 'KeyP' && e.ctrlKey && e.altKey && !e.shiftKey && !e.metaKey;
}
let privacyPending = false;
// inputDelivered resolves once the input channel has sent what it holds,
// and a little after, for the desktop to have it (at most about a second).
async function inputDelivered() {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  for (let i = 0; i < 50 && (session.dc?.bufferedAmount ?? 0) > 0; i++) await sleep(20);
  await sleep(150);
}
window.addEventListener('keydown', async (e) => {
  if (!isPrivacyKey(e)) return;
  e.preventDefault();
  e.stopImmediatePropagation();
  if (e.repeat || privacyPending) return;
  if (!recording.status || el.recPause.hidden) {
    input.releaseAll();
    toast(recording.status ? 'Ctrl+Alt+P pauses a recording: nothing is being recorded' : 'Ctrl+Alt+P pauses a recording: this link may not record');
    return;
  }
  const wasPaused = recording.paused;
  privacyPending = true;
  let ok;
  if (wasPaused) {
    // Let go of the modifiers while still paused, and give the input
    // channel time to deliver that before the recorder listens again: the
    // resume goes over HTTP, which can overtake the data channel, and the
    // Ctrl and Alt that went down for this key would be recorded as steps.
    input.releaseAll();
    await inputDelivered();
    ok = await recording.togglePause();
  } else {
    ok = await recording.togglePause();
    input.releaseAll();
  }
  privacyPending = false;
  if (ok) toast(wasPaused ? 'recording resumed' : 'privacy pause: nothing is recorded until Ctrl+Alt+P again');
}, { capture: true });
window.addEventListener('keyup', (e) => {
  // P never went down on the desktop; the modifiers' releases wait for the
  // pause (releaseAll above sends them).
  const mod = ['ControlLeft', 'ControlRight', 'AltLeft', 'AltRight'].includes(e.code);
  if (e.code === 'KeyP' && e.ctrlKey && e.altKey || (privacyPending && mod)) {
    e.preventDefault();
    e.stopImmediatePropagation();
  }
}, { capture: true });

// The link numbers (Ctrl+Alt+S or the link button), caught like the privacy key.
window.deskenv.link = new LinkPanel({ session, button: $('link-btn'), panel: $('link-panel'), stage: el.stage });

// The task panel, for links that may list tasks (annotators, operators).
const studio = new Studio({
  el: {
    panel: $('studio'), pick: $('studio-pick'), search: $('task-search'), list: $('task-list'),
    seedInput: $('task-seed'), start: $('task-start'), runView: $('studio-run'), task: $('run-task'),
    instruction: $('run-instruction'), seed: $('run-seed'), timer: $('run-timer'), steps: $('run-steps'),
    finish: $('run-finish'), giveUp: $('run-giveup'), discard: $('run-discard'), result: $('studio-result'),
    resultTask: $('result-task'), reward: $('result-reward'), reasons: $('result-reasons'),
    episode: $('result-episode'), next: $('result-next'),
  },
  token: new URL(location.href).searchParams.get('token'),
  toast,
  onStart: () => {
    // The episode is the panel's: the plain Record button would stop it
    // without its end. Control is asked for at once, so the demonstrator
    // can start working on the desktop.
    recording.locked = true;
    recording.show(recording.status);
    if (holder() == null && canRequest()) sendControl('request');
    el.stage.focus({ preventScroll: true });
  },
  onEnd: () => { recording.locked = false; recording.poll(); },
});
window.deskenv.studio = studio;

// Which panels this link gets: the recorder's buttons and the task panel
// are for annotators and operators (and everyone without tokens). A server
// without whoami (an older one, a test's) leaves it to the APIs' answers.
async function whoami() {
  const token = new URL(location.href).searchParams.get('token');
  try {
    const res = await fetch(new URL('whoami', location.href), { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    if (res.ok) return await res.json();
  } catch (e) {
    log(`whoami: ${e.message}`);
  }
  return { role: null, who: null };
}
whoami().then(({ role, who }) => {
  window.deskenv.role = role;
  if (role === null || ['annotator', 'operator', 'local'].includes(role)) {
    recording.start();
    studio.load(who);
    // The review page, with this link's token (it goes in a header there).
    const u = new URL('review.html', location.href);
    const token = new URL(location.href).searchParams.get('token');
    if (token) u.searchParams.set('token', token);
    el.reviewLink.href = u.toString();
    el.reviewLink.hidden = false;
  }
});
