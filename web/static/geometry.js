// Element pixels -> video pixels for a video drawn with object-fit: contain.

/**
 * contentRect is where a picture of size pw x ph lands inside a box of size
 * bw x bh when scaled to fit with its aspect kept (letterboxed or pillarboxed).
 */
export function contentRect(bw, bh, pw, ph) {
  if (!(bw > 0 && bh > 0 && pw > 0 && ph > 0)) return { x: 0, y: 0, w: 0, h: 0 };
  const s = Math.min(bw / pw, bh / ph);
  const w = pw * s, h = ph * s;
  return { x: (bw - w) / 2, y: (bh - h) / 2, w, h };
}

/**
 * toVideo converts a point (px, py) relative to the box's top-left corner into
 * video pixel coordinates 0..vw-1, 0..vh-1. The decoded picture (pw x ph) sets
 * where the picture is drawn; the video size (vw x vh) the protocol speaks in
 * may differ if the picture was scaled. inside tells whether the point was on
 * the picture; x and y are clamped to it either way.
 */
export function toVideo(px, py, bw, bh, pw, ph, vw, vh) {
  const r = contentRect(bw, bh, pw, ph);
  if (r.w === 0 || !(vw > 0 && vh > 0)) return { x: 0, y: 0, inside: false };
  const fx = (px - r.x) / r.w, fy = (py - r.y) / r.h;
  const inside = fx >= 0 && fx < 1 && fy >= 0 && fy < 1;
  const clamp = (v, n) => Math.min(n - 1, Math.max(0, Math.floor(v * n)));
  return { x: clamp(fx, vw), y: clamp(fy, vh), inside };
}

/**
 * WheelAccumulator turns wheel deltas into whole notches, keeping the
 * remainder so slow trackpad scrolling still moves.
 */
export class WheelAccumulator {
  constructor({ pixelsPerNotch = 100, linesPerNotch = 3 } = {}) {
    this.ppn = pixelsPerNotch;
    this.lpn = linesPerNotch;
    this.ax = 0;
    this.ay = 0;
  }

  /** add takes a WheelEvent's deltaX/deltaY/deltaMode and returns whole notches {dx, dy}. */
  add(deltaX, deltaY, deltaMode) {
    const unit = deltaMode === 1 ? 1 / this.lpn : deltaMode === 2 ? 1 : 1 / this.ppn;
    // Turning the wheel back starts afresh: a leftover part-notch the other
    // way must not swallow the first notch of the new direction.
    if (deltaX * this.ax < 0) this.ax = 0;
    if (deltaY * this.ay < 0) this.ay = 0;
    this.ax += deltaX * unit;
    this.ay += deltaY * unit;
    const dx = Math.trunc(this.ax), dy = Math.trunc(this.ay);
    this.ax -= dx;
    this.ay -= dy;
    return { dx, dy };
  }

  reset() { this.ax = 0; this.ay = 0; }
}
