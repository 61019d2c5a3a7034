#!/usr/bin/python3
# Writes a capture of N connections left open, each with one unanswered SET: the
# per-flow memory of the flow table (README, --max-flows).
#   bench/analyzer/open_flows_capture.py OUT.pcap N
import struct, sys
n = int(sys.argv[2])
out = open(sys.argv[1], 'wb')
out.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1))
def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b)//2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def pkt(t, src, sport, dst, dport, seq, ack, flags, payload=b''):
    tcp = struct.pack('!HHIIBBHHH', sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0) + payload
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack('!H', csum(ip)) + ip[12:]
    frame = b'\x00' * 12 + b'\x08\x00' + ip + tcp
    out.write(struct.pack('<IIII', t // 1000000, t % 1000000, len(frame), len(frame)) + frame)
srv = bytes([10, 0, 0, 1])
t = 1700000000000000
cmd = b'*3\r\n$3\r\nSET\r\n$7\r\nlock:12\r\n$32\r\n' + b'a' * 32 + b'\r\n'
for i in range(n):
    cli = bytes([10, 2, (i >> 8) & 255, i & 255])
    port = 10000 + (i >> 16)
    t += 10
    pkt(t, cli, port, srv, 6379, 1000, 0, 0x02)
    pkt(t, srv, 6379, cli, port, 5000, 1001, 0x12)
    pkt(t, cli, port, srv, 6379, 1001, 5001, 0x10)
    pkt(t, cli, port, srv, 6379, 1001, 5001, 0x18, cmd)  # unanswered: stays pending
    pkt(t, srv, 6379, cli, port, 5001, 1001 + len(cmd), 0x10)
out.close()
