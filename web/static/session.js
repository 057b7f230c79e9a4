// One viewer's connection to the desktop: the signalling websocket, the peer
// connection with its video and "input" data channel, and reconnection with
// backoff whenever either drops. Speaks docs/STREAM.md.

import './lease.js'; // pool mode: give a leased desktop back when the page goes (lobby.js)
import { WSVideo } from './wsvideo.js';

const PING_EVERY_MS = 2000;
const DISCONNECTED_GRACE_MS = 4000; // "disconnected" often heals by itself; "failed" never does
const HELLO_TIMEOUT_MS = 10000;
const CONNECT_TIMEOUT_MS = 15000;
const FAILED_AFTER = 5; // consecutive attempts before the state reads "failed" (retries go on)
// FALLBACK_MS is how long WebRTC has to connect before the page asks for the
// video on the websocket instead (docs/STREAM.md, "Video over the websocket"):
// on a link where UDP gets through, ICE connects in well under a second.
const FALLBACK_MS = 5000;

/** transportOption is the ?transport= of the page's address: "websocket" forces the fallback. */
export function transportOption(loc) {
  try {
    return new URL(loc.href).searchParams.get('transport') === 'websocket' ? 'websocket' : 'auto';
  } catch {
    return 'auto';
  }
}

/** signalURL turns the page location into the websocket address, carrying ?token= along. */
export function signalURL(loc) {
  const page = new URL(loc.href);
  const u = new URL('stream/signal', page);
  u.protocol = page.protocol === 'https:' ? 'wss:' : 'ws:';
  const token = page.searchParams.get('token');
  u.search = '';
  if (token) u.searchParams.set('token', token);
  return u.toString();
}

/** backoffMs is the wait before attempt n (0-based) of reconnecting: 0.5 s doubling to 8 s, with jitter. */
export function backoffMs(n, rand = Math.random) {
  const base = Math.min(8000, 500 * 2 ** Math.min(n, 4));
  return Math.round(base * (0.75 + 0.5 * rand()));
}

