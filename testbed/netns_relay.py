"""A TCP relay from the bridge of `testbed/netns.py` to servers that listen on 127.0.0.1 only.

The S3 front and the REST catalog server bind the loopback interface (no test listens beyond it); hosts in
network namespaces have loopbacks of their own, so they reach those servers through this relay, which listens
on the bridge's private address (an address of this machine) and copies bytes both ways,
one thread per direction.

Run: python testbed/netns_relay.py LISTEN_HOST TARGET_PORT [TARGET_PORT ...]
It prints `relay LISTEN_HOST:PORT -> 127.0.0.1:TARGET_PORT` per target once it accepts connections.
"""

from __future__ import annotations

import socket
import sys
import threading


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _serve(listener: socket.socket, target: tuple[str, int]) -> None:
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(target, timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        there = threading.Thread(target=_pipe, args=(client, upstream), daemon=True)
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        there.start()
        back.start()
        threading.Thread(target=_close_after, args=(there, back, client, upstream), daemon=True).start()


def _close_after(there: threading.Thread, back: threading.Thread, *socks: socket.socket) -> None:
    there.join()
    back.join()
    for sock in socks:
        sock.close()


def main(argv: list[str]) -> None:
    host, ports = argv[0], [int(p) for p in argv[1:]]
    threads = []
    for port in ports:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(256)
        print(f"relay {host}:{listener.getsockname()[1]} -> 127.0.0.1:{port}", flush=True)
        threads.append(threading.Thread(target=_serve, args=(listener, ("127.0.0.1", port)), daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main(sys.argv[1:])
