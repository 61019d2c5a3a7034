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


def client_long(conn, data):
    """Client bytes of any length, as consecutive records (each under 256 bytes)."""
    return b"".join(client(conn, data[i:i + 200]) for i in range(0, len(data), 200))


def command(*parts):
    return b"*%d\r\n" % len(parts) + bulk(*parts)


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

# Redis Functions: a library loaded (both registration forms, 1/0 and 0/-errno answers),
# its functions called and one never loaded, then deleted and flushed; and a library
# whose top level never ends.
LIBRARY = (b"#!lua name=fl\n"
           b"redis.register_function('lk', function(k, a)\n"
           b"  if redis.call('SET', k[1], a[1], 'NX', 'PX', a[2]) then return 1 end return 0 end)\n"
           b"redis.register_function{function_name='ul', callback=function(k, a)\n"
           b"  if redis.call('GET', k[1]) == a[1] then redis.call('DEL', k[1]) return 0 end return -16 end}\n")
seeds["functions"] = (b"\x00"
    + client_long(0, command(b"FUNCTION", b"LOAD", b"REPLACE", LIBRARY)) + server(0, b"$2\r\nfl\r\n")
    + client(0, command(b"FCALL", b"lk", b"1", b"fk", OWNER_A, b"30000")) + server(0, b":1\r\n")
    + client(1, command(b"FCALL", b"LK", b"1", b"fk", OWNER_B, b"30000")) + server(1, b":0\r\n")
    + client(0, command(b"FCALL", b"ul", b"1", b"fk", OWNER_A)) + server(0, b":0\r\n")
    + client(1, command(b"FCALL", b"unseen", b"1", b"gk", OWNER_B, b"30000")) + server(1, b":-16\r\n")
    + client(1, command(b"FCALL_RO", b"unseen", b"1", b"gk", OWNER_B, b"30000")) + server(1, b":0\r\n")
    + client(0, command(b"FUNCTION", b"DELETE", b"fl")) + server(0, b"+OK\r\n")
    + client(0, command(b"FCALL", b"lk", b"1", b"fk", OWNER_A, b"30000")) + server(0, b"-ERR Function not found\r\n")
    + client(2, command(b"FUNCTION", b"FLUSH")) + server(2, b"+OK\r\n"))
seeds["functions_hostile"] = (b"\x00"
    + client_long(0, command(b"FUNCTION", b"LOAD", b"#!lua name=h\nwhile true do end\n"
                             b"redis.register_function('lk', function(k, a) return 1 end)\n"))
    + server(0, b"$1\r\nh\r\n")
    + client(0, command(b"FCALL", b"lk", b"1", b"fk", OWNER_A, b"30000")) + server(0, b":1\r\n"))

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
