// The recorded video in the review page: the episode's H.264 Annex-B segments
// (video/NNNNNN.h264, each starting with SPS, PPS and an IDR frame) decoded
// with WebCodecs onto a canvas. frames.jsonl says where every frame is in its
// segment and when it was captured, so seeking to a time decodes from the
// keyframe before it; playing decodes on from there, frame after frame, at
// the recorded capture times (frames exist only when the screen changed).

/** avcCodec reads the codec string (avc1.PPCCLL) from the SPS in an access unit. */
export function avcCodec(au) {
  for (let i = 0; i + 7 < au.length; i++) {
    // Start code 00 00 01, then a NAL header whose type (low 5 bits) is 7.
    if (au[i] === 0 && au[i + 1] === 0 && au[i + 2] === 1 && (au[i + 3] & 0x1f) === 7) {
      const h = (b) => b.toString(16).padStart(2, '0');
      return `avc1.${h(au[i + 4])}${h(au[i + 5])}${h(au[i + 6])}`;
    }
  }
  return null;
}

/** frameAt is the index of the last frame captured at or before tUs (the first frame if none). */
export function frameAt(frames, tUs) {
  let lo = 0, hi = frames.length - 1, best = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (frames[mid].pts_us <= tUs) { best = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return best;
}

/** keyBefore is the index of the keyframe a decoder must start from to show frame i. */
export function keyBefore(frames, i) {
  // Every segment starts with one, so this never leaves frame i's segment.
  let k = i;
  while (k > 0 && !frames[k].key) k--;
  return k;
}

// aborted lets a flush cut short by a newer seek (a reset) pass quietly.
function aborted(e) {
  if (e?.name !== 'AbortError') throw e;
}

export class Player {
  /**
   * @param {{canvas: HTMLCanvasElement, frames: object[], width: number, height: number,
   *          segment: (n: number) => Promise<Uint8Array>, onFrame?: (i: number) => void}} o
   */
  constructor(o) {
    this.o = o;
    this.frames = o.frames;
    this.cur = -1; // the frame on the canvas
    this.segs = new Map();
    this.playing = false;
    this.ctx = o.canvas.getContext('2d');
    o.canvas.width = o.width;
    o.canvas.height = o.height;
  }

  /** supported reports why this browser cannot play the video, or '' if it can. */
  async init() {
    if (typeof VideoDecoder === 'undefined') return 'this browser has no WebCodecs VideoDecoder';
    if (this.frames.length === 0) return 'the episode has no video frames';
    const first = await this.#segment(this.frames[0].segment);
    const codec = avcCodec(first.subarray(this.frames[0].offset, this.frames[0].offset + this.frames[0].size));
    if (!codec) return 'the first video frame has no SPS';
    this.config = { codec, codedWidth: this.o.width, codedHeight: this.o.height, optimizeForLatency: true };
    const { supported } = await VideoDecoder.isConfigSupported(this.config);
    if (!supported) return `this browser cannot decode ${codec}`;
    this.#newDecoder();
    return '';
  }

  #newDecoder() {
    if (this.dec && this.dec.state !== 'closed') this.dec.close();
    this.dec = new VideoDecoder({
      output: (frame) => {
        this.ctx.drawImage(frame, 0, 0, this.o.canvas.width, this.o.canvas.height);
        const i = this.pending.shift();
        frame.close();
        if (i !== undefined) { this.cur = i; this.o.onFrame?.(i); }
      },
      error: (e) => { this.failed = e.message; },
    });
    this.dec.configure(this.config);
    this.pending = [];
  }

  async #segment(n) {
    if (!this.segs.has(n)) this.segs.set(n, this.o.segment(n));
    return this.segs.get(n);
  }

  async #feed(i) {
    const f = this.frames[i];
    const seg = await this.#segment(f.segment);
    this.pending.push(i);
    this.dec.decode(new EncodedVideoChunk({ type: f.key ? 'key' : 'delta', timestamp: f.pts_us, data: seg.subarray(f.offset, f.offset + f.size) }));
  }

  /** seek shows the frame on screen at tUs: decoded from the keyframe before it. */
  async seek(tUs) {
    this.pause();
    await this.show(frameAt(this.frames, tUs));
  }

  // restart empties the decoder: after a reset (or a flush) it takes only a
  // keyframe, so decoding always starts again from one.
  #restart() {
    if (this.dec.state === 'closed' || this.failed) { this.failed = null; this.#newDecoder(); return; }
    this.dec.reset();
    this.dec.configure(this.config);
    this.pending = [];
  }

  /** show decodes frame i (from the keyframe before it) and waits until it is drawn. */
  async show(i) {
    this.#restart();
    for (let k = keyBefore(this.frames, i); k <= i; k++) await this.#feed(k);
    await this.dec.flush().catch(aborted);
  }

  /** play decodes on from the frame shown, at the recorded pace. */
  async play() {
    if (this.playing) return;
    this.playing = true;
    this.o.onFrame?.(this.cur);
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    let i = this.cur + 1;
    if (i >= this.frames.length) i = 0; // at the end: from the start
    // No flush while playing (a flushed decoder wants a keyframe again):
    // frames are fed one by one and drawn as they come out.
    this.#restart();
    for (let k = keyBefore(this.frames, i); k < i; k++) await this.#feed(k);
    while (this.playing && i < this.frames.length) {
      if (i > 0) await sleep(Math.min(2000, (this.frames[i].pts_us - this.frames[i - 1].pts_us) / 1000));
      if (!this.playing) break;
      await this.#feed(i++);
    }
    await this.dec.flush().catch(aborted);
    this.playing = false;
    this.o.onFrame?.(this.cur);
  }

  pause() { this.playing = false; }

  close() {
    this.pause();
    if (this.dec && this.dec.state !== 'closed') this.dec.close();
  }
}
