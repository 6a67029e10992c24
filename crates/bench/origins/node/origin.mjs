// The lab's Node.js origin: the demo origin's endpoints (crates/origin/README.md) on plain
// `node:http`, written the way a Node.js API is: `setHeader` and one `res.end(body)` for a
// whole answer (Node.js then sends `Content-Length`), `res.write` per element for a stream
// (chunked, waiting for 'drain' when the socket is full). The bytes are the demo origin's own:
// the lab's correctness check compares them.
//
// Usage: node origin.mjs --name NAME (--listen HOST:PORT | --unix PATH)
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';

const RECORDS = 10000;
const TEMPLATE_LEN = 2 * 1024 * 1024;
const FIXED_OVERHEAD = 5 + 9 + 2;
const HELLO = Buffer.from('Hello World!'.repeat(10));
const WORDS = [
  'account', 'active', 'address', 'admin', 'alpha', 'amount', 'archive', 'balance', 'batch',
  'billing', 'branch', 'bucket', 'build', 'cache', 'card', 'cart', 'channel', 'city', 'client',
  'cluster', 'comment', 'config', 'country', 'created', 'customer', 'data', 'default', 'delta',
  'deploy', 'device', 'disabled', 'email', 'enabled', 'event', 'failed', 'feature', 'file',
  'filter', 'group', 'health', 'host', 'image', 'index', 'invoice', 'item', 'label', 'level',
  'limit', 'location', 'message', 'metric', 'mode', 'name', 'network', 'node', 'order', 'owner',
  'page', 'payment', 'pending', 'phone', 'policy', 'price', 'product', 'profile', 'project',
  'queue', 'region', 'release', 'report', 'request', 'role', 'route', 'sample', 'schema',
  'search', 'secret', 'server', 'service', 'session', 'shipping', 'source', 'status', 'stock',
  'stream', 'street', 'success', 'tag', 'target', 'team', 'tenant', 'ticket', 'token', 'total',
  'update', 'user', 'value', 'version', 'volume', 'warning', 'window', 'zone',
];

const MASK = (1n << 64n) - 1n;
function splitmix64(x) {
  let z = (x + 0x9E3779B97F4A7C15n) & MASK;
  z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK;
  return z ^ (z >> 31n);
}

// The /stream filler, byte for byte the demo origin's (crates/origin/src/padding.rs).
function buildTemplate() {
  const out = Buffer.alloc(TEMPLATE_LEN + 32);
  let n = 0;
  let state = 0x5EEDn;
  while (n < TEMPLATE_LEN) {
    state = splitmix64(state);
    n += out.write(WORDS[Number(state % BigInt(WORDS.length))], n, 'latin1');
    if (state >> 60n === 0n) {
      out[n++] = 48 + (Number((state >> 32n) & 0xFFn) % 10);
      out[n++] = 48 + (Number((state >> 40n) & 0xFFn) % 10);
    }
    out[n++] = 32;
  }
  return out.subarray(0, TEMPLATE_LEN);
}
const TEMPLATE = buildTemplate();

function element(index, size, last) {
  const digits = String(index);
  const pad = Math.max(0, size - FIXED_OVERHEAD - digits.length);
  const from = Number(splitmix64(BigInt(index)) % BigInt(TEMPLATE_LEN - pad + 1));
  return Buffer.concat([
    Buffer.from((index === 0 ? '[' : ',') + '{"i":' + digits + ',"data":"', 'latin1'),
    TEMPLATE.subarray(from, from + pad),
    Buffer.from(last ? '"}]' : '"}', 'latin1'),
  ]);
}

function repeatedArray(el, count) {
  return Buffer.from('[' + Array(count).fill(el).join(',') + ']');
}

let dateDay = -1;
let dateBody = null;
function dates() {
  const day = Math.floor(Date.now() / 86400000);
  if (day !== dateDay) {
    const d = new Date(day * 86400000);
    const el = `{"year":${d.getUTCFullYear()},"month":${d.getUTCMonth() + 1},"day":${d.getUTCDate()}}`;
    dateBody = repeatedArray(el, RECORDS);
    dateDay = day;
  }
  return dateBody;
}

function error(res, status, message) {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.end(JSON.stringify({ error: message }));
}

function getOrHead(req, res) {
  if (req.method === 'GET' || req.method === 'HEAD') return true;
  res.setHeader('allow', 'GET, HEAD');
  error(res, 405, 'method not allowed');
  return false;
}

function within(value, min, max) {
  if (!/^[0-9]+$/.test(value)) return null;
  const v = Number(value);
  return v >= min && v <= max ? v : null;
}

