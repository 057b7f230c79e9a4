// The annotator's studio: the task panel beside the desktop. It lists the
// loaded tasks (GET api/tasks), resets the desktop into the chosen one with a
// seed and records it (POST api/reset, POST api/recording/start), shows the
// instruction, a timer and the step count for the whole episode, and ends it:
// Finish has the task's checker score it (POST api/recording/stop with
// end_episode) and shows the reward and reasons the answer carries; Give up
// ends it as a failure; Discard stops it and deletes it (DELETE
// api/recording/episodes/{id}). The panel stays hidden for links that may not
// list tasks (viewers get 403) and on appliances without tasks.

/** apiURL is an endpoint next to the page (works under /d/{i}/ too). */
export function apiURL(loc, path) {
  return new URL(path, new URL(loc.href)).toString();
}

/** matches reports whether a task matches every word of a search query. */
export function matches(task, query) {
  const hay = [task.id, task.instruction, ...(task.tags || [])].join(' ').toLowerCase();
  return query.toLowerCase().split(/\s+/).filter(Boolean).every((w) => hay.includes(w));
}

/** clock formats seconds as m:ss. */
export function clock(s) {
  const n = Math.max(0, Math.floor(s));
  return `${Math.floor(n / 60)}:${String(n % 60).padStart(2, '0')}`;
}

export class Studio {
  constructor({ el, token, toast, onStart, onEnd }) {
    this.el = el; this.toast = toast;
    this.onStart = onStart || (() => {}); this.onEnd = onEnd || (() => {});
    this.headers = { 'Content-Type': 'application/json' };
    if (token) this.headers.Authorization = `Bearer ${token}`;
    this.tasks = []; this.selected = null;
    this.run = null; // {episode, task, instruction, seed, startedAt}
    this.busy = false;

    el.search.addEventListener('input', () => this.renderList());
    el.search.addEventListener('keydown', (e) => {
      // Enter picks the first match; Enter again (on Start) starts it.
      if (e.key !== 'Enter') return;
      // Not also a press of Start: the browser would deliver this Enter's
      // keypress to the button the focus moves to.
      e.preventDefault();
      const first = this.visible()[0];
      if (first) { this.select(first.id); el.start.focus(); }
    });
    el.start.addEventListener('click', () => this.start());
    el.finish.addEventListener('click', () => this.end({ end_episode: true }, 'finished'));
    el.giveUp.addEventListener('click', () => this.end({ give_up: true }, 'given up'));
    el.discard.addEventListener('click', () => this.discard());
    el.next.addEventListener('click', () => this.show('pick'));
    // Leaving mid-episode loses the demonstration's end: ask first.
    window.addEventListener('beforeunload', (e) => {
      if (!this.run) return;
      e.preventDefault();
      e.returnValue = '';
    });
  }

  async call(method, path, body) {
    const res = await fetch(apiURL(location, path), {
      method, headers: this.headers, body: body ? JSON.stringify(body) : undefined,
    });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw Object.assign(new Error(data.error || res.statusText), { status: res.status });
    return data;
  }

  /**
   * load fetches the task list; the panel shows only if the link may use it.
   * who is the link's name in recordings (GET whoami), to pick up its own
   * running episode after a reload; null: unknown, pick up none.
   */
  async load(who = null) {
    this.who = who;
    let data;
    try {
      data = await this.call('GET', 'api/tasks');
    } catch {
      this.el.panel.hidden = true; // 401/403: not an annotator's or operator's link; 404: prod mode
      return false;
    }
    this.tasks = data.tasks || [];
    this.el.panel.hidden = this.tasks.length === 0;
    this.renderList();
    await this.resume();
    return !this.el.panel.hidden;
  }

  /** resume picks up an episode this link is recording (after a reload). */
  async resume() {
    let st;
    try { st = await this.call('GET', 'api/recording'); } catch { return; }
    const ep = st.episode;
    if (!st.recording || !ep || !ep.task_id || !this.who || ep.recorded_by !== this.who) return;
    const task = this.tasks.find((t) => t.id === ep.task_id);
    if (!task) return;
    this.run = { episode: ep.episode_id, task: ep.task_id, instruction: ep.instruction || task.instruction,
      seed: null, startedAt: performance.now() - ep.elapsed_s * 1000 };
    this.show('run');
    this.timer = setInterval(() => this.tick(), 1000);
    this.tick();
    this.onStart(this.run);
  }

  visible() {
    const q = this.el.search.value.trim();
    return this.tasks.filter((t) => !q || matches(t, q));
  }

  select(id) {
    this.selected = id;
    this.renderList();
  }

  renderList() {
    const list = this.visible();
    if (this.selected && !list.some((t) => t.id === this.selected)) this.selected = null;
    if (!this.selected && list.length === 1) this.selected = list[0].id;
    this.el.list.replaceChildren(...list.map((t) => {
      const li = document.createElement('li');
      const b = document.createElement('button');
      b.type = 'button';
      b.dataset.task = t.id;
      b.setAttribute('aria-pressed', String(t.id === this.selected));
      const id = document.createElement('span');
      id.className = 'tid';
      id.textContent = t.id;
      const ins = document.createElement('span');
      ins.className = 'ins';
      ins.textContent = t.instruction;
      b.append(id, ins);
      if (t.tags?.length) {
        const tags = document.createElement('span');
        tags.className = 'tags';
        tags.textContent = t.tags.map((x) => `#${x}`).join(' ');
        b.append(tags);
      }
      b.addEventListener('click', () => this.select(t.id));
      li.append(b);
      return li;
    }));
    if (list.length === 0) {
      const li = document.createElement('li');
      li.className = 'none';
      li.textContent = 'no task matches';
      this.el.list.append(li);
    }
    this.el.start.disabled = !this.selected || this.busy;
  }

