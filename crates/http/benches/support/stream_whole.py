#!/usr/bin/env python3
"""Seed 004's whole stream (/stream?chunks=8192&size=16384, 134 MB) through the C deflate encoders:
bytes and one-pass CPU, whole and sync-flushed every frame (docs/performance.md, "The stream row").

Needs `pip install isal zlib-ng deflate`. Run: taskset -c 0 python3 stream_whole.py [frames]"""
import sys, time, zlib
from isal import isal_zlib
from zlib_ng import zlib_ng
import deflate

# The demo origin's generator (crates/origin/src/stream.rs, padding.rs), byte for byte.
M = (1 << 64) - 1
WORDS = """account active address admin alpha amount archive balance batch billing branch bucket build cache card cart channel city client cluster comment config country created customer data default delta deploy device disabled email enabled event failed feature file filter group health host image index invoice item label level limit location message metric mode name network node order owner page payment pending phone policy price product profile project queue region release report request role route sample schema search secret server service session shipping source status stock stream street success tag target team tenant ticket token total update user value version volume warning window zone""".split()
def sm(x):
    z = (x + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)
TL = 2 * 1024 * 1024
def template():
    out = bytearray(); s = 0x5EED
    while len(out) < TL:
        s = sm(s); out += WORDS[s % len(WORDS)].encode()
        if s >> 60 == 0:
            out += bytes([48 + ((s >> 32) & 0xff) % 10, 48 + ((s >> 40) & 0xff) % 10])
        out += b' '
    return bytes(out[:TL])
def frames(n, size=16384):
    t = template(); res = []
    for i in range(n):
        d = str(i).encode(); pad = size - (16 + len(d))
        f = (TL - pad + 1); fr = sm(i) % f
        e = (b'[' if i == 0 else b',') + b'{"i":' + d + b',"data":"' + t[fr:fr + pad] + b'"}'
        if i == n - 1: e += b']'
        res.append(e)
    return res
fr = frames(int(sys.argv[1]) if len(sys.argv) > 1 else 8192); L = sum(map(len, fr))
print(f"{len(fr)} frames, {L} bytes")
def run(mod, level, flush):
    c = mod.compressobj(level, mod.DEFLATED, 31); out = 0
    for f in fr:
        out += len(c.compress(f))
        if flush: out += len(c.flush(mod.Z_SYNC_FLUSH))
    return out + len(c.flush())
for name, mod, levels in [("zlib", zlib, [1]), ("zlib-ng", zlib_ng, [1, 2, 3]), ("isal", isal_zlib, [1, 2, 3])]:
    for lv in levels:
        for flush in (False, True):
            t0 = time.process_time(); size = run(mod, lv, flush); t = time.process_time() - t0
            print(f"{name:8} {lv} {'flushed' if flush else 'whole  '} {size:>11} B {L/size:5.3f}x {t*1e3/(L/1e6):6.2f} ms/MB")
# libdeflate: each 16 KiB frame its own deflate stream (no history across frames): the best a
# whole-buffer encoder can do for a stream flushed every frame.
t0 = time.process_time(); size = sum(len(deflate.deflate_compress(f, 1)) for f in fr) + 18; t = time.process_time() - t0
print(f"libdeflate 1 per frame, no history {size:>11} B {L/size:5.3f}x {t*1e3/(L/1e6):6.2f} ms/MB")
