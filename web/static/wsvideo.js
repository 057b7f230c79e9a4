// Video over the signalling websocket: the one-port fallback for when WebRTC
// cannot get through (no UDP, no TURN, an ingress that carries only HTTP).
// Each binary message is one H.264 access unit with a 14-byte header
// (docs/STREAM.md, "Video over the websocket"); WebCodecs decodes it and the
// pictures play in the page's own <video> element, so its geometry, the
// input's coordinate mapping and everything that watches the element stay
// as they are with WebRTC.

export const HEADER = 14;
const VERSION = 1;
const FLAG_KEY = 1;

/** parseFrame reads one video message; null if it is not one. */
export function parseFrame(buf) {
  if (!(buf instanceof ArrayBuffer) || buf.byteLength < HEADER) return null;
  const dv = new DataView(buf);
  if (dv.getUint8(0) !== VERSION) return null;
  return {
    key: (dv.getUint8(1) & FLAG_KEY) !== 0,
    seq: dv.getUint32(2),
    atUs: Number(dv.getBigUint64(6)),
    au: new Uint8Array(buf, HEADER),
  };
}

/** nalUnits splits an Annex-B access unit into its NAL units (without start codes). */
export function nalUnits(au) {
  const out = [];
  let start = -1;
  for (let i = 0; i + 3 <= au.length;) {
    if (au[i] === 0 && au[i + 1] === 0 && au[i + 2] === 1) {
      if (start >= 0) {
        let end = i;
        while (end > start && au[end - 1] === 0) end--;
        out.push(au.subarray(start, end));
      }
      i += 3;
      start = i;
    } else {
      i++;
    }
  }
  if (start >= 0 && start < au.length) out.push(au.subarray(start));
  return out;
}

const hex2 = (b) => b.toString(16).padStart(2, '0');

/**
 * codecFromSPS is the WebCodecs codec string (avc1.PPCCLL) of the access
 * unit's sequence parameter set, or null if it has none: profile, constraint
 * flags and level are the three bytes after the SPS's NAL header.
 */
export function codecFromSPS(au) {
  for (const n of nalUnits(au)) {
    if ((n[0] & 0x1f) === 7 && n.length >= 4) return `avc1.${hex2(n[1])}${hex2(n[2])}${hex2(n[3])}`;
  }
  return null;
}

/**
 * spsOf is the access unit's sequence parameter set as a string of its
 * bytes (to compare), or null if it has none.
 */
export function spsOf(au) {
  for (const n of nalUnits(au)) {
    if ((n[0] & 0x1f) === 7) return Array.from(n, hex2).join('');
  }
  return null;
}

/**
 * WSVideo decodes the websocket's video into a <video> element and
 * acknowledges each frame (ack(seq, decodeMs)), which is how the server
 * paces this transport.
 */
export class WSVideo {
  /** @param {{video: HTMLVideoElement, ack: (seq: number, decodeMs: number) => void, log: (m: string) => void, onError: (m: string) => void}} o */
  constructor({ video, ack, log, onError }) {
    this.video = video;
    this.ack = ack;
    this.log = log;
    this.onError = onError;
    this.codec = null;
    this.sps = null; // the last sequence parameter set, as hex
    this.waitKey = true;
    this.pending = new Map(); // decoder timestamp -> {seq, recvAt}
    this.closed = false;
    this.counters = { framesReceived: 0, framesDecoded: 0, framesDropped: 0, bytesReceived: 0, keyframes: 0, width: 0, height: 0 };
    this.#output();
    this.decoder = new VideoDecoder({
      output: (frame) => this.#show(frame),
      error: (e) => { if (!this.closed) this.onError(`the video decoder failed: ${e.message}`); },
    });
  }

  /** supported reports whether this browser can decode the fallback's video. */
  static supported() {
    return typeof VideoDecoder === 'function' && typeof EncodedVideoChunk === 'function';
  }

  // output sets the element playing a stream the decoded pictures are
  // written to: a track generator where there is one (Chromium), else a
  // canvas's capture stream.
  #output() {
    if (typeof MediaStreamTrackGenerator === 'function') {
      const gen = new MediaStreamTrackGenerator({ kind: 'video' });
      this.writer = gen.writable.getWriter();
      this.track = gen;
    } else {
      this.canvas = document.createElement('canvas');
      this.ctx = this.canvas.getContext('2d');
      this.track = this.canvas.captureStream().getVideoTracks()[0];
    }
    this.video.srcObject = new MediaStream([this.track]);
    const p = this.video.play();
    if (p) p.catch(() => {}); // the session reports autoplay trouble for WebRTC the same way
  }

  /** handle takes one binary websocket message. */
  handle(buf) {
    if (this.closed) return;
    const f = parseFrame(buf);
    if (!f) {
      this.log(`websocket video: a message of ${buf.byteLength ?? 0} bytes is not a video frame`);
      return;
    }
    const c = this.counters;
    c.framesReceived++;
    c.bytesReceived += buf.byteLength;
    if (f.key) {
      c.keyframes++;
      // A new SPS (congestion control's size rung opens the encoder again
      // at another size, docs/STREAM.md) starts the decoder afresh at this
      // keyframe: the decoder is not left to notice the size by itself.
      const codec = codecFromSPS(f.au);
      const sps = spsOf(f.au);
      if (codec && (codec !== this.codec || sps !== this.sps)) {
        this.decoder.configure({ codec, optimizeForLatency: true });
        if (codec !== this.codec) this.log(`websocket video: ${codec}`);
        this.codec = codec;
        this.sps = sps;
      }
      this.waitKey = false;
    }
    if (this.waitKey || !this.codec || this.decoder.state !== 'configured') {
      // Nothing to decode it against: count it delivered so the server's
      // pacing sees the link, not the wait for a keyframe.
      c.framesDropped++;
      this.ack(f.seq, 0);
      return;
    }
    this.pending.set(f.atUs, { seq: f.seq, recvAt: performance.now() });
    this.decoder.decode(new EncodedVideoChunk({ type: f.key ? 'key' : 'delta', timestamp: f.atUs, data: f.au }));
  }

  #show(frame) {
    const p = this.pending.get(frame.timestamp);
    this.pending.delete(frame.timestamp);
    const c = this.counters;
    c.framesDecoded++;
    c.width = frame.displayWidth;
    c.height = frame.displayHeight;
    if (this.closed) {
      frame.close();
      return;
    }
    if (this.writer) {
      this.writer.write(frame).catch(() => frame.close());
    } else {
      if (this.canvas.width !== frame.displayWidth || this.canvas.height !== frame.displayHeight) {
        this.canvas.width = frame.displayWidth;
        this.canvas.height = frame.displayHeight;
      }
      this.ctx.drawImage(frame, 0, 0);
      frame.close();
    }
    if (p) this.ack(p.seq, performance.now() - p.recvAt);
  }

  stats() { return { ...this.counters, decodeQueue: this.decoder?.decodeQueueSize ?? 0 }; }

  close() {
    if (this.closed) return;
    this.closed = true;
    try { if (this.decoder.state !== 'closed') this.decoder.close(); } catch {}
    try { this.writer?.close(); } catch {}
    try { this.track?.stop(); } catch {}
  }
}
