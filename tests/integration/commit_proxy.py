#!/usr/bin/env python3
"""A PostgreSQL protocol-aware TCP proxy that loses one COMMIT's answer, or one COMMIT.

    commit_proxy.py PORT_FILE UNIX_SOCKET MODE N [MARK]

Listens on 127.0.0.1 (a free port, written to PORT_FILE once listening) and forwards every
connection to the server's unix socket UNIX_SOCKET (".../.s.PGSQL.5432"), byte for byte.  It
parses both directions into messages (type byte + int32 length; the untyped startup packet
first) and counts the COMMITs of transactions that sent COPY data (the batches of v7fill: its
other transactions copy nothing), or, with MARK, of transactions that sent a query holding the
text MARK (a statement only that transaction runs).  At the Nth such COMMIT, once, it closes
both sockets of that connection:

    ack   after the server answered CommandComplete "COMMIT", before forwarding that answer:
          the commit landed, the client never hears so;
    send  when the client sends that COMMIT, before forwarding it: nothing committed.

Every later connection (the reconnect) is forwarded untouched, unless a file "refuse" is next
to PORT_FILE when the connection was cut: then it is closed at once (the server unreachable).
Plain connections only (sslmode=disable, gssencmode=disable).  Events go to stderr, one line each; "fired" is
written next to PORT_FILE when the connection was cut.
"""
import os
import socket
import struct
import sys
import threading

port_file, unix_path, mode, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mark = sys.argv[5].encode() if len(sys.argv) > 5 else None
assert mode in ("ack", "send"), mode
here = os.path.dirname(port_file) or "."
lock = threading.Lock()
state = {"commits": 0, "fired": False}


def log(msg):
    sys.stderr.write("commit_proxy: %s\n" % msg)
    sys.stderr.flush()


class Conn:
    def __init__(self, client, server):
        self.client = client
        self.server = server
        self.copied = False  # the open transaction sent COPY data (or a query with MARK)
        self.cut = False

    def close(self):
        self.cut = True
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def fire(conn, what):
    """Counts a batch COMMIT; True (and the connection cut) when it is the one."""
    with lock:
        if state["fired"]:
            return False
        state["commits"] += 1
        log("%s of a batch COMMIT number %d" % (what, state["commits"]))
        if state["commits"] != nth:
            return False
        state["fired"] = True
    log("cutting the connection (%s)" % mode)
    state["refuse"] = os.path.exists(os.path.join(here, "refuse"))
    with open(os.path.join(here, "fired"), "w") as f:
        f.write(mode + "\n")
    conn.close()
    return True


def is_commit(query):
    return query.rstrip(b"\0").strip().rstrip(b";").strip().upper() in (b"COMMIT", b"END")


def client_to_server(conn):
    buf = b""
    startup = True
    try:
        while True:
            data = conn.client.recv(65536)
            if not data:
                break
            buf += data
            out = b""
            while True:
                if startup:
                    if len(buf) < 4:
                        break
                    n = struct.unpack("!i", buf[:4])[0]
                    if len(buf) < n:
                        break
                    msg, buf = buf[:n], buf[n:]
                    code = struct.unpack("!i", msg[4:8])[0] if n >= 8 else 0
                    if code in (80877103, 80877104):
                        raise SystemExit("commit_proxy: SSL/GSS request: use sslmode=disable")
                    startup = False
                    out += msg
                    continue
                msg, buf = next_message(buf)
                if msg is None:
                    break
                typ = msg[0:1]
                if typ == b"d" and mark is None:
                    conn.copied = True
                elif mark is not None and typ in (b"Q", b"P") and mark in msg:
                    conn.copied = True
                elif typ == b"Q" and is_commit(msg[5:]) and conn.copied and mode == "send":
                    conn.server.sendall(out)
                    out = b""
                    if fire(conn, "sending"):
                        return
                out += msg
            if out:
                conn.server.sendall(out)
    except OSError:
        pass
    if not conn.cut:
        conn.close()


def next_message(buf):
    """One whole protocol message (type byte, int32 length, body) off the front of buf:
    (message, rest), or (None, buf) while it is incomplete."""
    if len(buf) < 5:
        return None, buf
    n = struct.unpack("!i", buf[1:5])[0]
    if len(buf) < 1 + n:
        return None, buf
    return buf[:1 + n], buf[1 + n:]


def server_to_client(conn):
    buf = b""
    try:
        while True:
            data = conn.server.recv(65536)
            if not data:
                break
            buf += data
            out = b""
            while True:
                msg, buf = next_message(buf)
                if msg is None:
                    break
                typ = msg[0:1]
                if typ == b"C":
                    tag = msg[5:].rstrip(b"\0")
                    if tag in (b"COMMIT", b"ROLLBACK"):
                        copied, conn.copied = conn.copied, False
                        if tag == b"COMMIT" and copied and mode == "ack":
                            conn.client.sendall(out)
                            out = b""
                            if fire(conn, "answer"):
                                return
                out += msg
            if out:
                conn.client.sendall(out)
    except OSError:
        pass
    if not conn.cut:
        conn.close()


def main():
    lsn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(64)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % lsn.getsockname()[1])
    os.rename(tmp, port_file)
    while True:
        client, _ = lsn.accept()
        if state.get("refuse"):
            log("refusing a connection after the cut")
            client.close()
            continue
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.connect(unix_path)
        except OSError as e:
            log("could not reach the server: %s" % e)
            client.close()
            continue
        conn = Conn(client, server)
        for fn in (client_to_server, server_to_client):
            threading.Thread(target=fn, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
