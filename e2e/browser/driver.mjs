// A line-oriented driver for headless Chromium, so Go tests and the benchmark
// can act in real browser pages step by step and check the X display between
// steps. Requests are JSON lines on stdin: {"id":1,"cmd":"open","page":"a",...};
// each gets one JSON line on stdout: {"id":1,"ok":true,"result":...} or
// {"id":1,"ok":false,"error":"..."}. Page console output goes to stderr.
//
// Chromium is Debian's (/usr/bin/chromium, or $DESKENV_CHROMIUM): Playwright
// never downloads a browser here.

import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';
import { readFile } from 'node:fs/promises';

const executablePath = process.env.DESKENV_CHROMIUM || '/usr/bin/chromium';
const args = [
  '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--autoplay-policy=no-user-gesture-required',
  '--use-fake-ui-for-media-stream', '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows',
];

let browser = null;
const pages = new Map(); // name -> {context, page}

function out(obj) { process.stdout.write(JSON.stringify(obj) + '\n'); }
function pageOf(name) {
  const p = pages.get(name);
  if (!p) throw new Error(`no page named ${JSON.stringify(name)} (open it first)`);
  return p.page;
}

// videoPoint finds where video pixel (vx, vy) is on the page, letterbox included.
async function videoPoint(page, vx, vy, selector = '#video') {
  return page.evaluate(([vx, vy, selector]) => {
    const v = document.querySelector(selector);
    if (!v) throw new Error(`no element ${selector}`);
    const r = v.getBoundingClientRect();
    // Before the first frame the page already knows the video size from the hello.
    const hv = window.deskenv?.hello?.video;
    const pw = v.videoWidth || hv?.w || v.width, ph = v.videoHeight || hv?.h || v.height;
    if (!pw || !ph) throw new Error('the video has no size yet');
    const s = Math.min(r.width / pw, r.height / ph);
    const ox = (r.width - pw * s) / 2, oy = (r.height - ph * s) / 2;
    // The middle of the video pixel, so rounding cannot land on a neighbour.
    return { x: r.left + ox + (vx + 0.5) * s, y: r.top + oy + (vy + 0.5) * s };
  }, [vx, vy, selector]);
}

const commands = {
  // extraArgs are more Chromium flags, e.g. one that keeps WebRTC off UDP.
  async launch({ headless = true, extraArgs = [] }) {
    if (browser) return { version: browser.version() };
    browser = await chromium.launch({ executablePath, args: [...args, ...extraArgs], headless });
    return { version: browser.version() };
  },

  // initScript, if given, runs in the page before its own scripts (to make
  // the page see a different browser, e.g. one without H.264).
  async open({ page: name, url, width = 1280, height = 830, permissions = [], initScript }) {
    if (!browser) await commands.launch({});
    if (pages.has(name)) throw new Error(`page ${name} is already open`);
    const context = await browser.newContext({ viewport: { width, height } });
    if (permissions.length) await context.grantPermissions(permissions, { origin: new URL(url).origin });
    if (initScript) await context.addInitScript(initScript);
    const page = await context.newPage();
    page.on('console', (m) => process.stderr.write(`[${name} ${m.type()}] ${m.text()}\n`));
    page.on('pageerror', (e) => process.stderr.write(`[${name} pageerror] ${e.message}\n`));
    pages.set(name, { context, page });
    const res = await page.goto(url, { waitUntil: 'load' });
    return { status: res ? res.status() : 0 };
  },

  async close({ page: name }) {
    const p = pages.get(name);
    if (!p) return null;
    pages.delete(name);
    await p.context.close();
    return null;
  },

  // eval runs a JavaScript expression (or an async arrow called with arg) in the page.
  async eval({ page, expr, arg }) {
    const pg = pageOf(page);
    if (arg === undefined) return pg.evaluate(expr);
    return pg.evaluate(`(${expr})(${JSON.stringify(arg)})`);
  },

  // evalFile runs a script file in the page (the page's CSP forbids script tags from elsewhere).
  async evalFile({ page, file }) {
    const src = await readFile(file, 'utf8');
    await pageOf(page).evaluate(src);
    return null;
  },

  // waitFor polls an expression (a promise is awaited) until it is truthy.
  // Polled from here rather than with waitForFunction, which evaluates
  // strings inside the page and so trips the page's CSP (no unsafe-eval).
  async waitFor({ page, expr, timeoutMs = 10000, pollMs = 20 }) {
    const pg = pageOf(page);
    const end = Date.now() + timeoutMs;
    let last;
    for (;;) {
      try {
        last = await pg.evaluate(expr);
        if (last) return last;
      } catch (e) {
        last = `error: ${e.message}`;
      }
      if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${expr} (last value: ${JSON.stringify(last)})`);
      await new Promise((r) => setTimeout(r, pollMs));
    }
  },

  async click({ page, vx, vy, button = 'left', clickCount = 1 }) {
    const pg = pageOf(page);
    const p = await videoPoint(pg, vx, vy);
    await pg.mouse.click(p.x, p.y, { button, clickCount });
    return p;
  },

  async move({ page, vx, vy, steps = 1 }) {
    const pg = pageOf(page);
    const p = await videoPoint(pg, vx, vy);
    await pg.mouse.move(p.x, p.y, { steps });
    return p;
  },

  async mouse({ page, action, button = 'left' }) {
    const pg = pageOf(page);
    if (action === 'down') await pg.mouse.down({ button });
    else if (action === 'up') await pg.mouse.up({ button });
    else throw new Error(`mouse action ${JSON.stringify(action)}: use down or up`);
    return null;
  },

  async wheel({ page, dx = 0, dy = 0 }) {
    await pageOf(page).mouse.wheel(dx, dy);
    return null;
  },

  async type({ page, text, delayMs = 0 }) {
    await pageOf(page).keyboard.type(text, { delay: delayMs });
    return null;
  },

  async press({ page, key }) {
    await pageOf(page).keyboard.press(key);
    return null;
  },

  async key({ page, action, key }) {
    const kb = pageOf(page).keyboard;
    if (action === 'down') await kb.down(key);
    else if (action === 'up') await kb.up(key);
    else throw new Error(`key action ${JSON.stringify(action)}: use down or up`);
    return null;
  },

  async focus({ page, selector }) {
    await pageOf(page).focus(selector);
    return null;
  },

  async screenshot({ page, path }) {
    await pageOf(page).screenshot({ path });
    return { path };
  },

  async now({ page }) {
    return pageOf(page).evaluate(() => performance.timeOrigin + performance.now());
  },
};

async function main() {
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      out({ id: null, ok: false, error: `request is not JSON: ${e.message}` });
      continue;
    }
    if (req.cmd === 'quit') break;
    const fn = commands[req.cmd];
    if (!fn) {
      out({ id: req.id, ok: false, error: `unknown command ${JSON.stringify(req.cmd)}; known: ${Object.keys(commands).join(', ')}` });
      continue;
    }
    try {
      const result = await fn(req);
      out({ id: req.id, ok: true, result: result ?? null });
    } catch (e) {
      out({ id: req.id, ok: false, error: String(e?.message ?? e) });
    }
  }
  if (browser) await browser.close();
}

main().catch((e) => {
  process.stderr.write(`driver: ${e?.stack ?? e}\n`);
  process.exit(1);
});
