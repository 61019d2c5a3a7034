#!/usr/bin/env python3
"""Writes the profile-guided build's training capture: busy Redisson-style lock traffic.

    scripts/pgo-training-capture.py LOCKSCOPE OUT.pcap [ROUNDS]

A synthetic pcap (Ethernet, IPv4, TCP to port 6379) of 24 connections seen from their
handshakes, each sending pipelines of 48 calls and getting the replies in one segment:
the acquire script (EVAL, most of them re-entries of a held lock), renewals, unlocks that
release or count down, failed attempts answered with a PTTL, EVALSHA of the same scripts,
and a SUBSCRIBE/message/UNSUBSCRIBE now and then; connections close with FIN. What the
keep-up benchmark's load (bench/analyzer/keepup.sh) exercises, with the other paths of a
real port around it. The scripts' texts come from LOCKSCOPE (`lockscope scripts`), the one
source of truth. Deterministic (fixed seed). Needs nothing but Python 3.
"""
import random
import struct
import subprocess
import sys

SERVER = (bytes([127, 0, 0, 1]), 6379)
OWNER = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767"


def script(lockscope, name, sha1=False):
    args = [lockscope, "scripts", name] + (["--sha1"] if sha1 else [])
    text = subprocess.run(args, check=True, capture_output=True).stdout.decode()
    return text.strip() if sha1 else text  # a script's own bytes stay as printed


def command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class writer:
    def __init__(self, path):
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        self.us = 1_700_000_000_000_000

    def packet(self, src, dst, seq, ack, flags, payload=b""):
        self.us += 7
        tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
        pseudo = src[0] + dst[0] + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
        tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp + payload)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6, 0, src[0], dst[0])
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        frame = b"\0" * 12 + b"\x08\x00" + ip + tcp + payload
        self.f.write(struct.pack("<IIII", self.us // 1_000_000, self.us % 1_000_000, len(frame), len(frame)))
        self.f.write(frame)


class connection:
    def __init__(self, w, port):
        self.w, self.client = w, (bytes([127, 0, 0, 1]), port)
        self.cseq, self.sseq = 1000, 5000
        w.packet(self.client, SERVER, self.cseq, 0, 0x02)
        w.packet(SERVER, self.client, self.sseq, self.cseq + 1, 0x12)
        self.cseq += 1
        self.sseq += 1
        w.packet(self.client, SERVER, self.cseq, self.sseq, 0x10)

    def send(self, data):
        self.w.packet(self.client, SERVER, self.cseq, self.sseq, 0x18, data)
        self.cseq += len(data)

    def reply(self, data):
        self.w.packet(SERVER, self.client, self.sseq, self.cseq, 0x18, data)
        self.sseq += len(data)

    def close(self):
        self.w.packet(self.client, SERVER, self.cseq, self.sseq, 0x11)
        self.w.packet(SERVER, self.client, self.sseq, self.cseq + 1, 0x11)
        self.w.packet(self.client, SERVER, self.cseq + 1, self.sseq + 1, 0x10)


def main():
    lockscope, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    acquire, renew, unlock = (script(lockscope, n) for n in ("acquire", "renew", "unlock"))
    acquire_sha = script(lockscope, "acquire", sha1=True)
    rng = random.Random(7)
    w = writer(out)
    conns = [connection(w, 40000 + i) for i in range(24)]
    held = {}  # lock -> (owner, count)
    for r in range(rounds):
        for ci, c in enumerate(conns):
            owner = "%s:%d" % (OWNER, ci)
            requests, replies = [], []
            for _ in range(48):
                name = "myLock:%012d" % rng.randrange(4000)
                roll = rng.random()
                state = held.get(name)
                if roll < 0.08 and state and state[0] == owner:
                    requests.append(command("EVAL", renew, 1, name, 30000, owner))
                    replies.append(b":1\r\n")
                elif roll < 0.30 and state and state[0] == owner:
                    requests.append(command("EVAL", unlock, 2, name, "redisson_lock__channel:{%s}" % name, 0, 30000, owner))
                    if state[1] > 1:
                        held[name] = (owner, state[1] - 1)
                        replies.append(b":0\r\n")
                    else:
                        del held[name]
                        replies.append(b":1\r\n")
                else:
                    via_sha = roll > 0.9
                    call = ("EVALSHA", acquire_sha) if via_sha else ("EVAL", acquire)
                    requests.append(command(*call, 1, name, 30000, owner))
                    if state and state[0] != owner:
                        replies.append(b":%d\r\n" % rng.randrange(1000, 30000))
                    else:
                        held[name] = (owner, (state[1] if state else 0) + 1)
                        replies.append(b"$-1\r\n")
            c.send(b"".join(requests))
            c.reply(b"".join(replies))
        if r % 10 == 5:  # a waiter's subscription and its wake-up
            c = conns[r % len(conns)]
            channel = "redisson_lock__channel:{myLock:%012d}" % r
            c.send(command("SUBSCRIBE", channel))
            c.reply(b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(channel), channel.encode()))
            c.reply(b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(channel), channel.encode()))
            c.send(command("UNSUBSCRIBE", channel))
            c.reply(b"*3\r\n$11\r\nunsubscribe\r\n$%d\r\n%s\r\n:0\r\n" % (len(channel), channel.encode()))
    for c in conns:
        c.close()
    w.f.close()


if __name__ == "__main__":
    main()
