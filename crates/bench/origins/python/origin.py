"""The lab's Python origin: the demo origin's endpoints (crates/origin/README.md) as a bare ASGI
app under uvicorn, written the way an ASGI framework's responses are sent: a whole answer is
one `http.response.start` with `content-length` and one `http.response.body`; a stream is one
`http.response.body` per element with `more_body` (uvicorn frames it chunked). The bytes are
the demo origin's own: the lab's correctness check compares them.

Usage: python origin.py --name NAME (--listen HOST:PORT | --unix PATH)
Needs uvicorn (`pip install 'uvicorn[standard]'`: uvloop and httptools, as deployed).
"""

import argparse
import hashlib
import json
import time
import urllib.parse

import uvicorn

RECORDS = 10_000
TEMPLATE_LEN = 2 * 1024 * 1024
FIXED_OVERHEAD = 5 + 9 + 2
HELLO = b"Hello World!" * 10
MASK = (1 << 64) - 1
WORDS = (
    "account active address admin alpha amount archive balance batch billing branch bucket "
    "build cache card cart channel city client cluster comment config country created customer "
    "data default delta deploy device disabled email enabled event failed feature file filter "
    "group health host image index invoice item label level limit location message metric mode "
    "name network node order owner page payment pending phone policy price product profile "
    "project queue region release report request role route sample schema search secret server "
    "service session shipping source status stock stream street success tag target team tenant "
    "ticket token total update user value version volume warning window zone"
).split()


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def build_template():
    """The /stream filler, byte for byte the demo origin's (crates/origin/src/padding.rs)."""
    out = bytearray()
    state = 0x5EED
    while len(out) < TEMPLATE_LEN:
        state = splitmix64(state)
        out += WORDS[state % len(WORDS)].encode()
        if state >> 60 == 0:
            out.append(48 + ((state >> 32) & 0xFF) % 10)
            out.append(48 + ((state >> 40) & 0xFF) % 10)
        out.append(32)
    return bytes(out[:TEMPLATE_LEN])


TEMPLATE = build_template()


def element(index, size, last):
    digits = str(index).encode()
    pad = max(0, size - FIXED_OVERHEAD - len(digits))
    start = splitmix64(index) % (TEMPLATE_LEN - pad + 1)
    head = (b"[" if index == 0 else b",") + b'{"i":' + digits + b',"data":"'
    return head + TEMPLATE[start : start + pad] + (b'"}]' if last else b'"}')


def repeated_array(el, count):
    return b"[" + b",".join([el] * count) + b"]"


_dates = {"day": -1, "body": b""}


def dates():
    day = int(time.time()) // 86400
    if day != _dates["day"]:
        t = time.gmtime(day * 86400)
        el = '{"year":%d,"month":%d,"day":%d}' % (t.tm_year, t.tm_mon, t.tm_mday)
        _dates["body"] = repeated_array(el.encode(), RECORDS)
        _dates["day"] = day
    return _dates["body"]