  show(view) {
    this.el.pick.hidden = view !== 'pick';
    this.el.runView.hidden = view !== 'run';
    this.el.result.hidden = view !== 'result';
    if (view === 'run') {
      this.el.task.textContent = this.run.task;
      this.el.instruction.textContent = this.run.instruction;
      this.el.seed.textContent = this.run.seed == null ? '–' : String(this.run.seed);
      this.el.discard.dataset.armed = 'false';
      this.el.discard.textContent = 'Discard';
    }
    if (view === 'pick') this.renderList();
  }

  async start() {
    const task = this.tasks.find((t) => t.id === this.selected);
    if (!task || this.busy) return;
    const typed = this.el.seedInput.value.trim();
    // A seed is always sent, so the episode can be reset into again.
    const seed = typed === '' ? Math.floor(Math.random() * 1e9) : Number(typed);
    if (!Number.isSafeInteger(seed) || seed < 0) { this.toast('the seed must be a whole number ≥ 0'); return; }
    this.busy = true;
    this.el.start.disabled = true;
    this.el.start.textContent = 'Starting…';
    try {
      const ep = await this.call('POST', 'api/reset', { task_id: task.id, seed });
      await this.call('POST', 'api/recording/start', { source: 'human' });
      this.run = { episode: ep.episode_id, task: task.id, instruction: ep.instruction || task.instruction,
        seed: ep.seed ?? seed, startedAt: performance.now() };
      this.show('run');
      this.timer = setInterval(() => this.tick(), 1000);
      this.tick();
      this.onStart(this.run);
    } catch (err) {
      this.toast(`start: ${err.message}`, 5000);
    } finally {
      this.busy = false;
      this.el.start.textContent = 'Start';
      this.renderList();
    }
  }

  /** tick updates the timer and the step count, and notices an episode ended elsewhere. */
  async tick() {
    if (!this.run) return;
    this.el.timer.textContent = clock((performance.now() - this.run.startedAt) / 1000);
    let st;
    try { st = await this.call('GET', 'api/recording'); } catch { return; }
    if (!this.run) return;
    if (st.recording && st.episode?.episode_id === this.run.episode) {
      this.el.steps.textContent = String(st.episode.steps);
      return;
    }
    if (this.busy) return;
    // Ended without us: by an operator, the task's step or time limit, a reset.
    const last = st.last && st.last.id === this.run.episode ? st.last : null;
    this.finishRun(last, 'ended');
  }

  async end(body, how) {
    if (!this.run || this.busy) return;
    this.busy = true;
    this.setRunButtons(true);
    try {
      const st = await this.call('POST', 'api/recording/stop', body);
      const last = st.last && st.last.id === this.run.episode ? st.last : null;
      this.finishRun(last, how);
    } catch (err) {
      this.toast(`${how === 'finished' ? 'finish' : 'give up'}: ${err.message}`, 5000);
    } finally {
      this.busy = false;
      this.setRunButtons(false);
    }
  }

  async discard() {
    if (!this.run || this.busy) return;
    const b = this.el.discard;
    if (b.dataset.armed !== 'true') {
      // Two presses: a discarded demonstration cannot be brought back.
      b.dataset.armed = 'true';
      b.textContent = 'Discard: sure?';
      clearTimeout(this.disarm);
      this.disarm = setTimeout(() => { b.dataset.armed = 'false'; b.textContent = 'Discard'; }, 4000);
      return;
    }
    this.busy = true;
    this.setRunButtons(true);
    try {
      await this.call('DELETE', `api/recording/episodes/${encodeURIComponent(this.run.episode)}`);
      this.toast(`episode ${this.run.episode} discarded: nothing of it was kept`, 4000);
      this.stopRun();
      this.show('pick');
    } catch (err) {
      this.toast(`discard: ${err.message}`, 5000);
    } finally {
      this.busy = false;
      this.setRunButtons(false);
    }
  }

  setRunButtons(disabled) {
    for (const b of [this.el.finish, this.el.giveUp, this.el.discard]) b.disabled = disabled;
  }

  stopRun() {
    clearInterval(this.timer);
    const run = this.run;
    this.run = null;
    this.onEnd(run);
    return run;
  }

  finishRun(meta, how) {
    const run = this.stopRun();
    const o = meta?.outcome;
    const r = this.el.reward;
    this.el.resultTask.textContent = run.task;
    if (o && o.reward != null) {
      r.textContent = `reward ${o.reward}${o.success != null ? (o.success ? ' · success' : ' · not a success') : ''}`;
      r.dataset.ok = String(o.reward > 0);
    } else {
      r.textContent = how === 'ended' ? 'the episode ended elsewhere (no reward for this link)' : 'no reward: nothing scored the episode';
      r.dataset.ok = 'false';
    }
    const reasons = o?.reasons?.length ? o.reasons : (o?.interrupted ? [o.interrupted] : []);
    this.el.reasons.replaceChildren(...reasons.map((x) => {
      const li = document.createElement('li');
      li.textContent = x;
      return li;
    }));
    this.el.episode.textContent = `episode ${run.episode}${meta ? ` · ${meta.counts?.steps ?? 0} steps` : ''}`;
    this.show('result');
    this.el.next.focus();
  }
}
