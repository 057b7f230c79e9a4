// The review page: the recorded episodes this link may see (GET
// api/recording/episodes: an annotator's own, an operator's all), filtered by
// task, review status and source; one episode step by step (GET
// api/recording/episodes/{id}): each step's action in the computer tool's
// schema, its before and after observations side by side with the point it
// acted on drawn over them, typed text shown; Accept or Reject with a note
// (PUT api/recording/episodes/{id}/review). The token comes from the page's
// ?token= and goes in the Authorization header; observations are fetched the
// same way and shown as blob: URLs, so no token ever sits in an image URL.

import { Player } from './player.js';

const SVG = 'http://www.w3.org/2000/svg';
// Observations of the first steps load at once; the rest as they scroll
// near (an hour's episode has thousands).
const EAGER_STEPS = 8;

/** apiURL is an endpoint next to the page (works under /d/{i}/ too). */
export function apiURL(loc, path) {
  return new URL(path, new URL(loc.href)).toString();
}

/** keep reports whether an episode passes the filters {task, status, source} ('' passes all). */
export function keep(ep, f) {
  return (!f.task || ep.task_id === f.task) && (!f.status || (ep.review?.status || 'unreviewed') === f.status) &&
    (!f.source || ep.source === f.source);
}

/**
 * marks is what to draw for an action on its observations, in model pixels:
 * {kind: 'point', x, y} where it clicked, moved, pressed or scrolled,
 * {kind: 'drag', x0, y0, x, y} for a drag, {kind: 'region', x0, y0, x1, y1}
 * for a zoom; none for actions without a place.
 */
export function marks(a) {
  const out = [];
  if (!a) return out;
  const c = a.coordinate, s = a.start_coordinate, r = a.region;
  if (Array.isArray(s) && Array.isArray(c)) out.push({ kind: 'drag', x0: s[0], y0: s[1], x: c[0], y: c[1] });
  else if (Array.isArray(c)) out.push({ kind: 'point', x: c[0], y: c[1] });
  if (Array.isArray(r) && r.length === 4) out.push({ kind: 'region', x0: r[0], y0: r[1], x1: r[2], y1: r[3] });
  return out;
}

