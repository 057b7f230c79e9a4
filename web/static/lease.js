// A desktop leased to this page (pool mode: the lobby opens /d/{i}/ with
// ?lease=): give it back when the page goes away, so the next annotator
// gets it without waiting for the idle timeout. keepalive lets the request
// outlive the page; sendBeacon could not carry the token in a header.

const page = new URL(location.href);
const id = page.searchParams.get('lease');
const token = page.searchParams.get('token');

if (id) {
  window.addEventListener('pagehide', (e) => {
    if (e.persisted) return; // kept in the back/forward cache: still this page's
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    fetch(`/studio/lease/${encodeURIComponent(id)}`, { method: 'DELETE', keepalive: true, headers }).catch(() => {});
  });
}
