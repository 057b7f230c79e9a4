// The link panel: on demand, the numbers of this viewer's link, refreshed
// every second, as the browser measures them (RTCPeerConnection.getStats)
// beside what the server says of the same link ({"type":"stats"} on the
// signalling socket, docs/STREAM.md). Two views, because they disagree when
// it matters: the server sends what congestion control allows, the browser
// shows what arrived.

const REFRESH_MS = 1000;

/** isLinkKey is the panel's shortcut, Ctrl+Alt+S by position (any layout). */
export function isLinkKey(e) {
  return e.code === 'KeyS' && e.ctrlKey && e.altKey && !e.shiftKey && !e.metaKey;
}

/**
 * readBrowserLink reads pc's numbers now; prev is the last reading (or null),
 * for rates over the interval between the two.
 */
export async function readBrowserLink(pc, prev) {
  const now = performance.now();
  const out = { t: now, transport: null, rttMs: null, kbps: null, fps: null, loss: null, bytes: 0, frames: 0, lost: 0, received: 0, keyframes: null, width: null, height: null };
  if (!pc) return out;
  const report = await pc.getStats();
  let pairId = null;
  let inbound = null;
  report.forEach((s) => {
    if (s.type === 'inbound-rtp' && (s.kind === 'video' || s.mediaType === 'video')) inbound = s;
    else if (s.type === 'transport' && s.selectedCandidatePairId) pairId = s.selectedCandidatePairId;
  });
  let pair = pairId ? report.get(pairId) : null;
  if (!pair) {
    // Firefox has no transport stats: the nominated, succeeded pair is the one in use.
    report.forEach((s) => {
      if (s.type === 'candidate-pair' && s.state === 'succeeded' && (s.nominated || s.selected)) pair = s;
    });
  }
  if (pair) {
    if (typeof pair.currentRoundTripTime === 'number') out.rttMs = pair.currentRoundTripTime * 1000;
    const local = report.get(pair.localCandidateId);
    const remote = report.get(pair.remoteCandidateId);
    if (local?.candidateType === 'relay' || remote?.candidateType === 'relay') out.transport = 'relay';
    else if (local?.protocol) out.transport = String(local.protocol).toLowerCase();
  }
  if (inbound) {
    out.bytes = inbound.bytesReceived ?? 0;
    out.frames = inbound.framesDecoded ?? 0;
    out.lost = Math.max(0, inbound.packetsLost ?? 0);
    out.received = inbound.packetsReceived ?? 0;
    out.keyframes = inbound.keyFramesDecoded ?? null;
    out.width = inbound.frameWidth ?? null;
    out.height = inbound.frameHeight ?? null;
    // Rates over the interval since the last reading, not since the start:
    // a link that got worse a minute ago must show it now. A counter that
    // went backwards is a new peer connection: no rate until the next one.
    const dt = prev ? (now - prev.t) / 1000 : 0;
    if (prev && dt > 0.2 && out.bytes >= prev.bytes && out.frames >= prev.frames) {
      out.kbps = ((out.bytes - prev.bytes) * 8) / 1000 / dt;
      out.fps = (out.frames - prev.frames) / dt;
      const lost = Math.max(0, out.lost - prev.lost);
      const got = Math.max(0, out.received - prev.received);
      out.loss = lost + got > 0 ? lost / (lost + got) : 0;
    } else if (typeof inbound.framesPerSecond === 'number') {
      out.fps = inbound.framesPerSecond;
    }
  }
  return out;
}

/**
 * readWSLink is readBrowserLink for the websocket transport: c is the
 * decoder's counters (wsvideo.js), rttMs the signalling ping's round trip.
 */
export function readWSLink(c, rttMs, prev) {
  const now = performance.now();
  const out = { t: now, transport: 'websocket', rttMs: rttMs ?? null, kbps: null, fps: null, loss: null,
    bytes: c.bytesReceived, frames: c.framesDecoded, lost: 0, received: 0, keyframes: c.keyframes,
    width: c.width || null, height: c.height || null };
  const dt = prev ? (now - prev.t) / 1000 : 0;
  if (prev && dt > 0.2 && out.bytes >= prev.bytes && out.frames >= prev.frames) {
    out.kbps = ((out.bytes - prev.bytes) * 8) / 1000 / dt;
    out.fps = (out.frames - prev.frames) / dt;
  }
  return out;
}

const dash = '–';
const num = (v, digits = 0) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(digits) : dash);
const unit = (v, u, digits = 0) => (typeof v === 'number' && Number.isFinite(v) ? `${v.toFixed(digits)} ${u}` : dash);
// Loopback round trips are a fraction of a millisecond: keep them readable.
const ms = (v) => unit(v, 'ms', typeof v === 'number' && v < 10 ? 2 : 0);
// A video size; the server's is the size it sends, which congestion control
// halves on a thin link (docs/STREAM.md).
const size = (w, h) => (w > 0 && h > 0 ? `${w}×${h}` : dash);
const pct = (v) => (typeof v === 'number' && Number.isFinite(v) ? `${(v * 100).toFixed(1)} %` : dash);

