// The pool's entry for annotators (pool mode, docs/STUDIO.md): asks the pool
// for a desktop of their own with their pool-wide token and goes to it with
// the token granted for that desktop alone. Their pool-wide token is valid
// here only, never under /d/{i}/.

const state = document.getElementById('lobby-state');
const retry = document.getElementById('lobby-retry');

/** lease asks POST /studio/lease (201: a desktop; 200: the one this annotator has); returns the answer or throws with the server's words. */
export async function lease(token) {
  const r = await fetch('/studio/lease', {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}` },
  });
  let body = {};
  try { body = await r.json(); } catch { /* an empty or non-JSON answer: say the status */ }
  if (r.status !== 201 && r.status !== 200) throw new Error(body.error || `the pool answered ${r.status}`);
  return body;
}

async function enter() {
  const token = new URL(location.href).searchParams.get('token');
  retry.hidden = true;
  state.textContent = 'Finding a desktop of your own…';
  try {
    const l = await lease(token || '');
    state.textContent = `Desktop ${l.desktop} is yours; opening it…`;
    // replace: Back must not come here and lease another desktop.
    location.replace(l.url);
  } catch (e) {
    state.textContent = `No desktop for you yet: ${e.message}`;
    retry.hidden = false;
  }
}

retry.addEventListener('click', enter);
enter();