async function stream(req, res, query) {
  let chunks = 10, size = 1024, delay = 0;
  if (query.has('chunks') && (chunks = within(query.get('chunks'), 1, 1000000)) === null) {
    return error(res, 400, '`chunks` must be an integer from 1 to 1000000');
  }
  if (query.has('size') && (size = within(query.get('size'), 32, 1048576)) === null) {
    return error(res, 400, '`size` must be an integer from 32 to 1048576 (bytes per element)');
  }
  if (query.has('delay_ms') && (delay = within(query.get('delay_ms'), 0, 10000)) === null) {
    return error(res, 400, '`delay_ms` must be an integer from 0 to 10000');
  }
  res.setHeader('content-type', 'application/json');
  if (req.method === 'HEAD') return res.end();
  for (let i = 0; i < chunks; i++) {
    if (i > 0 && delay > 0) await new Promise((r) => setTimeout(r, delay));
    if (!res.write(element(i, size, i + 1 === chunks))) {
      await new Promise((r) => res.once('drain', r));
    }
    if (res.destroyed) return;
  }
  res.end();
}

function reqinfo(req, res) {
  const hash = crypto.createHash('sha256');
  let length = 0;
  req.on('data', (chunk) => { hash.update(chunk); length += chunk.length; });
  req.on('error', () => error(res, 400, 'the request body could not be read'));
  req.on('end', () => {
    const headers = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      headers.push([req.rawHeaders[i].toLowerCase(), req.rawHeaders[i + 1]]);
    }
    const te = (req.headers['transfer-encoding'] || '').toLowerCase();
    const cl = req.headers['content-length'];
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({
      method: req.method,
      path: req.url,
      version: 'HTTP/' + req.httpVersion,
      headers,
      content_length: cl === undefined ? null : Number(cl),
      chunked: te.split(',').some((t) => t.trim() === 'chunked'),
      body_length: length,
      body_sha256: hash.digest('hex'),
    }));
  });
}

function whatIsMyName(req, res) {
  const limit = 64 * 1024;
  if (Number(req.headers['content-length'] || 0) > limit) return error(res, 413, 'the body is over 64 KiB');
  const parts = [];
  let length = 0;
  let over = false;
  req.on('data', (chunk) => {
    length += chunk.length;
    if (length > limit) over = true; else parts.push(chunk);
  });
  req.on('end', () => {
    if (over) return error(res, 413, 'the body is over 64 KiB');
    const form = new URLSearchParams(Buffer.concat(parts).toString('utf8'));
    const name = form.get('name');
    if (name === null) return error(res, 400, 'the form has no `name` field');
    if (Buffer.byteLength(name) > 1024) return error(res, 400, 'the name is over 1 KiB');
    res.setHeader('content-type', 'application/json');
    res.end(repeatedArray(JSON.stringify({ name }), RECORDS));
  });
}

const args = process.argv.slice(2);
const arg = (flag) => { const i = args.indexOf(flag); return i >= 0 ? args[i + 1] : undefined; };
const originName = arg('--name');

const server = http.createServer((req, res) => {
  if (originName) res.setHeader('x-origin', originName);
  const url = new URL(req.url, 'http://origin');
  switch (url.pathname) {
    case '/what-date-is-it':
      if (!getOrHead(req, res)) return;
      res.setHeader('content-type', 'application/json');
      res.setHeader('cache-control', 'max-age=5');
      if (req.method === 'HEAD') { res.setHeader('content-length', dates().length); return res.end(); }
      return res.end(dates());
    case '/hello':
      if (!getOrHead(req, res)) return;
      res.setHeader('content-type', 'text/plain; charset=utf-8');
      return res.end(req.method === 'HEAD' ? undefined : HELLO);
    case '/stream':
      if (!getOrHead(req, res)) return;
      return stream(req, res, url.searchParams);
    case '/reqinfo':
      return reqinfo(req, res);
    case '/what-is-my-name':
      return whatIsMyName(req, res);
    default:
      return error(res, 404, 'no such endpoint');
  }
});
// Behind a proxy that keeps idle connections for a minute, as deployments set it (Node's
// default 5 s would close the proxy's pooled connections between runs).
server.keepAliveTimeout = 65000;
server.headersTimeout = 66000;
const unix = arg('--unix');
if (unix) {
  try { fs.unlinkSync(unix); } catch {}
  server.listen(unix);
} else {
  const listen = arg('--listen') || '127.0.0.1:8081';
  const colon = listen.lastIndexOf(':');
  server.listen(Number(listen.slice(colon + 1)), listen.slice(0, colon));
}
process.on('SIGTERM', () => { server.close(); server.closeAllConnections(); });
