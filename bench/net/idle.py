"""Memory per idle connection: a server's resident memory before and after N connections that
each completed one round trip (an echo, or an HTTP request) and then stay open, idle."""
import selectors
import socket
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_idle(port, n, timeout=60.0, request=b"x", answer_ends=b"x"):
    """Opens n connections to 127.0.0.1:port, each sending `request` and reading until what came
    back ends with `answer_ends`; returns the sockets."""
    sel = selectors.DefaultSelector()
    socks = []
    got = {}
    pending = 0
    deadline = time.time() + timeout
    for i in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, "connect")
        socks.append(s)
        pending += 1
        # Keep the accept queue from overflowing: drain progress every 256 connects.
        if i % 256 == 255 or i == n - 1:
            while pending > (0 if i == n - 1 else 512):
                if time.time() > deadline:
                    raise RuntimeError(f"idle connections: {pending} of {n} did not complete")
                for key, ev in sel.select(timeout=1.0):
                    s = key.fileobj
                    if key.data == "connect":
                        s.send(request)
                        sel.modify(s, selectors.EVENT_READ, "answer")
                    else:
                        data = s.recv(65536)
                        if not data:
                            raise RuntimeError("idle connections: closed by the server")
                        got[s] = got.get(s, b"") + data
                        if got[s].endswith(answer_ends):
                            sel.unregister(s)
                            del got[s]
                            pending -= 1
    sel.close()
    return socks


def measure(pid, port, n, request=b"x", answer_ends=b"x", settle_s=0.0):
    """Returns (KiB per connection, connections) for the server process pid listening on port,
    measured settle_s seconds after the last connection went idle."""
    before = rss_kib(pid)
    # Every connection has had its answer: the server holds n idle connections.
    socks = open_idle(port, n, request=request, answer_ends=answer_ends)
    time.sleep(settle_s)
    after = rss_kib(pid)
    for s in socks:
        s.close()
    return (after - before) / n, n
