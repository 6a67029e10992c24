'use strict';
// Polls /status.json once a second and redraws in place; rates are the difference between two
// samples divided by the time between them. Text goes in with textContent only.
const INTERVAL_MS = 1000;
let previous = null;
let samples = 0;

function $(id) { return document.getElementById(id); }
function fmt(n, digits) {
  if (n === null || n === undefined || Number.isNaN(n)) return '-';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits === undefined ? 0 : digits });
}
function ms(seconds) { return seconds === null || seconds === undefined ? '-' : fmt(seconds * 1000, 2) + ' ms'; }
function bytes(n) {
  if (n === null || n === undefined) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return fmt(n, i ? 1 : 0) + ' ' + units[i];
}
function pct(r) { return r === null || r === undefined ? '-' : fmt(r * 100, 1) + ' %'; }
function when(unix) { return unix ? new Date(unix * 1000).toISOString().replace('.000Z', 'Z') : '-'; }
function rate(now, before, dt) { return before === undefined || dt <= 0 ? null : Math.max(0, now - before) / dt; }

// Replace the rows of table `id`: a header row then one row per item; a cell is a string or
// {text, cls, key} (key: a data-key attribute, so tests and scripts can find a figure).
function table(id, head, rows) {
  const t = $(id);
  const body = document.createDocumentFragment();
  const tr = document.createElement('tr');
  for (const h of head) { const th = document.createElement('th'); th.textContent = h; tr.appendChild(th); }
  body.appendChild(tr);
  for (const row of rows) {
    const r = document.createElement('tr');
    for (const cell of row) {
      const td = document.createElement('td');
      if (cell !== null && typeof cell === 'object') {
        td.textContent = cell.text;
        if (cell.cls) td.className = cell.cls;
        if (cell.key) td.dataset.key = cell.key;
      } else {
        td.textContent = cell;
      }
      r.appendChild(td);
    }
    body.appendChild(r);
  }
  t.replaceChildren(body);
}