// preferCodecs orders codecs the way the server chooses: constrained-baseline
// H.264 first, VP8 next (the server's fallback, for browsers without H.264),
// the rest after; everything stays for negotiation (RTX must stay for NACK to
// work). The server picks from what the offer holds, so a browser lacking
// H.264 simply gets VP8.
function preferCodecs(codecs) {
  const rank = (c) => {
    const mime = c.mimeType.toLowerCase();
    if (mime === 'video/vp8') return 3;
    if (mime !== 'video/h264') return 4;
    const f = c.sdpFmtpLine || '';
    if (!f.includes('packetization-mode=1')) return 2;
    return f.includes('profile-level-id=42e01f') ? 0 : 1;
  };
  return codecs.map((c, i) => [rank(c), i, c]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((x) => x[2]);
}

export class Session extends EventTarget {
  /**
   * @param {{url: string, video: HTMLVideoElement, log?: (msg: string) => void}} opts
   */
  constructor({ url, video, log, transport }) {
    super();
    this.url = url;
    // "websocket" skips WebRTC; after a fallback the page stays on the
    // websocket for its reconnections, which would only fail the same way.
    this.forceWS = (transport ?? (globalThis.location ? transportOption(globalThis.location) : 'auto')) === 'websocket';
    this.wsv = null; // the websocket transport's decoder, when in use
    this.wsReady = false; // the server confirmed the websocket transport
    this.video = video;
    this.log = log || (() => {});
    this.state = 'idle';
    this.hello = null; // the server's hello: id, role, screen, video, control
    this.control = null; // {holder, policy, viewers}
    this.you = null;
    this.rttMs = null;
    this.pc = null;
    this.dc = null;
    this.ws = null;
    this.gen = 0; // bumps on every attempt, so callbacks of a dead attempt do nothing
    this.failures = 0;
    this.timers = new Set();
    this.stopped = true;
    this.lastReason = '';
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.#attempt();
  }

  stop() {
    this.stopped = true;
    this.#teardown();
    this.#setState('idle');
  }

  /** sendInput puts one message on the input data channel; false if it is not open. */
  sendInput(msg) {
    if (this.wsv) return this.wsReady && this.sendSignal({ type: 'input', input: msg });
    if (!this.dc || this.dc.readyState !== 'open') return false;
    this.dc.send(JSON.stringify(msg));
    return true;
  }

  /** maxInputBytes is the largest input message the peer accepts. */
  maxInputBytes() {
    if (this.wsv) return 65536; // the server's input limit (Config.MaxInputBytes)
    const m = this.pc?.sctp?.maxMessageSize;
    return m && Number.isFinite(m) && m > 0 ? m : 65536;
  }

  /** sendSignal puts one message on the websocket; false if it is not open. */
  sendSignal(msg) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(msg));
    return true;
  }

  get inputOpen() {
    if (this.wsv) return this.wsReady && !!this.ws && this.ws.readyState === WebSocket.OPEN;
    return !!this.dc && this.dc.readyState === 'open';
  }

  /** transport is how the video comes: "websocket" or "webrtc". */
  get transport() { return this.wsv ? 'websocket' : 'webrtc'; }

  /** stats reads the video receiver's numbers now. */
  async stats() {
    const out = {
      state: this.state, framesDecoded: 0, framesReceived: 0, framesDropped: 0, fps: null,
      width: 0, height: 0, bytesReceived: 0, packetsLost: 0, freezeCount: 0,
      jitterBufferMs: null, iceRttMs: null, rttMs: this.rttMs, codec: null,
    };
    if (this.wsv) {
      const c = this.wsv.stats();
      Object.assign(out, {
        framesDecoded: c.framesDecoded, framesReceived: c.framesReceived, framesDropped: c.framesDropped,
        width: c.width, height: c.height, bytesReceived: c.bytesReceived, codec: 'video/H264', transport: 'websocket',
      });
      return out;
    }
    const pc = this.pc;
    if (!pc) return out;
    const report = await pc.getStats();
    let pairId = null;
    report.forEach((s) => {
      if (s.type === 'inbound-rtp' && (s.kind === 'video' || s.mediaType === 'video')) {
        out.framesDecoded = s.framesDecoded ?? 0;
        out.framesReceived = s.framesReceived ?? 0;
        out.framesDropped = s.framesDropped ?? 0;
        out.fps = s.framesPerSecond ?? null;
        out.width = s.frameWidth ?? 0;
        out.height = s.frameHeight ?? 0;
        out.bytesReceived = s.bytesReceived ?? 0;
        out.packetsLost = s.packetsLost ?? 0;
        out.freezeCount = s.freezeCount ?? 0;
        if (s.jitterBufferEmittedCount > 0) {
          out.jitterBufferMs = (1000 * s.jitterBufferDelay) / s.jitterBufferEmittedCount;
        }
        if (s.codecId && report.get(s.codecId)) out.codec = report.get(s.codecId).mimeType;
      } else if (s.type === 'transport' && s.selectedCandidatePairId) {
        pairId = s.selectedCandidatePairId;
      }
    });
    let pair = pairId ? report.get(pairId) : null;
    if (!pair) {
      report.forEach((s) => {
        if (s.type === 'candidate-pair' && s.state === 'succeeded' && (s.nominated || s.selected)) pair = s;
      });
    }
    if (pair && typeof pair.currentRoundTripTime === 'number') out.iceRttMs = pair.currentRoundTripTime * 1000;
    return out;
  }

  #emit(type, detail) { this.dispatchEvent(new CustomEvent(type, { detail })); }

  #setState(s, reason = '') {
    if (this.state === s && reason === this.lastReason) return;
    this.state = s;
    this.lastReason = reason;
    this.#emit('state', { state: s, reason });
  }

  #later(ms, fn) {
    const t = setTimeout(() => { this.timers.delete(t); fn(); }, ms);
    this.timers.add(t);
    return t;
  }

  #teardown() {
    this.gen++;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    if (this.dc) { this.dc.onopen = this.dc.onclose = this.dc.onmessage = null; try { this.dc.close(); } catch {} }
    if (this.pc) {
      this.pc.onicecandidate = this.pc.ontrack = this.pc.onconnectionstatechange = this.pc.ondatachannel = null;
      try { this.pc.close(); } catch {}
    }
    if (this.ws) {
      this.ws.onopen = this.ws.onmessage = this.ws.onclose = this.ws.onerror = null;
      try { this.ws.close(1000, 'bye'); } catch {}
    }
    this.pc = this.dc = this.ws = null;
    if (this.wsv) { this.wsv.close(); this.wsv = null; }
    this.wsReady = false;
    this.#emit('input', { open: false });
  }

  #attempt() {
    this.#teardown();
    const gen = this.gen;
    this.#setState(this.failures === 0 ? 'connecting' : this.failures >= FAILED_AFTER ? 'failed' : 'reconnecting', this.lastReason);
    let ws;
    try {
      ws = new WebSocket(this.url);
    } catch (e) {
      this.#lost(gen, `cannot open the signalling websocket: ${e.message}`);
      return;
    }
    this.ws = ws;
    ws.binaryType = 'arraybuffer'; // video frames of the websocket transport
    const helloTimer = this.#later(HELLO_TIMEOUT_MS, () => this.#lost(gen, 'the server sent no hello'));
    this.#later(CONNECT_TIMEOUT_MS, () => {
      const up = this.wsv ? this.wsReady : this.pc?.connectionState === 'connected';
      if (!up) this.#lost(gen, 'the video connection did not come up in time');
    });
    ws.onmessage = (ev) => {
      if (gen !== this.gen) return;
      if (ev.data instanceof ArrayBuffer) {
        this.wsv?.handle(ev.data);
        return;
      }
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        this.log(`signalling: not JSON: ${String(ev.data).slice(0, 80)}`);
        return;
      }
      if (msg.type === 'hello') clearTimeout(helloTimer);
      this.#onSignal(gen, msg).catch((e) => this.#lost(gen, `signalling: ${e.message}`));
    };
    ws.onclose = (ev) => {
      if (gen !== this.gen) return;
      const why = ev.reason ? `: ${ev.reason}` : ev.code === 1006 ? ': refused or network lost' : `: code ${ev.code}`;
      this.#lost(gen, `signalling closed${why}`);
    };
  }

  #lost(gen, reason) {
    if (gen !== this.gen || this.stopped) return;
    this.log(`connection lost: ${reason}`);
    const wasConnected = this.state === 'connected';
    this.#teardown();
    if (wasConnected) this.failures = 0;
    const wait = backoffMs(this.failures);
    this.failures++;
    this.#setState(this.failures >= FAILED_AFTER ? 'failed' : 'reconnecting', reason);
    this.#emit('retry', { inMs: wait, reason });
    this.#later(wait, () => this.#attempt());
  }

  async #onSignal(gen, msg) {
    switch (msg.type) {
      case 'hello':
        this.hello = msg;
        this.you = msg.id;
        if (msg.control) this.#setControl(msg.control, msg.id);
        this.#emit('hello', msg);
        this.#ping(gen);
        if (this.forceWS) this.#fallback(gen, 'asked for by the page (?transport=websocket) or an earlier fallback');
        else if (typeof RTCPeerConnection !== 'function') this.#fallback(gen, 'this browser has no WebRTC');
        else await this.#negotiate(gen, msg);
        break;
      case 'transport': // the server confirmed the websocket transport: video messages follow
        if (!this.wsv) return;
        this.wsReady = true;
        this.failures = 0;
        this.#setState('connected');
        this.#emit('input', { open: true });
        break;
      case 'input': // input-channel messages, on the websocket transport
        if (msg.input && typeof msg.input === 'object') this.#onInputMsg(msg.input);
        break;
      case 'answer':
        if (!this.pc) return;
        await this.pc.setRemoteDescription({ type: 'answer', sdp: msg.sdp });
        if (gen !== this.gen) return;
        if (msg.codec) this.log(`video codec: ${msg.codec}`);
        for (const c of this.pendingCandidates.splice(0)) await this.#addCandidate(c);
        break;
      case 'candidate':
        if (!this.pc) return;
        if (!this.pc.remoteDescription) this.pendingCandidates.push(msg.candidate);
        else await this.#addCandidate(msg.candidate);
        break;
      case 'state':
        this.#setControl(msg.control, msg.you ?? this.you);
        break;
      case 'pong':
        if (typeof msg.t === 'number') {
          const rtt = performance.now() - msg.t;
          this.rttMs = this.rttMs == null ? rtt : 0.7 * this.rttMs + 0.3 * rtt;
          this.#emit('rtt', { ms: rtt, smoothed: this.rttMs });
        }
        break;
      case 'stats': // the server's view of this link, for the link panel (stats.js)
        this.#emit('linkstats', msg);
        break;
      case 'error':
        this.log(`server error ${msg.code || ''}: ${msg.message}`);
        this.#emit('servererror', msg);
        break;
      default:
        this.log(`signalling: unknown message type ${JSON.stringify(msg.type)}`);
    }
  }

  async #addCandidate(c) {
    try {
      await this.pc.addIceCandidate(c ?? null);
    } catch (e) {
      this.log(`remote ICE candidate refused: ${e.message}`);
    }
  }

  #setControl(control, you) {
    if (!control) return;
    this.control = control;
    if (you) this.you = you;
    this.#emit('control', { control, you: this.you });
  }

  #ping(gen) {
    if (gen !== this.gen) return;
    this.sendSignal({ type: 'ping', t: performance.now() });
    this.#later(PING_EVERY_MS, () => this.#ping(gen));
  }

  async #negotiate(gen, hello) {
    const iceServers = Array.isArray(hello.ice_servers) ? hello.ice_servers : [];
    const pc = new RTCPeerConnection({ iceServers, bundlePolicy: 'max-bundle' });
    this.pc = pc;
    this.pendingCandidates = [];
    const tr = pc.addTransceiver('video', { direction: 'recvonly' });
    try {
      const caps = RTCRtpReceiver.getCapabilities?.('video');
      if (caps && tr.setCodecPreferences) tr.setCodecPreferences(preferCodecs(caps.codecs));
    } catch (e) {
      this.log(`codec preferences not applied: ${e.message}`);
    }
    this.#lowLatency(tr.receiver);

    const dc = pc.createDataChannel('input', { ordered: true });
    this.dc = dc;
    dc.onopen = () => { if (gen === this.gen) this.#emit('input', { open: true }); };
    dc.onclose = () => { if (gen === this.gen) this.#lost(gen, 'the input channel closed'); };
    dc.onmessage = (ev) => {
      if (gen !== this.gen) return;
      let m;
      try { m = JSON.parse(ev.data); } catch { return; }
      this.#onInputMsg(m);
    };

    pc.ontrack = (ev) => {
      if (gen !== this.gen) return;
      this.#lowLatency(ev.receiver);
      const stream = ev.streams?.[0] ?? new MediaStream([ev.track]);
      this.video.srcObject = stream;
      const p = this.video.play();
      if (p) p.catch((e) => this.#emit('autoplay', { error: e.message }));
    };
    pc.onicecandidate = (ev) => {
      if (gen !== this.gen) return;
      this.sendSignal({ type: 'candidate', candidate: ev.candidate ? ev.candidate.toJSON() : null });
    };
    let graceTimer = null;
    let everConnected = false;
    // UDP may be blocked on the way (a proxy, an ingress): if WebRTC has not
    // connected in FALLBACK_MS, the video comes on the websocket instead.
    this.#later(FALLBACK_MS, () => {
      if (gen === this.gen && this.pc === pc && !everConnected) this.#fallback(gen, `WebRTC did not connect within ${FALLBACK_MS / 1000} s`);
    });
    pc.onconnectionstatechange = () => {
      if (gen !== this.gen) return;
      const s = pc.connectionState;
      if (s === 'connected') everConnected = true;
      clearTimeout(graceTimer);
      if (s === 'connected') {
        this.failures = 0;
        this.#setState('connected');
      } else if (s === 'failed' && !everConnected) {
        this.#fallback(gen, 'the WebRTC connection failed');
      } else if (s === 'failed' || s === 'closed') {
        this.#lost(gen, `the video connection ${s}`);
      } else if (s === 'disconnected') {
        this.#setState('reconnecting', 'the video connection is interrupted');
        graceTimer = this.#later(DISCONNECTED_GRACE_MS, () => this.#lost(gen, 'the video connection stayed disconnected'));
      }
    };

    const offer = await pc.createOffer();
    if (gen !== this.gen) return;
    await pc.setLocalDescription(offer);
    if (gen !== this.gen) return;
    this.sendSignal({ type: 'offer', sdp: pc.localDescription.sdp });
  }

  #onInputMsg(m) {
    if (m.t === 'clip' && typeof m.text === 'string') this.#emit('clip', { text: m.text });
    else if (m.t === 'err') this.#emit('inputerror', { message: String(m.message ?? '') });
  }

  // fallback gives up on WebRTC for this session and asks the server for the
  // video and input on the websocket (H.264 decoded with WebCodecs).
  #fallback(gen, why) {
    if (gen !== this.gen || this.wsv) return;
    if (!WSVideo.supported()) {
      this.#lost(gen, `${why}, and this browser has no WebCodecs for the websocket fallback`);
      return;
    }
    this.log(`video on the websocket: ${why}`);
    if (this.dc) { this.dc.onopen = this.dc.onclose = this.dc.onmessage = null; try { this.dc.close(); } catch {} }
    if (this.pc) {
      this.pc.onicecandidate = this.pc.ontrack = this.pc.onconnectionstatechange = this.pc.ondatachannel = null;
      try { this.pc.close(); } catch {}
    }
    this.pc = this.dc = null;
    this.forceWS = true;
    this.wsv = new WSVideo({
      video: this.video,
      log: this.log,
      ack: (seq, decodeMs) => this.sendSignal({ type: 'ack', seq, decode_ms: Math.min(60000, Math.max(0, decodeMs)) }),
      onError: (m) => this.#lost(gen, m),
    });
    this.#emit('transport', { kind: 'websocket', reason: why });
    this.sendSignal({ type: 'transport', kind: 'websocket' });
  }

  // lowLatency asks the receiver to play frames as soon as they decode; the
  // default jitter buffer adds tens of milliseconds that a desktop does not need.
  #lowLatency(receiver) {
    if (!receiver) return;
    try { if ('jitterBufferTarget' in receiver) receiver.jitterBufferTarget = 0; } catch {}
    try { receiver.playoutDelayHint = 0; } catch {}
  }
}
