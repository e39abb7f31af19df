#!/usr/bin/env python3
"""What one gpuplane.Run.log() call costs while it buffers: wall time of a tight loop / calls.

    python3 bench/sdk-overhead.py                      # no API reachable (a port nobody listens on)
    python3 bench/sdk-overhead.py --api http://127.0.0.1:8787   # also against a running API
    python3 bench/sdk-overhead.py --calls 200000 --repeat 5

A stand-in API that needs no database: `python3 -B sdk/python/tests/stub_api.py &` prints its address.

Three numbers per case: wall time per call; the logging thread's CPU time per call (the call
itself); and the process's whole CPU time per call, flusher included (its encoding shares the GIL
with training), counted until every point is encoded (no API) or sent (API). The buffer bound is raised above
calls x keys, so no point is dropped (dropping would be cheaper and flatter the number).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
import warnings

sys.dont_write_bytecode = True  # no .pyc files in the repo
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))


def dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def measure(api_url: str, keys: int, calls: int) -> tuple:
    import gpuplane

    run = gpuplane.init("bench-sdk", "overhead", params={"keys": keys}, api_url=api_url)
    names = [f"metric_{k}" for k in range(keys)]
    x = 0.5
    log = run.log
    a, b, c, d, e = names[:5] if keys == 5 else ["loss"] * 5
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    if keys == 1:
        for i in range(calls):
            log({"loss": x}, step=i)
    else:
        for i in range(calls):
            log({a: x, b: x, c: x, d: x, e: x}, step=i)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    if api_url == DEAD:
        # Until the flusher has encoded everything (it cannot send): the whole CPU cost of buffering.
        while run._raw:
            time.sleep(0.001)
        proc = time.process_time() - p0
        run.finish(timeout=0)
    else:
        run.finish(timeout=120)  # everything encoded and sent
        proc = time.process_time() - p0
    return tuple(v / calls * 1e6 for v in (wall, cpu, proc))


DEAD = ""


def main() -> None:
    global DEAD
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--api", help="also measure against this reachable API")
    args = ap.parse_args()
    os.environ["GPUPLANE_SDK_MAX_BUFFER"] = str(args.calls * 5 + 1)
    os.environ["GPUPLANE_SDK_INIT_TIMEOUT_S"] = "0"
    os.environ.pop("GPUPLANE_RUN_ID", None)
    warnings.simplefilter("ignore")
    DEAD = dead_url()
    targets = [("no API reachable", DEAD)] + ([(f"API at {args.api}", args.api)] if args.api else [])
    print(f"gpuplane Run.log(): {args.calls} calls a loop, median of {args.repeat} loops, µs per call")
    print("  wall: the loop's elapsed time (inflated on a busy machine); loop cpu: the logging thread's CPU")
    print("  time in the loop (the call itself); all cpu: the process's CPU time from the loop's start until")
    print("  the flusher has encoded every point (no API) or finish() has sent them all (API): the whole cost")
    try:
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    for label, url in targets:
        for keys in (1, 5):
            r = [measure(url, keys, args.calls) for _ in range(args.repeat)]
            wall, cpu, proc = (statistics.median(x[i] for x in r) for i in range(3))
            print(f"  {label:<26} {keys} key{'s' if keys > 1 else ' '} per call: wall {wall:6.2f}  loop cpu {cpu:6.2f}  all cpu {proc:6.2f}")


if __name__ == "__main__":
    main()
