#!/usr/bin/env python3
"""The independent WebSocket peer of tests/http/websocket_peers_test.cc (Python websockets).

  ws_peer.py server FD [CERT KEY]   serves on the listening socket FD (inherited), TLS if given
  ws_peer.py client URL             runs the client script against a gluon server; exit 0 if it
                                    all went as expected, else prints what did not

Server routes: /echo echoes; /fragments sends a fragmented text message, then echoes;
/ping pings and reports the pong, then echoes; /close closes with 4001 "py-bye";
/badutf8 sends a text frame that is not UTF-8; /report then sends the close code that got.
"""
import asyncio
import socket
import ssl
import sys

import websockets
from websockets.exceptions import ConnectionClosed


async def echo(ws):
    try:
        async for m in ws:
            await ws.send(m)
    except ConnectionClosed:
        pass


reports = {}
reported = None


async def route(ws, path=None):
    path = path or ws.path
    if path == "/fragments":
        await ws.send(["frag", "men", "ted \u20ac"])
    elif path == "/ping":
        waiter = await ws.ping(b"py")
        await asyncio.wait_for(waiter, 5)
        await ws.send("pong received")
    elif path == "/close":
        await ws.close(4001, "py-bye")
        return
    elif path == "/badutf8":
        await ws.write_frame(True, 0x1, b"bad \xc3\x28")
        try:
            await ws.recv()
        except ConnectionClosed as e:
            reports["badutf8"] = e.rcvd.code if e.rcvd else None
            reported.set()
        return
    elif path == "/report":  # what /badutf8 saw, once it has seen it
        await asyncio.wait_for(reported.wait(), 5)
        await ws.send(f"badutf8 close {reports['badutf8']}")
        return
    await echo(ws)


async def serve(fd, cert, key):
    global reported
    reported = asyncio.Event()
    sock = socket.socket(fileno=fd)
    ctx = None
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
    async with websockets.serve(route, sock=sock, ssl=ctx, max_size=None, compression=None):
        await asyncio.Future()


failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


async def client(base):
    opts = dict(max_size=None, open_timeout=5, close_timeout=5)
    async with websockets.connect(base + "/echo", **opts) as ws:
        await ws.send("hello gluon")
        check("text echo", await ws.recv(), "hello gluon")
        await ws.send(b"\x00\x01\x02")
        check("binary echo", await ws.recv(), b"\x00\x01\x02")
        await ws.send(["frag", "men", "ted \u20ac"])  # three frames
        check("fragmented echo", await ws.recv(), "fragmented \u20ac")
        big = bytes(range(256)) * 4096
        await ws.send(big)
        check("1 MiB echo", await ws.recv(), big)
        waiter = await ws.ping(b"ping!")
        await asyncio.wait_for(waiter, 5)
        await ws.close(1001, "py going away")
        check("close code echoed", ws.close_code, 1001)
    async with websockets.connect(base + "/close-me", **opts) as ws:
        try:
            await ws.recv()
            failures.append("close-me: a message instead of a close")
        except ConnectionClosed as e:
            check("server close code", e.rcvd.code if e.rcvd else None, 4000)
            check("server close reason", e.rcvd.reason if e.rcvd else None, "gluon-bye")
    async with websockets.connect(base + "/echo", **opts) as ws:
        await ws.write_frame(True, 0x1, b"bad \xc3\x28")
        try:
            await ws.recv()
            failures.append("bad UTF-8: a message instead of a close")
        except ConnectionClosed as e:
            check("bad UTF-8 close code", e.rcvd.code if e.rcvd else None, 1007)


def main():
    if sys.argv[1] == "server":
        cert, key = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else (None, None)
        asyncio.run(serve(int(sys.argv[2]), cert, key))
        return 0
    asyncio.run(client(sys.argv[2]))
    for f in failures:
        print(f, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
