#!/usr/bin/env python3
"""Writes fuzz/corpus/pipeline/*: seed programs for fuzz_pipeline (its header gives the format).

Run from the repository root: python3 fuzz/make_pipeline_seeds.py
"""
import os


def bulk(*parts):
    return b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def client(conn, data):
    assert len(data) < 256
    return bytes([conn | (0 << 2), len(data)]) + data


def server(conn, data):
    assert len(data) < 256
    return bytes([conn | (1 << 2), len(data)]) + data


def script(conn, index, count, args, by_sha=False):
    assert len(args) < 256
    return bytes([conn | (2 << 2), index | (0x80 if by_sha else 0), count, len(args)]) + args


ACQUIRE, UNLOCK, RENEW = 0, 1, 2
OWNER_A, OWNER_B = b"80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:1", b"2c1d5a8e-4f0b-4b8e-9a51-0c5e7d2f1b33:7"
CHANNEL = b"redisson_lock__channel:{order}"

seeds = {
    # The seed document's contention flow: A holds, B waits subscribed, A unlocks, B wakes.
    "contention": b"\x00"
    + script(0, ACQUIRE, 6, bulk(b"1", b"order", b"30000", OWNER_A)) + server(0, b"$-1\r\n")
    + script(1, ACQUIRE, 6, bulk(b"1", b"order", b"30000", OWNER_B)) + server(1, b":29000\r\n")
    + client(1, b"*2\r\n" + bulk(b"SUBSCRIBE", CHANNEL))
    + server(1, b"*3\r\n" + bulk(b"subscribe", CHANNEL) + b":1\r\n")
    + script(0, RENEW, 6, bulk(b"1", b"order", b"30000", OWNER_A)) + server(0, b":1\r\n")
    + script(0, UNLOCK, 8, bulk(b"2", b"order", CHANNEL, b"0", b"30000", OWNER_A)) + server(0, b":1\r\n")
    + server(1, b"*3\r\n" + bulk(b"message", CHANNEL, b"0"))
    + script(1, ACQUIRE, 6, bulk(b"1", b"order", b"30000", OWNER_B), by_sha=True) + server(1, b"$-1\r\n"),
    # A RedLock over two servers, a gap, a retransmission, reordering and a long silence.
    "redlock_gaps": b"\x11"
    + script(0, ACQUIRE, 6, bulk(b"1", b"r", b"10000", OWNER_A)) + server(0, b"$-1\r\n")
    + script(2, ACQUIRE, 6, bulk(b"1", b"r", b"10000", OWNER_A)) + server(2, b"$-1\r\n")
    + bytes([2 | (5 << 2), 40]) + bytes([2 | (6 << 2)])
    + bytes([1 | (7 << 2), 14]) + b"*1\r\n$4\r\nPING\r\n" + client(1, b"*1\r\n$4\r\nPING\r\n")
    + bytes([8 << 2, 255])
    + script(3, ACQUIRE, 6, bulk(b"1", b"r", b"10000", OWNER_B)) + server(3, b"$-1\r\n"),
    # RESP3 and a connection already open when the capture started.
    "resp3_midstream": b"\x20"
    + bytes([0 | (9 << 2)]) + server(0, b"$-1\r\n")
    + client(0, b"*2\r\n" + bulk(b"HELLO", b"3")) + server(0, b"%1\r\n+proto\r\n:3\r\n")
    + script(0, ACQUIRE, 6, bulk(b"1", b"k", b"5000", OWNER_A)) + server(0, b"_\r\n")
    + server(0, b">3\r\n" + bulk(b"message", CHANNEL, b"0"))
    + bytes([0 | (3 << 2) | 0x40]) + bytes([0 | (4 << 2)]),
    # Two locks held and released in turn: the second lock's row sits at an odd offset in
    # the lock store, so its fields are unaligned (clang's UBSan caught a reference bound
    # to one in CI; GCC copies). Its text-format twin is added below.
    "two_locks_jsonl": b"\x00"
    + script(0, ACQUIRE, 6, bulk(b"1", b"order", b"30000", OWNER_A)) + server(0, b"$-1\r\n")
    + script(0, UNLOCK, 8, bulk(b"2", b"order", CHANNEL, b"0", b"30000", OWNER_A)) + server(0, b":1\r\n")
    + script(1, ACQUIRE, 6, bulk(b"1", b"stock-7", b"30000", OWNER_B)) + server(1, b"$-1\r\n")
    + script(1, RENEW, 6, bulk(b"1", b"stock-7", b"30000", OWNER_B)) + server(1, b":1\r\n")
    + script(1, UNLOCK, 8, bulk(b"2", b"stock-7", CHANNEL, b"0", b"30000", OWNER_B)) + server(1, b":1\r\n")
    + script(1, ACQUIRE, 6, bulk(b"1", b"stock-7", b"30000", OWNER_B)) + server(1, b"$-1\r\n")
    + script(1, UNLOCK, 8, bulk(b"2", b"stock-7", CHANNEL, b"0", b"30000", OWNER_B)) + server(1, b":1\r\n")
    + script(0, ACQUIRE, 6, bulk(b"1", b"k3", b"1000", OWNER_A)) + server(0, b"$-1\r\n")
    + bytes([8 << 2, 255]) * 4,
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "pipeline")
os.makedirs(out, exist_ok=True)
seeds["two_locks_text"] = b"\x20" + seeds["two_locks_jsonl"][1:]
# The contention flow with the clock at the edges of the times a capture file can give
# (options bit 7, then 0: a minute before 2^62 - 1 µs, 1: at 0), then a minute of silence
# so that the lease runs out there.
silence = bytes([8 << 2, 255]) * 4
seeds["clock_at_latest"] = b"\x80\x00" + seeds["contention"][1:] + silence
seeds["clock_at_zero"] = b"\x80\x01" + seeds["contention"][1:] + silence
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