function render(s) {
  const dt = previous ? s.generated_at - previous.generated_at : 0;
  const before = {};
  if (previous) for (const r of previous.routes) before[r.name] = r.requests;
  let total = 0, totalRate = null;
  const routes = s.routes.map(r => {
    total += r.requests;
    const rr = rate(r.requests, before[r.name], dt);
    if (rr !== null) totalRate = (totalRate || 0) + rr;
    const st = r.status;
    return [r.name, { text: fmt(r.requests), key: 'route-requests:' + r.name },
      { text: rr === null ? '-' : fmt(rr, 1), key: 'route-rate:' + r.name },
      fmt(st['2xx']), fmt(st['3xx']), fmt(st['4xx']), { text: fmt(st['5xx']), cls: st['5xx'] ? 'bad' : '' },
      ms(r.latency.p50), ms(r.latency.p90), ms(r.latency.p99), bytes(r.response_bytes)];
  });
  table('routes', ['route', 'requests', 'req/s', '2xx', '3xx', '4xx', '5xx', 'p50', 'p90', 'p99', 'sent'], routes);

  const servers = [];
  for (const u of s.upstreams) {
    for (const v of u.servers) {
      const health = !v.available ? { text: v.down ? 'down (config)' : v.active_health === false ? 'down (active check)' : v.passive_out ? 'out (passive)' : 'unavailable', cls: 'bad' }
        : { text: 'up', cls: 'good' };
      const failed = Object.entries(v.attempts).filter(([k]) => k !== 'ok' && k !== 'keepalive_closed').reduce((a, [, n]) => a + n, 0);
      servers.push([u.name + ' ' + v.server + (v.backup ? ' (backup)' : ''), health,
        v.active_health === null ? 'no checks' : v.active_health ? 'passing' : 'failing',
        v.passive_out ? 'out' : 'ok', fmt(v.in_flight), fmt(v.connections), fmt(v.queued),
        fmt(v.attempts.ok), { text: fmt(failed), cls: failed ? 'bad' : '' }, ms(v.response_latency.p99)]);
    }
  }
  table('upstreams', ['upstream server', 'state', 'active', 'passive', 'in flight', 'pool', 'queued', 'ok', 'failed', 'p99 headers'], servers);

  table('caches', ['zone', 'tier', 'requests', 'hit ratio', 'objects', 'bytes', 'evictions', 'stale served', 'served', 'shared tier'],
    s.cache_zones.map(z => [z.name, z.tier, fmt(z.requests), { text: pct(z.hit_ratio), key: 'cache-hit-ratio:' + z.name },
      fmt(z.objects), bytes(z.bytes), fmt(z.evictions), fmt(z.stale_served), bytes(z.served_bytes),
      z.shared === null ? '-' : (z.shared.connected ? 'connected' : 'not connected') + (z.shared.breaker_open ? ', breaker open' : '')]));

  table('compression', ['coding', 'in', 'out', 'saved', 'ratio', 'CPU'],
    s.compression.algorithms.filter(a => a.bytes_in > 0).map(a => [a.algorithm, bytes(a.bytes_in), bytes(a.bytes_out), bytes(a.saved_bytes),
      a.bytes_out ? fmt(a.bytes_in / a.bytes_out, 2) + '×' : '-', a.cpu_seconds === null ? 'n/a' : fmt(a.cpu_seconds, 3) + ' s']));
  table('compress-routes', ['route', 'compressed', 'not compressed', 'adaptive level (CPU ' + fmt(s.compression.process_cpu_percent) + ' %)'],
    s.compression.routes.map(r => {
      const compressed = r.responses.compressed || 0;
      const other = Object.values(r.responses).reduce((a, n) => a + n, 0) - compressed;
      const levels = r.adaptive_levels === null ? 'fixed' : Object.entries(r.adaptive_levels).map(([k, v]) => k + ' ' + (v < 0 ? 'off' : v)).join(', ');
      return [r.route, fmt(compressed), fmt(other), levels];
    }));

  table('listeners', ['listener', 'address', 'protocols', 'open', 'accepted', 'parked', 'HTTP/1.1 req', 'h2 req', 'h3 req', 'TLS failures'],
    s.listeners.map(l => [l.name, (l.tls ? 'https://' : 'http://') + l.address, l.protocols.join(' '), fmt(l.connections_open),
      fmt(l.connections_total), fmt(l.connections_parked), fmt(l.requests_by_protocol['http/1.1']),
      fmt(l.requests_by_protocol.h2), fmt(l.requests_by_protocol.h3), fmt(l.tls_handshake_failures)]));

  table('certificates', ['listener', 'names', 'expires', 'in', 'source', 'renewal'],
    s.certificates.map(c => {
      const days = c.expires_in_seconds === null ? null : c.expires_in_seconds / 86400;
      return [c.listener, c.names.join(' ') || '-', c.error ? { text: c.error, cls: 'bad' } : when(c.not_after),
        { text: days === null ? '-' : fmt(days, 1) + ' days', cls: days !== null && days < 14 ? 'bad' : '' },
        c.source + (c.file ? ' ' + c.file : ''), c.renewal === null ? '-' : JSON.stringify(c.renewal)];
    }));

  samples++;
  $('version').textContent = s.version;
  $('total-requests').textContent = fmt(total);
  $('total-rate').textContent = totalRate === null ? '-' : fmt(totalRate, 1);
  $('samples').textContent = String(samples);
  $('updated').textContent = when(s.generated_at);
  const r = s.config.last_reload;
  $('config').textContent = 'config ' + (s.config.source || '(no file)') + ' loaded ' + when(s.config.loaded_at) +
    (r === null ? ' · no reload yet' : ' · last reload ' + when(r.at) + (r.ok ? ': ok' : ': refused: ' + r.error));
  $('config').className = r !== null && !r.ok ? 'bad' : '';
  $('state').textContent = 'live';
  $('state').className = 'good';
  previous = s;
}

async function poll() {
  try {
    const response = await fetch('/status.json', { cache: 'no-store' });
    if (!response.ok) throw new Error('HTTP ' + response.status);
    render(await response.json());
  } catch (e) {
    $('state').textContent = 'no answer (' + e.message + ')';
    $('state').className = 'bad';
  }
  setTimeout(poll, INTERVAL_MS);
}
poll();
