#!/usr/bin/env python3
"""Run llama.cpp's own llama-server (the `xllamacpp` wheel: prebuilt llama.cpp, in-process HTTP
listener) on loopback, for boyd's remote-backend tests and demos.

    python scripts/llama_server.py MODEL.gguf [--port 0] [--ctx 8192] [--api-key KEY]

Prints one line `listening http://HOST:PORT` on stdout once the server answers, then serves until
stdin closes (the parent process exits) or it is killed.
"""
import argparse
import sys
import time
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--api-key", default=None)
    a = ap.parse_args()
    try:
        import xllamacpp as x
    except ImportError:
        sys.exit("the xllamacpp package is missing: pip install xllamacpp")
    p = x.CommonParams()
    p.model.path = a.model
    p.hostnames = ["127.0.0.1"]
    p.port = a.port
    p.n_ctx = a.ctx * a.parallel
    p.n_parallel = a.parallel
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.use_jinja = True
    p.warmup = False
    if a.api_key:
        p.api_keys = [a.api_key]
    server = x.Server(p)
    addr = server.listening_address
    if not addr.startswith("http"):
        addr = "http://" + addr
    # Wait until the HTTP listener answers.
    for _ in range(600):
        try:
            urllib.request.urlopen(addr + "/health", timeout=2).read()
            break
        except urllib.error.HTTPError:
            break
        except Exception:
            time.sleep(0.1)
    print("listening " + addr, flush=True)
    try:
        sys.stdin.read()
    except KeyboardInterrupt:
        pass
    del server


if __name__ == "__main__":
    main()
