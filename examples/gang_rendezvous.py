#!/usr/bin/env python3
"""A multi-node job's members find each other with the standard library alone.

    gpuctl submit --nodes 2 --gpus-per-node 1 -- python3 examples/gang_rendezvous.py

GPUPlane gives every member MASTER_ADDR and MASTER_PORT (rank 0's node and a free port
there), NODE_RANK, NNODES and CUDA_VISIBLE_DEVICES (see docs). Rank 0 listens on MASTER_PORT;
every other rank connects to MASTER_ADDR:MASTER_PORT and sends what it was told; rank 0 checks
that each rank arrived once and that they agree on the node count, then answers each. Every
member prints one JSON line: {"rank": R, "nnodes": N, "cards": "...", "peers": [...]}.
Exits 1 when the members disagree, 2 when the rendezvous times out (--timeout S, default 60).
"""

import argparse
import json
import os
import socket
import sys
import time


def told() -> dict:
    return {
        "rank": int(os.environ["NODE_RANK"]),
        "nnodes": int(os.environ["NNODES"]),
        "cards": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "host": socket.gethostname(),
    }


def recv_line(conn: socket.socket) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("peer closed before a whole line")
        buf += chunk
    return json.loads(buf)


def lead(me: dict, port: int, deadline: float) -> list:
    srv = socket.create_server(("", port), reuse_port=False)
    srv.settimeout(max(0.1, deadline - time.time()))
    peers, conns = [me], []
    while len(peers) < me["nnodes"]:
        conn, _ = srv.accept()
        conn.settimeout(max(0.1, deadline - time.time()))
        peers.append(recv_line(conn))
        conns.append(conn)
    ranks = sorted(p["rank"] for p in peers)
    ok = ranks == list(range(me["nnodes"])) and all(p["nnodes"] == me["nnodes"] for p in peers)
    answer = (json.dumps({"ok": ok, "peers": sorted(peers, key=lambda p: p["rank"])}) + "\n").encode()
    for conn in conns:
        conn.sendall(answer)
        conn.close()
    srv.close()
    if not ok:
        raise ValueError(f"members disagree: ranks {ranks}")
    return sorted(peers, key=lambda p: p["rank"])


def follow(me: dict, addr: str, port: int, deadline: float) -> list:
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=max(0.1, deadline - time.time()))
            break
        except OSError:
            if time.time() > deadline:
                raise TimeoutError(f"rank 0 never listened at {addr}:{port}")
            time.sleep(0.2)
    conn.sendall((json.dumps(me) + "\n").encode())
    answer = recv_line(conn)
    conn.close()
    if not answer["ok"]:
        raise ValueError("rank 0 says the members disagree")
    return answer["peers"]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    me = told()
    deadline = time.time() + a.timeout
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    try:
        peers = lead(me, port, deadline) if me["rank"] == 0 else follow(me, addr, port, deadline)
    except (TimeoutError, socket.timeout) as e:
        print(f"rendezvous timed out: {e}", file=sys.stderr)
        return 2
    except (ValueError, ConnectionError) as e:
        print(f"rendezvous failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"rank": me["rank"], "nnodes": me["nnodes"], "cards": me["cards"], "peers": [p["rank"] for p in peers]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
