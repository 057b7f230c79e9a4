// Keyboard, mouse, wheel and clipboard from the page to the input data channel.

import { KeyTracker } from './keys.js';
import { toVideo, WheelAccumulator } from './geometry.js';

const PASTE_WAIT_MS = 250; // how long ctrl+v waits for the browser's paste event

/**
 * Input captures events on the stage element and sends them through send()
 * while enabled() says this viewer may act.
 */
export class Input {
  /**
   * @param {{stage: HTMLElement, video: HTMLVideoElement, send: (m: object) => boolean,
   *          enabled: () => boolean, videoSize: () => {w: number, h: number},
   *          onBlocked?: (why: string) => void, onClipTooLarge?: (bytes: number, max: number) => void,
   *          maxBytes?: () => number}} o
   */
  constructor(o) {
    this.o = o;
    this.keys = new KeyTracker();
    this.wheel = new WheelAccumulator();
    this.buttons = new Set();
    this.pendingMove = null; // {x, y} waiting for the next animation frame
    this.lastMove = null;
    this.raf = 0;
    this.holding = null; // messages queued while ctrl+v waits for the paste event
    this.lastClip = null;
    this.abort = new AbortController();
    this.#listen();
  }

  destroy() {
    this.releaseAll();
    this.abort.abort();
    cancelAnimationFrame(this.raf);
  }