// The rows: each has a cell for the browser's view and one for the
// server's; data-k names them for tests and for anyone reading the DOM.
const ROWS = [
  ['transport', 'transport'],
  ['rtt', 'round trip'],
  ['kbps', 'bitrate'],
  ['fps', 'frames/s'],
  ['loss', 'loss'],
  ['target', 'target'],
  ['size', 'video size'],
  ['estimate', 'estimate'],
  ['keyframes', 'keyframes'],
];

/** LinkPanel is the toolbar button, its shortcut and the overlay they show. */
export class LinkPanel {
  /**
   * @param {{session: import('./session.js').Session, button: HTMLButtonElement,
   *          panel: HTMLElement, stage?: HTMLElement}} o
   */
  constructor({ session, button, panel, stage }) {
    this.session = session;
    this.button = button;
    this.panel = panel;
    this.stage = stage;
    this.timer = 0;
    this.prev = null; // the last browser reading
    this.server = null; // the last {"type":"stats"} answer
    this.last = null; // the last browser reading shown
    this.busy = false;
    this.swallowKeyUp = false;
    this.cells = this.#build();
    button.setAttribute('aria-pressed', 'false');
    button.addEventListener('click', () => {
      this.toggle();
      stage?.focus({ preventScroll: true });
    });
    session.addEventListener('linkstats', (e) => { this.server = e.detail; this.#render(this.last); });
    // Caught on the window before the stage's input capture sees it, like
    // the privacy key: the desktop never gets the S. Ctrl and Alt went down
    // on the desktop already and come up there when the person lets go.
    window.addEventListener('keydown', (e) => {
      if (!isLinkKey(e)) return;
      e.preventDefault();
      e.stopImmediatePropagation();
      this.swallowKeyUp = true;
      if (!e.repeat) this.toggle();
    }, { capture: true });
    window.addEventListener('keyup', (e) => {
      if (e.code !== 'KeyS' || !this.swallowKeyUp) return;
      this.swallowKeyUp = false;
      e.preventDefault();
      e.stopImmediatePropagation();
    }, { capture: true });
  }

  get shown() { return !this.panel.hidden; }

  toggle(on = !this.shown) {
    this.panel.hidden = !on;
    this.button.setAttribute('aria-pressed', String(on));
    this.button.classList.toggle('active', on);
    clearInterval(this.timer);
    this.timer = 0;
    if (!on) return;
    // Old numbers would read as current ones: start from nothing.
    this.prev = null;
    this.server = null;
    this.last = null;
    this.#render(null);
    this.#tick();
    this.timer = setInterval(() => this.#tick(), REFRESH_MS);
  }

  #build() {
    const table = document.createElement('table');
    const head = table.createTHead().insertRow();
    for (const h of ['', 'browser', 'server']) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = h;
      head.append(th);
    }
    const body = table.createTBody();
    const cells = {};
    for (const [k, label] of ROWS) {
      const tr = body.insertRow();
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = label;
      tr.append(th);
      const b = tr.insertCell();
      const s = tr.insertCell();
      b.dataset.k = `browser-${k}`;
      s.dataset.k = `server-${k}`;
      cells[k] = { b, s };
    }
    this.panel.replaceChildren(table);
    return cells;
  }

  async #tick() {
    if (this.busy) return; // getStats slower than a second: skip, never pile up
    this.busy = true;
    try {
      // Not connected: the last answer is no longer this link's.
      if (!this.session.sendSignal({ type: 'stats' })) this.server = null;
      const wsv = this.session.wsv;
      const r = wsv ? readWSLink(wsv.stats(), this.session.rttMs, this.prev) : await readBrowserLink(this.session.pc, this.prev);
      if (!this.shown) return;
      this.prev = r;
      this.last = r;
      this.#render(r);
    } catch (e) {
      this.session.log(`link numbers: ${e.message}`);
    } finally {
      this.busy = false;
    }
  }

  #render(r) {
    const l = this.server?.link ?? null;
    const cc = this.server?.congestion_control;
    const set = (k, b, s) => { this.cells[k].b.textContent = b; this.cells[k].s.textContent = s; };
    set('transport', r?.transport ?? dash, l?.transport || dash);
    set('rtt', ms(r?.rttMs), l && l.rtt_ms > 0 ? ms(l.rtt_ms) : dash);
    set('kbps', unit(r?.kbps, 'kbit/s'), unit(l?.sent_kbps, 'kbit/s'));
    set('fps', num(r?.fps), num(l?.fps));
    set('loss', r?.loss == null ? dash : `${pct(r.loss)} (${r.lost} lost)`,
      l ? `${pct(l.loss)} (${l.packets_lost} lost)` : dash);
    set('target', dash, l ? `${l.target_kbps} kbit/s at ${l.target_fps} fps` : dash);
    set('size', size(r?.width, r?.height), size(l?.target_width, l?.target_height));
    set('estimate', dash, !l ? dash : cc === false ? 'off (fixed bitrate)' : unit(l.estimate_kbps, 'kbit/s'));
    set('keyframes', num(r?.keyframes), l ? num(l.keyframes_total) : dash);
  }
}
