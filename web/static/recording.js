// Recording: a marker everyone watching sees while the desktop is being
// recorded, and start/pause/stop for operators. The marker follows the
// stream's state, which reaches every viewer the moment a recording starts or
// stops; the buttons talk to /api/recording (operator role) and stay hidden
// for links without access to it. Without a stream state (not connected yet)
// the marker falls back on the polled status.

/** recordingURL is the recorder's endpoint next to the page (works under /d/{i}/). */
export function recordingURL(loc, path = '') {
  return new URL('api/recording' + path, new URL(loc.href)).toString();
}

export class Recording {
  constructor({ marker, button, pause, token, toast }) {
    this.marker = marker; this.button = button; this.pauseBtn = pause;
    this.toast = toast; this.status = null;
    this.pushed = null; // 'recording', 'paused' or '' from the stream; null: none yet
    this.headers = { 'Content-Type': 'application/json' };
    if (token) this.headers.Authorization = `Bearer ${token}`;
    button.addEventListener('click', () => this.toggle());
    pause.addEventListener('click', () => this.togglePause());
  }

  async call(method, path, body) {
    const res = await fetch(recordingURL(location, path), {
      method, headers: this.headers, body: body ? JSON.stringify(body) : undefined,
    });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw Object.assign(new Error(data.error || res.statusText), { status: res.status });
    return data;
  }

  async poll() {
    try {
      this.show(await this.call('GET', ''));
    } catch (err) {
      // 401/403: this link may not see the recorder; hide the controls.
      this.show(null);
    }
  }

  /** fromStream takes the stream state's recording field ('' when absent). */
  fromStream(state) {
    this.pushed = state || '';
    this.show(this.status);
  }

  show(st) {
    this.status = st;
    let on = !!(st && st.recording);
    let paused = !!(st && st.paused);
    if (this.pushed !== null) {
      on = this.pushed !== '';
      paused = this.pushed === 'paused';
    }
    this.marker.hidden = !on;
    this.marker.textContent = paused ? 'REC paused' : 'REC';
    this.marker.dataset.state = paused ? 'paused' : 'recording';
    this.button.hidden = !st || !!this.locked; // locked: the task panel's episode
    this.pauseBtn.hidden = !on;
    this.button.textContent = on ? 'Stop recording' : 'Record';
    this.pauseBtn.textContent = paused ? 'Resume' : 'Pause';
  }

  async toggle() {
    try {
      if (this.status && this.status.recording) {
        await this.call('POST', '/stop', {});
        this.toast('recording stopped and saved');
      } else {
        await this.call('POST', '/start', { source: 'human' });
        this.toast('recording');
      }
    } catch (err) {
      this.toast(`recording: ${err.message}`);
    }
    this.poll();
  }

  /** paused is the freshest word on the pause: the stream's push, else the last poll. */
  get paused() {
    return this.pushed !== null ? this.pushed === 'paused' : !!(this.status && this.status.paused);
  }

  /** togglePause pauses or resumes; it reports whether the recorder agreed. */
  async togglePause() {
    let ok = true;
    try {
      await this.call('POST', this.paused ? '/resume' : '/pause');
    } catch (err) {
      this.toast(`recording: ${err.message}`);
      ok = false;
    }
    this.poll();
    return ok;
  }

  start(periodMs = 2000) {
    this.poll();
    this.timer = setInterval(() => this.poll(), periodMs);
  }
}