/** when formats an RFC 3339 time as local "YYYY-MM-DD HH:MM:SS". */
export function when(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

const $ = (id) => document.getElementById(id);
const token = new URL(location.href).searchParams.get('token');
const auth = token ? { Authorization: `Bearer ${token}` } : {};

async function call(method, path, body) {
  const res = await fetch(apiURL(location, path), {
    method, headers: { ...auth, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined,
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw Object.assign(new Error(data.error || res.statusText), { status: res.status });
  return data;
}

let toastTimer = 0;
function toast(text, ms = 3000) {
  const t = $('toast');
  t.textContent = text;
  t.classList.add('show');
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => t.classList.remove('show'), ms);
}

function el(tag, props = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  e.append(...kids);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

const epURL = (id) => `api/recording/episodes/${encodeURIComponent(id)}`;

// ---- the list

const state = { episodes: [], episode: null, urls: [] };

function filters() {
  return { task: $('f-task').value, status: $('f-status').value, source: $('f-source').value };
}

function renderList() {
  const f = filters();
  const shown = state.episodes.filter((ep) => keep(ep, f));
  $('list-count').textContent = `${shown.length} of ${state.episodes.length} episodes`;
  $('episode-rows').replaceChildren(...shown.map((ep) => {
    const open = el('button', { type: 'button', text: ep.task_id || '(no task)', 'data-episode': ep.episode_id });
    open.addEventListener('click', () => { location.hash = encodeURIComponent(ep.episode_id); });
    const status = ep.review?.status || 'unreviewed';
    return el('tr', { 'data-episode': ep.episode_id },
      el('td', {}, open, el('span', { class: 'eid mono', text: ep.episode_id })),
      el('td', { text: ep.source }),
      el('td', { class: 'mono', text: ep.recorded_by || '–' }),
      el('td', { text: when(ep.started_at) }),
      el('td', { text: String(ep.steps) }),
      el('td', { text: ep.reward == null ? '–' : String(ep.reward) }),
      el('td', {}, el('span', { class: 'rv', 'data-status': status, text: status, title: ep.review?.note || '' })));
  }));
  const empty = $('list-empty');
  empty.hidden = shown.length > 0;
  empty.textContent = state.episodes.length === 0 ? 'No episodes recorded with this link yet.' : 'No episode matches the filters.';
}

async function loadList() {
  try {
    state.episodes = (await call('GET', 'api/recording/episodes')).episodes || [];
  } catch (err) {
    $('list-empty').hidden = false;
    $('list-empty').textContent = `The episodes cannot be listed: ${err.message}`;
    return;
  }
  const sel = $('f-task');
  const had = sel.value;
  const tasks = [...new Set(state.episodes.map((e) => e.task_id).filter(Boolean))].sort();
  sel.replaceChildren(el('option', { value: '', text: 'all' }), ...tasks.map((t) => el('option', { value: t, text: t })));
  sel.value = tasks.includes(had) ? had : '';
  renderList();
}

for (const id of ['f-task', 'f-status', 'f-source']) $(id).addEventListener('change', renderList);

// ---- one episode

function forget() {
  for (const u of state.urls) URL.revokeObjectURL(u);
  state.urls = [];
  state.observer?.disconnect();
  state.player?.close();
  state.player = null;
}

// ---- the recorded video

function showTime(i) {
  const p = state.player;
  if (!p || i < 0) return;
  const t = p.frames[i].pts_us / 1e6;
  $('v-time').textContent = `${t.toFixed(2)} s · frame ${i + 1}/${p.frames.length}`;
  $('video-canvas').dataset.frame = String(i);
  if (document.activeElement !== $('v-seek')) $('v-seek').value = String(t);
  $('v-play').textContent = p.playing ? 'Pause' : 'Play';
}

async function loadVideo(d) {
  const box = $('video-box');
  box.hidden = true;
  const v = d.episode.video;
  if (!v || !d.frames?.length) return;
  const id = d.episode.id;
  const p = new Player({
    canvas: $('video-canvas'), frames: d.frames, width: v.width, height: v.height,
    segment: async (n) => {
      const res = await fetch(apiURL(location, `${epURL(id)}/video/${String(n).padStart(6, '0')}.h264`), { headers: auth });
      if (!res.ok) throw new Error(`video segment ${n}: ${res.status} ${res.statusText}`);
      return new Uint8Array(await res.arrayBuffer());
    },
    onFrame: showTime,
  });
  let why;
  try {
    why = await p.init();
  } catch (err) {
    why = err.message;
  }
  if (state.episode !== d) { p.close(); return; } // another episode opened meanwhile
  if (why) {
    $('ep-video').textContent += ` · not playable here: ${why}`;
    return;
  }
  state.player = p;
  $('v-seek').max = String(d.frames[d.frames.length - 1].pts_us / 1e6);
  box.hidden = false;
  await p.show(0);
  for (const b of document.querySelectorAll('.step-video')) b.hidden = false;
}

$('v-play').addEventListener('click', () => {
  const p = state.player;
  if (!p) return;
  if (p.playing) p.pause();
  else p.play();
  showTime(p.cur);
});
$('v-seek').addEventListener('input', () => state.player?.seek(Number($('v-seek').value) * 1e6));

/** seekStep shows the video at a step's start, and brings the video into view. */
function seekStep(st) {
  if (!state.player) return;
  state.player.seek(st.t_start * 1e6);
  $('video-box').scrollIntoView({ block: 'start' });
}

/** loadShot fetches an observation with the token and shows it in img. */
async function loadShot(img) {
  if (img.dataset.loading) return;
  img.dataset.loading = '1';
  try {
    const res = await fetch(apiURL(location, `${epURL(state.episode.episode.id)}/${img.dataset.file}`), { headers: auth });
    if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
    const u = URL.createObjectURL(await res.blob());
    state.urls.push(u);
    img.src = u;
  } catch (err) {
    img.replaceWith(el('span', { class: 'none', text: `cannot load ${img.dataset.file}: ${err.message}` }));
  }
}

function shotFigure(label, file, action, model, eager) {
  const cap = el('figcaption', { text: `${label}${file ? ` · ${file}` : ''}` });
  if (!file) return el('figure', { class: label }, cap, el('div', { class: 'shot' }, el('span', { class: 'none', text: 'no observation' })));
  const img = el('img', { alt: `${label}: the screen ${label === 'before' ? 'the step was taken on' : 'after the step'}`, 'data-file': file });
  img.width = model.width; img.height = model.height; // the box has its size before the image arrives
  const over = svg('svg', { viewBox: `0 0 ${model.width} ${model.height}`, preserveAspectRatio: 'none', 'aria-hidden': 'true' });
  const r = Math.max(6, Math.round(model.width / 70));
  for (const m of marks(action)) {
    if (m.kind === 'point') {
      over.append(svg('circle', { class: 'mark', cx: m.x + 0.5, cy: m.y + 0.5, r, 'data-x': m.x, 'data-y': m.y }),
        svg('circle', { class: 'mark-dot', cx: m.x + 0.5, cy: m.y + 0.5, r: Math.max(2, r / 5) }));
    } else if (m.kind === 'drag') {
      over.append(svg('line', { class: 'mark-line', x1: m.x0 + 0.5, y1: m.y0 + 0.5, x2: m.x + 0.5, y2: m.y + 0.5 }),
        svg('circle', { class: 'mark', cx: m.x0 + 0.5, cy: m.y0 + 0.5, r: r / 2, 'data-x': m.x0, 'data-y': m.y0 }),
        svg('circle', { class: 'mark', cx: m.x + 0.5, cy: m.y + 0.5, r, 'data-x': m.x, 'data-y': m.y }));
    } else {
      over.append(svg('rect', { class: 'mark', x: m.x0, y: m.y0, width: m.x1 - m.x0, height: m.y1 - m.y0 }));
    }
  }
  if (eager) loadShot(img);
  else state.observer.observe(img);
  return el('figure', { class: label }, cap, el('div', { class: 'shot' }, img, over));
}

function stepItem(st, model, i) {
  const a = st.action || {};
  const head = el('div', { class: 'step-head' },
    el('b', { text: `step ${st.step}` }),
    el('span', { text: `${a.action || '?'}` }),
    el('span', { class: 'mono', text: `t ${Number(st.t_start).toFixed(2)}–${Number(st.t_end).toFixed(2)} s` }),
    el('span', { text: st.source || '' }));
  const vb = el('button', { type: 'button', class: 'step-video', text: 'video', title: "show the recorded video at this step's start", hidden: true });
  vb.addEventListener('click', () => seekStep(st));
  head.append(vb);
  if (st.via) head.append(el('span', { text: `via ${st.via}` }));
  if (st.error) head.append(el('span', { class: 'err', text: `error: ${st.error}` }));
  if (st.after_missing) head.append(el('span', { text: 'no observation after (the recorder stopped first)' }));
  const li = el('li', { class: 'step', id: `step-${st.step}`, 'data-step': String(st.step) }, head,
    el('pre', { class: 'action', text: JSON.stringify(a) }));
  if (a.action === 'type' && typeof a.text === 'string') li.append(el('p', { class: 'typed' }, 'typed ', el('q', { text: a.text })));
  else if ((a.action === 'key' || a.action === 'hold_key') && a.text) li.append(el('p', { class: 'typed' }, 'keys ', el('q', { text: a.text })));
  const eager = i < EAGER_STEPS;
  li.append(el('div', { class: 'obs' }, shotFigure('before', st.before, a, model, eager), shotFigure('after', st.after, a, model, eager)));
  return li;
}

function renderReview(rev) {
  const s = $('rv-status');
  s.textContent = rev.status;
  s.dataset.status = rev.status;
  $('rv-by').textContent = rev.status === 'unreviewed' ? '' : `by ${rev.by || '?'} at ${when(rev.at)}${rev.note ? `: ${rev.note}` : ''}`;
}

async function openEpisode(id) {
  forget();
  let d;
  try {
    d = await call('GET', epURL(id));
  } catch (err) {
    toast(`episode ${id}: ${err.message}`, 5000);
    location.hash = '';
    return;
  }
  state.episode = d;
  state.observer = new IntersectionObserver((entries) => {
    for (const e of entries) if (e.isIntersecting) { state.observer.unobserve(e.target); loadShot(e.target); }
  }, { rootMargin: '800px' });
  const m = d.episode;
  const model = m.model?.width ? m.model : { width: 1280, height: 800 };
  $('ep-title').textContent = m.task?.id || m.id;
  $('ep-facts').textContent = [`episode ${m.id}`, m.source, m.recorded_by || '', when(m.started_at),
    `${Number(m.duration_s || 0).toFixed(1)} s`, `${d.steps.length} steps`, m.status].filter(Boolean).join(' · ');
  $('ep-instruction').textContent = m.task?.instruction || '';
  $('ep-instruction').hidden = !m.task?.instruction;
  const o = m.outcome;
  const out = $('ep-outcome');
  out.replaceChildren();
  if (o && o.reward != null) {
    out.dataset.ok = String(o.reward > 0);
    out.append(el('b', { text: `reward ${o.reward}` }), `${o.success != null ? (o.success ? ' · success' : ' · not a success') : ''}`,
      ...(o.reasons?.length ? [` · ${o.reasons.join('; ')}`] : []));
  } else {
    out.dataset.ok = 'false';
    out.append(o?.interrupted ? `interrupted: ${o.interrupted}` : 'not scored');
  }
  renderReview(d.review);
  $('rv-note').value = d.review.status === 'unreviewed' ? '' : (d.review.note || '');
  const segs = m.counts?.segments || 0;
  $('ep-video').textContent = segs ? `video: ${d.frames?.length || 0} frames in ${segs} H.264 segment${segs > 1 ? 's' : ''}` : 'no video recorded';
  $('steps').replaceChildren(...d.steps.map((st, i) => stepItem(st, model, i)));
  state.videoReady = loadVideo(d);
  $('list-view').hidden = true;
  $('episode-view').hidden = false;
  window.scrollTo(0, 0);
  $('back').focus();
}

async function review(status) {
  const d = state.episode;
  if (!d) return;
  const note = $('rv-note').value;
  for (const b of [$('rv-accept'), $('rv-reject')]) b.disabled = true;
  try {
    d.review = await call('PUT', `${epURL(d.episode.id)}/review`, { status, note });
    renderReview(d.review);
    const ep = state.episodes.find((e) => e.episode_id === d.episode.id);
    if (ep) ep.review = d.review;
    toast(`episode ${d.episode.id} ${status}`);
  } catch (err) {
    toast(`review: ${err.message}`, 5000);
  } finally {
    for (const b of [$('rv-accept'), $('rv-reject')]) b.disabled = false;
  }
}
$('rv-accept').addEventListener('click', () => review('accepted'));
$('rv-reject').addEventListener('click', () => review('rejected'));

function showList() {
  forget();
  state.episode = null;
  $('episode-view').hidden = true;
  $('list-view').hidden = false;
  renderList();
}
$('back').addEventListener('click', () => { location.hash = ''; });
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && !$('episode-view').hidden && e.target.tagName !== 'TEXTAREA') location.hash = '';
});

// The open episode is the URL's fragment, so back and reload keep it.
function route() {
  const id = decodeURIComponent(location.hash.slice(1));
  if (id) openEpisode(id);
  else showList();
}
window.addEventListener('hashchange', route);

// The desktop link keeps the token; the list needs a link that may see it
// (annotators and operators): others learn why without a refused call.
const desk = new URL('./', location.href);
if (token) desk.searchParams.set('token', token);
$('desktop-link').href = desk.toString();

async function main() {
  let role = null;
  try {
    const res = await fetch(apiURL(location, 'whoami'), { headers: auth });
    if (res.ok) role = (await res.json()).role;
  } catch { /* an older server: let the list's answer say */ }
  if (role !== null && !['annotator', 'operator', 'local'].includes(role)) {
    $('list-empty').hidden = false;
    $('list-empty').textContent = 'Reviewing needs an annotator or operator link (this one has none, or a viewer token).';
    return;
  }
  await loadList();
  route();
}
window.deskenvReview = { state, ready: main() };
