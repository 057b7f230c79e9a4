// Injected into the viewer page by deskbench latency: watches a marker cell of
// the remote picture on every frame the page shows and records when it turns
// the expected colour. For a <video> the frame callback is
// requestVideoFrameCallback (once per decoded frame presented); for noVNC's
// <canvas>, requestAnimationFrame (the canvas is drawn as updates arrive and
// shown on the next animation frame). Both read the pixels the page shows.
(() => {
  if (window.deskbench) return;
  const B = (window.deskbench = { frames: 0, changes: 0, times: [], last: -2, target: null, result: null, error: null });
  const epoch = (t) => (t == null ? null : performance.timeOrigin + t);

  B.start = (o) => {
    const src = document.querySelector(o.selector);
    if (!src) throw new Error(`no element ${o.selector}`);
    const cv = document.createElement('canvas');
    cv.width = 4;
    cv.height = 4;
    const cx = cv.getContext('2d', { willReadFrequently: true });
    const nearest = (d, palette) => {
      let r = 0, g = 0, b = 0;
      for (let i = 0; i < d.length; i += 4) { r += d[i]; g += d[i + 1]; b += d[i + 2]; }
      const n = d.length / 4;
      r /= n; g /= n; b /= n;
      let best = -1, bestD = 90 * 90 * 3; // colours further than this from all are "none"
      palette.forEach((p, i) => {
        const dd = (p[0] - r) ** 2 + (p[1] - g) ** 2 + (p[2] - b) ** 2;
        if (dd < bestD) { bestD = dd; best = i; }
      });
      return best;
    };
    const read = (x, y) => {
      if (o.kind === 'video') {
        const sx = src.videoWidth / o.screenW, sy = src.videoHeight / o.screenH;
        cx.drawImage(src, x * sx - 2, y * sy - 2, 4, 4, 0, 0, 4, 4);
        return cx.getImageData(0, 0, 4, 4).data;
      }
      return src.getContext('2d').getImageData(x - 2, y - 2, 4, 4).data;
    };
    const onFrame = (meta) => {
      const now = performance.timeOrigin + performance.now();
      B.frames++;
      try {
        const c = nearest(read(o.markerX, o.markerY), o.palette);
        if (B.target !== null && B.result === null && c === B.target) {
          B.result = {
            t: now,
            receive: epoch(meta?.receiveTime), presentation: epoch(meta?.presentationTime),
            expectedDisplay: epoch(meta?.expectedDisplayTime),
          };
        }
        const k = nearest(read(o.counterX, o.counterY), o.counterPalette);
        if (k !== B.last) {
          B.changes++;
          B.last = k;
          // When each change was shown (deskbench network: longest freeze,
          // frames per second over time); bounded, a long run keeps the last.
          if (B.times.length >= 200000) B.times = B.times.slice(100000);
          B.times.push(now);
        }
      } catch (e) {
        B.error = String(e?.message ?? e);
      }
    };
    if (o.kind === 'video') {
      const loop = (_, meta) => { onFrame(meta); src.requestVideoFrameCallback(loop); };
      src.requestVideoFrameCallback(loop);
    } else {
      const loop = () => { onFrame(null); requestAnimationFrame(loop); };
      requestAnimationFrame(loop);
    }
    return true;
  };
  B.expect = (i) => { B.target = i; B.result = null; return true; };
  B.take = () => B.result;
  B.changeTimes = (since) => B.times.filter((t) => t >= since);
  B.counts = () => ({ frames: B.frames, changes: B.changes, error: B.error });
})();