def make_app(name):
    origin = [(b"x-origin", name.encode())] if name else []

    async def whole(send, status, content_type, body, extra=(), head=False):
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status,
                    "headers": headers + list(extra) + origin})
        await send({"type": "http.response.body", "body": b"" if head else body})

    async def error(send, status, message, extra=()):
        body = json.dumps({"error": message}, separators=(",", ":")).encode()
        await whole(send, status, b"application/json", body,
                    [(b"cache-control", b"no-store")] + list(extra))

    async def read_body(receive, limit=None):
        parts, length = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            length += len(chunk)
            if limit is None or length <= limit:
                parts.append(chunk)
            if not message.get("more_body"):
                return b"".join(parts) if limit is None or length <= limit else False

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        query = urllib.parse.parse_qs(scope["query_string"].decode("latin-1"))
        get_or_head = method in ("GET", "HEAD")
        not_allowed = [(b"allow", b"GET, HEAD")]
        if path == "/what-date-is-it":
            if not get_or_head:
                return await error(send, 405, "method not allowed", not_allowed)
            return await whole(send, 200, b"application/json", dates(),
                               [(b"cache-control", b"max-age=5")], head=method == "HEAD")
        if path == "/hello":
            if not get_or_head:
                return await error(send, 405, "method not allowed", not_allowed)
            return await whole(send, 200, b"text/plain; charset=utf-8", HELLO,
                               head=method == "HEAD")
        if path == "/stream":
            if not get_or_head:
                return await error(send, 405, "method not allowed", not_allowed)
            params = {"chunks": 10, "size": 1024, "delay_ms": 0}
            bounds = {
                "chunks": (1, 1_000_000, "`chunks` must be an integer from 1 to 1000000"),
                "size": (32, 1_048_576,
                         "`size` must be an integer from 32 to 1048576 (bytes per element)"),
                "delay_ms": (0, 10_000, "`delay_ms` must be an integer from 0 to 10000"),
            }
            for key, (low, high, message) in bounds.items():
                if key in query:
                    value = query[key][0]
                    if not value.isdigit() or not low <= int(value) <= high:
                        return await error(send, 400, message)
                    params[key] = int(value)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")] + origin})
            if method == "HEAD":
                return await send({"type": "http.response.body", "body": b""})
            chunks = params["chunks"]
            for i in range(chunks):
                if i and params["delay_ms"]:
                    import asyncio
                    await asyncio.sleep(params["delay_ms"] / 1000)
                await send({"type": "http.response.body",
                            "body": element(i, params["size"], i + 1 == chunks),
                            "more_body": True})
            return await send({"type": "http.response.body", "body": b""})
        if path == "/reqinfo":
            digest, length = hashlib.sha256(), 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return
                chunk = message.get("body", b"")
                digest.update(chunk)
                length += len(chunk)
                if not message.get("more_body"):
                    break
            headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
            lookup = dict((k, v) for k, v in headers)
            te = lookup.get("transfer-encoding", "").lower()
            cl = lookup.get("content-length")
            target = scope.get("raw_path", path.encode()).decode("latin-1")
            if scope["query_string"]:
                target += "?" + scope["query_string"].decode("latin-1")
            info = {
                "method": method,
                "path": target,
                "version": "HTTP/" + scope.get("http_version", "1.1"),
                "headers": headers,
                "content_length": int(cl) if cl and cl.isdigit() else None,
                "chunked": any(t.strip() == "chunked" for t in te.split(",")),
                "body_length": length,
                "body_sha256": digest.hexdigest(),
            }
            body = json.dumps(info, separators=(",", ":")).encode()
            return await whole(send, 200, b"application/json", body)
        if path == "/what-is-my-name":
            body = await read_body(receive, 64 * 1024)
            if body is None:
                return
            if body is False:
                return await error(send, 413, "the body is over 64 KiB")
            form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
            if "name" not in form:
                return await error(send, 400, "the form has no `name` field")
            name_value = form["name"][0]
            if len(name_value.encode()) > 1024:
                return await error(send, 400, "the name is over 1 KiB")
            el = json.dumps({"name": name_value}, separators=(",", ":")).encode()
            return await whole(send, 200, b"application/json", repeated_array(el, RECORDS))
        return await error(send, 404, "no such endpoint")

    return app


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="")
    parser.add_argument("--listen")
    parser.add_argument("--unix")
    args = parser.parse_args()
    options = dict(log_level="warning", access_log=False, lifespan="off",
                   # Behind a proxy that keeps idle connections for a minute (uvicorn's
                   # default 5 s would close the proxy's pooled connections between runs).
                   timeout_keep_alive=65)
    if args.unix:
        options["uds"] = args.unix
    else:
        host, _, port = (args.listen or "127.0.0.1:8081").rpartition(":")
        options.update(host=host, port=int(port))
    uvicorn.run(make_app(args.name), **options)


if __name__ == "__main__":
    main()