  #send(m) {
    if (this.holding) {
      this.holding.queue.push(m);
      return true;
    }
    return this.o.send(m);
  }

  #listen() {
    const { stage } = this.o;
    const opt = { signal: this.abort.signal };
    const active = { signal: this.abort.signal, passive: false };
    stage.addEventListener('keydown', (e) => this.#keydown(e), active);
    stage.addEventListener('keyup', (e) => this.#keyup(e), active);
    stage.addEventListener('pointerdown', (e) => this.#pointerdown(e), active);
    stage.addEventListener('pointerup', (e) => this.#pointerup(e), active);
    stage.addEventListener('pointercancel', (e) => this.#pointerup(e), active);
    stage.addEventListener('pointermove', (e) => this.#pointermove(e), opt);
    stage.addEventListener('wheel', (e) => this.#onwheel(e), active);
    stage.addEventListener('contextmenu', (e) => e.preventDefault(), active);
    stage.addEventListener('blur', () => this.releaseAll(), opt);
    window.addEventListener('blur', () => this.releaseAll(), opt);
    document.addEventListener('visibilitychange', () => { if (document.hidden) this.releaseAll(); }, opt);
    document.addEventListener('paste', (e) => this.#onpaste(e), active);
  }

  /** releaseAll lets go of every key and button this page holds down. */
  releaseAll() {
    this.#flushHold();
    const syms = this.keys.releaseAll();
    const had = syms.length > 0 || this.buttons.size > 0;
    for (const k of syms) this.o.send({ t: 'ku', k });
    for (const b of this.buttons) this.o.send({ t: 'bu', b });
    this.buttons.clear();
    this.wheel.reset();
    if (had) this.o.send({ t: 'release' });
  }

  /** forget drops local key and button state without sending (control was lost; the server released them). */
  forget() {
    this.keys.releaseAll();
    this.buttons.clear();
    this.holding = null;
  }

  // ---- keyboard

  #keydown(e) {
    if (e.isComposing) return;
    if (!this.o.enabled()) {
      this.o.onBlocked?.('key');
      return;
    }
    const sym = this.keys.press(e);
    if (!sym) return;
    const pasteChord = (e.ctrlKey || e.metaKey) && !e.altKey && (e.key === 'v' || e.key === 'V');
    if (pasteChord && !e.repeat) {
      // Let the browser turn the chord into a paste event, so the desktop's
      // clipboard holds the page's text before the application sees ctrl+v.
      this.#startHold();
    } else {
      e.preventDefault();
    }
    this.#send({ t: 'kd', k: sym });
  }

  #keyup(e) {
    const sym = this.keys.release(e);
    if (!sym) return;
    e.preventDefault();
    this.#send({ t: 'ku', k: sym });
  }

  #startHold() {
    this.#flushHold();
    this.holding = { queue: [], timer: setTimeout(() => this.#flushHold(), PASTE_WAIT_MS) };
  }

  #flushHold() {
    const h = this.holding;
    if (!h) return;
    this.holding = null;
    clearTimeout(h.timer);
    for (const m of h.queue) this.o.send(m);
  }

  #onpaste(e) {
    const text = e.clipboardData?.getData('text/plain') ?? '';
    if (this.holding || document.activeElement === this.o.stage) e.preventDefault();
    if (text && this.o.enabled()) {
      // The clip goes out before the held ctrl+v keys.
      if (!this.sendClipboard(text)) this.lastClip = null;
    }
    this.#flushHold();
  }

  /** sendClipboard sets the desktop clipboard to text; false if too large or not sent. */
  sendClipboard(text) {
    const msg = { t: 'clip', text };
    const bytes = new TextEncoder().encode(JSON.stringify(msg)).length;
    const max = this.o.maxBytes?.() ?? 65536;
    if (bytes > max) {
      this.o.onClipTooLarge?.(bytes, max);
      return false;
    }
    this.lastClip = text;
    return this.o.send(msg);
  }

  // ---- pointer

  #point(e) {
    const r = this.o.video.getBoundingClientRect();
    const v = this.o.videoSize();
    const pw = this.o.video.videoWidth || v.w, ph = this.o.video.videoHeight || v.h;
    return toVideo(e.clientX - r.left, e.clientY - r.top, r.width, r.height, pw, ph, v.w, v.h);
  }

  #moveNow(p) {
    this.pendingMove = null;
    if (this.lastMove && this.lastMove.x === p.x && this.lastMove.y === p.y) return;
    this.lastMove = { x: p.x, y: p.y };
    this.#send({ t: 'mm', x: p.x, y: p.y });
  }

  #pointermove(e) {
    if (!this.o.enabled()) return;
    const p = this.#point(e);
    if (!p.inside && this.buttons.size === 0) return;
    this.pendingMove = p;
    if (!this.raf) {
      // One motion per frame: more would queue on the desktop and add delay.
      this.raf = requestAnimationFrame(() => {
        this.raf = 0;
        if (this.pendingMove) this.#moveNow(this.pendingMove);
      });
    }
  }

  #pointerdown(e) {
    this.o.stage.focus({ preventScroll: true });
    const b = { 0: 1, 1: 2, 2: 3 }[e.button];
    e.preventDefault(); // no text selection, no middle-click autoscroll
    if (!b) return;
    if (!this.o.enabled()) {
      this.o.onBlocked?.('pointer');
      return;
    }
    const p = this.#point(e);
    if (!p.inside) return;
    try { this.o.stage.setPointerCapture(e.pointerId); } catch {}
    this.#moveNow(p);
    this.buttons.add(b);
    this.#send({ t: 'bd', b });
  }

  #pointerup(e) {
    const b = { 0: 1, 1: 2, 2: 3 }[e.button];
    if (!b || !this.buttons.has(b)) return;
    e.preventDefault();
    if (e.type !== 'pointercancel') this.#moveNow(this.#point(e));
    this.buttons.delete(b);
    this.#send({ t: 'bu', b });
  }

  #onwheel(e) {
    e.preventDefault(); // the page itself never scrolls
    if (!this.o.enabled()) return;
    const p = this.#point(e);
    if (!p.inside) return;
    // Shift is mirrored to the desktop already, so the deltas go as the browser reports them.
    const n = this.wheel.add(e.deltaX, e.deltaY, e.deltaMode);
    if (n.dx === 0 && n.dy === 0) return;
    this.#moveNow(p);
    this.#send({ t: 'wh', dx: n.dx, dy: n.dy });
  }
}
