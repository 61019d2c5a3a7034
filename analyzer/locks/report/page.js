// lockscope HTML report: zoom and pan along the time axis, coarse blocks' marks loaded
// when zoomed in, the summary table's sorting and filter, tooltips (pinned on click).
// The marks are laid out by lockscope (the same SVG as `--format svg`); this script only
// moves them along x: each mark carries data-t0/data-t1 (µs from the capture start).
(function () {
  'use strict';
  const timeline = document.getElementById('timeline');
  const tooltip = document.getElementById('tooltip');
  if (!timeline) return;
  const LEFT = +timeline.dataset.left, WIDTH = +timeline.dataset.width;
  const SPAN = +timeline.dataset.spanUs, FINE_LIMIT = +timeline.dataset.fineLimit;
  const MIN_SPAN = 20;  // µs: the deepest zoom
  const blocks = Array.from(document.querySelectorAll('section.block'));
  const axis = document.getElementById('axis');
  const SVG_NS = 'http://www.w3.org/2000/svg';
  let v0 = 0, v1 = SPAN, viewVersion = 0;

  // ---- the time axis ----
  function axisStep(span, ticks) {
    const raw = Math.max(1, span / ticks);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return Math.max(1, (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p);
  }
  function decimals(step) {
    let d = 0;
    for (let s = step; d < 3 && Math.abs(s - Math.round(s)) > 1e-9; s *= 10) d++;
    return d;
  }
  // The unit follows the step: µs below 100 µs, ms below 100 ms, s above (as
  // axis_label() in swimlane.cpp, which draws the first axis).
  function axisLabel(t, step) {
    if (step < 100) return Math.round(t) + 'µs';
    if (step < 1e5) return (t / 1e3).toFixed(decimals(step / 1e3)) + 'ms';
    return (t / 1e6).toFixed(decimals(step / 1e6)) + 's';
  }
  function drawAxis() {
    const step = axisStep(v1 - v0, 10);
    const k = WIDTH / (v1 - v0);
    while (axis.firstChild) axis.removeChild(axis.firstChild);
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = LEFT + (t - v0) * k;
      const line = document.createElementNS(SVG_NS, 'line');
      line.setAttribute('class', 'tick');
      line.setAttribute('x1', x); line.setAttribute('x2', x);
      line.setAttribute('y1', 18); line.setAttribute('y2', 24);
      const text = document.createElementNS(SVG_NS, 'text');
      text.setAttribute('class', 'tick-label');
      text.setAttribute('x', x + 2); text.setAttribute('y', 16);
      text.textContent = '+' + axisLabel(t, step);
      axis.appendChild(line); axis.appendChild(text);
    }
  }

  // ---- marks along x ----
  function clampX(x) { return Math.max(LEFT - 50, Math.min(LEFT + WIDTH + 50, x)); }
  function place(el, k) {
    const d = el.dataset;
    const t0 = +d.t0, t1 = +d.t1;
    const x0 = LEFT + (t0 - v0) * k;
    if (el.tagName === 'rect') {
      const x1 = x0 + Math.max(+d.w || 1, (t1 - t0) * k);
      const a = clampX(x0), b = clampX(x1);
      el.setAttribute('x', a.toFixed(1));
      el.setAttribute('width', Math.max(0, b - a).toFixed(1));
    } else if (el.tagName === 'circle') {
      el.setAttribute('cx', clampX(x0).toFixed(1));
    } else if (el.tagName === 'line') {
      el.setAttribute('x1', clampX(x0).toFixed(1));
      el.setAttribute('x2', clampX(LEFT + (t1 - v0) * k).toFixed(1));
    }
  }
  function drawBlock(block) {
    if (+block.dataset.view === viewVersion) return;
    block.dataset.view = viewVersion;
    const k = WIDTH / (v1 - v0);
    let group = block.querySelector('g.marks');
    if (block.dataset.coarse) {
      // Coarse until the view holds few enough of its marks (spread evenly, roughly).
      const fine = +block.dataset.marks * (v1 - v0) / SPAN < FINE_LIMIT;
      const fineGroup = block.querySelector('g.fine');
      if (fine && !fineGroup.dataset.loaded) {
        fineGroup.innerHTML = block.querySelector('template.fine-marks').content.textContent;
        fineGroup.dataset.loaded = '1';
      }
      fineGroup.style.display = fine ? '' : 'none';
      group.style.display = fine ? 'none' : '';
      if (fine) group = fineGroup;
    }
    for (const el of group.children) place(el, k);
  }
  const visible = new Set();
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (e.isIntersecting) { visible.add(e.target); drawBlock(e.target); } else visible.delete(e.target);
    }
  }, { rootMargin: '200px 0px' });
  blocks.forEach((b) => { b.dataset.view = 0; observer.observe(b); });

  function setView(a, b) {
    let span = Math.min(SPAN, Math.max(MIN_SPAN, b - a));
    a = Math.max(0, Math.min(SPAN - span, a));
    if (a === v0 && a + span === v1) return;
    v0 = a; v1 = a + span; viewVersion++;
    drawAxis();
    for (const block of visible) drawBlock(block);
  }
  function zoom(factor, center) {
    if (center === undefined) center = (v0 + v1) / 2;
    const span = Math.min(SPAN, Math.max(MIN_SPAN, (v1 - v0) / factor));
    const share = (center - v0) / (v1 - v0);
    setView(center - share * span, center - share * span + span);
  }
  function timeAt(clientX, svg) {
    const r = svg.getBoundingClientRect();
    return v0 + (clientX - r.left - LEFT) / WIDTH * (v1 - v0);
  }

  document.getElementById('zoom-in').addEventListener('click', () => zoom(4));
  document.getElementById('zoom-out').addEventListener('click', () => zoom(1 / 4));
  document.getElementById('zoom-reset').addEventListener('click', () => setView(0, SPAN));
  function onWheel(e, always) {
    if (!always && !e.ctrlKey && !e.metaKey) return;
    e.preventDefault();
    const svg = e.currentTarget;
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      const dt = e.deltaX / WIDTH * (v1 - v0);
      setView(v0 + dt, v1 + dt);
    } else {
      zoom(Math.exp(-e.deltaY / 300), timeAt(e.clientX, svg));
    }
  }
  axis.addEventListener('wheel', (e) => onWheel(e, true), { passive: false });
  for (const svg of document.querySelectorAll('svg.lanes')) {
    svg.addEventListener('wheel', (e) => onWheel(e, false), { passive: false });
  }
  // Drag to pan (a press that moves less than 4 px is a click).
  let drag = null;
  timeline.addEventListener('mousedown', (e) => {
    if (e.button !== 0 || !e.target.closest('svg.lanes, #axis')) return;
    drag = { x: e.clientX, v0, v1, moved: false };
  });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    const dt = -dx / WIDTH * (drag.v1 - drag.v0);
    setView(drag.v0 + dt, drag.v1 + dt);
  });
  window.addEventListener('mouseup', () => { setTimeout(() => { drag = null; }, 0); });
  document.addEventListener('keydown', (e) => {
    if (e.target.closest && e.target.closest('input')) return;
    const pan = (v1 - v0) / 5;
    if (e.key === '+' || e.key === '=') zoom(2);
    else if (e.key === '-') zoom(1 / 2);
    else if (e.key === '0') setView(0, SPAN);
    else if (e.key === 'ArrowLeft') setView(v0 - pan, v1 - pan);
    else if (e.key === 'ArrowRight') setView(v0 + pan, v1 + pan);
    else if (e.key === 'Escape') unpin();
  });

  // ---- tooltips ----
  const eventLines = new WeakMap();
  function eventOf(mark) {
    const block = mark.closest('section.block');
    if (!block || mark.dataset.i === undefined) return null;
    let lines = eventLines.get(block);
    if (!lines) {
      lines = block.querySelector('template.events').content.textContent.split('\n');
      eventLines.set(block, lines);
    }
    try { return JSON.parse(lines[+mark.dataset.i]); } catch (err) { return null; }
  }
  function fill(mark) {
    tooltip.textContent = '';
    const e = eventOf(mark);
    const head = document.createElement('div');
    head.className = 'head';
    head.textContent = mark.dataset.event === 'coarse'
      ? 'zoom in to see these events' : (mark.dataset.anomaly ? 'anomaly ' + mark.dataset.anomaly : mark.dataset.event);
    tooltip.appendChild(head);
    if (!e) return;
    const START = +timeline.dataset.startUs;
    const at = document.createElement('div');
    at.className = 'k';
    at.textContent = 'at +' + ((e.ts * 1e6 - START) / 1e6).toFixed(6) + ' s from the capture start';
    tooltip.appendChild(at);
    const EPOCH_FIELDS = new Set(['ts', 'since', 'start', 'end']);
    for (const key of Object.keys(e)) {
      const row = document.createElement('div');
      const k = document.createElement('span');
      k.className = 'k';
      k.textContent = key + ': ';
      row.appendChild(k);
      // Epoch seconds as the JSONL writes them (microseconds, trailing zeros kept).
      const v = EPOCH_FIELDS.has(key) && typeof e[key] === 'number' ? e[key].toFixed(6) : JSON.stringify(e[key]);
      row.appendChild(document.createTextNode(v));
      tooltip.appendChild(row);
    }
  }
  function show(mark, x, y) {
    fill(mark);
    tooltip.hidden = false;
    const r = tooltip.getBoundingClientRect();
    tooltip.style.left = Math.min(window.innerWidth - r.width - 8, x + 14) + 'px';
    tooltip.style.top = (y + 14 + r.height > window.innerHeight ? y - r.height - 10 : y + 14) + 'px';
  }
  let pinned = null;
  function unpin() {
    if (pinned) pinned.classList.remove('hl');
    pinned = null;
    tooltip.classList.remove('pinned');
    tooltip.hidden = true;
  }
  timeline.addEventListener('mouseover', (e) => {
    const mark = e.target.closest('.m');
    if (!mark || pinned || drag) return;
    show(mark, e.clientX, e.clientY);
  });
  timeline.addEventListener('mouseout', (e) => {
    if (!pinned && e.target.closest('.m')) tooltip.hidden = true;
  });
  document.addEventListener('click', (e) => {
    if (drag && drag.moved) return;
    if (e.target.closest('#tooltip')) return;
    const mark = e.target.closest('.m');
    if (pinned) unpin();
    if (mark) {
      show(mark, e.clientX, e.clientY);
      pinned = mark;
      mark.classList.add('hl');
      tooltip.classList.add('pinned');
    }
  });

  // ---- the summary table ----
  const table = document.getElementById('summary');
  const tbody = table.tBodies[0];
  table.tHead.addEventListener('click', (e) => {
    const th = e.target.closest('th');
    if (!th) return;
    const col = Array.prototype.indexOf.call(th.parentNode.children, th);
    const text = th.dataset.type === 'text';
    const dir = th.getAttribute('aria-sort') === (text ? 'ascending' : 'descending') ? -1 : 1;
    for (const other of th.parentNode.children) other.removeAttribute('aria-sort');
    const ascending = text ? dir === 1 : dir === -1;
    th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
    const rows = Array.from(tbody.rows);
    rows.sort((a, b) => {
      const x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
      const c = text ? x.localeCompare(y) : (+x) - (+y);
      return ascending ? c : -c;
    });
    for (const r of rows) tbody.appendChild(r);
  });
  document.getElementById('filter').addEventListener('input', (e) => {
    const q = e.target.value.toLowerCase();
    for (const r of tbody.rows) r.hidden = q !== '' && !r.dataset.lock.toLowerCase().includes(q);
    for (const b of blocks) b.hidden = q !== '' && !b.dataset.lock.toLowerCase().includes(q);
  });
  function goTo(block) {
    block.hidden = false;
    block.scrollIntoView({ block: 'start' });
    block.classList.add('flash');
    setTimeout(() => block.classList.remove('flash'), 1200);
  }
  tbody.addEventListener('click', (e) => {
    const row = e.target.closest('tr');
    if (row) goTo(document.getElementById(row.dataset.block));
  });
  // An anomaly count: its first occurrence, zoomed to and pinned.
  for (const link of document.querySelectorAll('a.anomaly-link')) {
    link.addEventListener('click', (e) => {
      e.preventDefault();
      e.stopPropagation();
      const block = document.getElementById(link.dataset.block);
      goTo(block);
      drawBlock(block);
      let mark = block.querySelector('.m.anomaly[data-i="' + link.dataset.i + '"]');
      if (mark) {
        const t0 = +mark.dataset.t0, t1 = +mark.dataset.t1;
        const pad = Math.max(1000, (t1 - t0) * 2);
        setView(t0 - pad, t1 + pad);
        drawBlock(block);
        mark = block.querySelector('.m.anomaly[data-i="' + link.dataset.i + '"]') || mark;
        const r = mark.getBoundingClientRect();
        unpin();
        show(mark, r.left, r.bottom);
        pinned = mark;
        mark.classList.add('hl');
        tooltip.classList.add('pinned');
      }
    });
  }

  // Drawn and answering: what the time-to-interactive benchmark waits for.
  window.lockscopeReady = performance.now();
  document.documentElement.dataset.ready = '1';
})();
