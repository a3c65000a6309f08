#!/usr/bin/env python3
"""`cachet serve` driven by real clients: the official `openai` npm package and headless Chromium.

Starts the server on the embedded default model on a free port and runs the node scripts of
tests/server (installed by scripts/setup-server-tests.sh):
  api.test.mjs   completions, streaming chat, usage and cached_tokens on a repeated system
                 prompt and on a continued conversation, batched == alone, stop strings,
                 401 / 400 / 404 / 413 error objects, a disconnecting client freeing its slot,
                 /metrics in Prometheus text format;
  load.mjs       16 concurrent streaming clients x 20 requests each: zero errors; the server's
                 resident memory (VmRSS) stays bounded (a second identical run adds little);
  web.mjs        the page at / in headless Chromium: a chat message gets a streamed answer.
Then, on a second server with one slot and no queue: a request while the slot is busy gets 503
with Retry-After; SIGTERM during a stream ends it cleanly (final chunk and [DONE]) and the
process exits 0. Speech runs when tests/reference/make_tiny_metavoice.py can build a tiny
METAVOICE_DIR (otherwise it prints a note): a third server with --tts answers speech.test.mjs
(/v1/audio/speech through the openai client: WAV and PCM, same seed same samples, 400s) and
web.mjs speaks through the page.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
NODE_DIR = os.path.join(ROOT, "tests", "server")
FAILURES = []
KEY = "test-key-123"


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


class Server:
    def __init__(self, cachet, args, log_path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([cachet, "serve", "--port", "0", "--host", "127.0.0.1"] + args,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.port = None
        line_box = []

        def read_first():
            line_box.append(self.proc.stdout.readline())

        t = threading.Thread(target=read_first, daemon=True)
        t.start()
        t.join(60)
        line = line_box[0] if line_box else ""
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"the server did not start (stdout: {line!r}); see {log_path}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def node(script, env_extra, timeout, args=()):
    env = dict(os.environ)
    env.update(env_extra)
    cmd = ["node"] + list(args) + [script]
    try:
        r = subprocess.run(cmd, cwd=NODE_DIR, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or "") if isinstance(e.stdout, str) else "", "timed out"
    return r.returncode, r.stdout, r.stderr


def summarize_node_test(out):
    lines = [l for l in out.splitlines() if re.match(r"^(not ok|# (pass|fail|tests))", l)]
    return "\n".join("  " + l for l in lines)


def metric(server, name):
    status, _, data = server.request("GET", "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    total = 0.0
    for line in data.decode().splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if m and m.group(1) == name:
            total += float(m.group(3))
    return total


def main_server_tests(cachet, wd):
    s = Server(cachet, ["-t", "1", "--parallel", "4", "--queue", "32", "--api-key", KEY,
                        "--cache-mb", "32", "--quiet"], os.path.join(wd, "server-a.log"))
    env = {"CACHET_URL": s.url, "CACHET_API_KEY": KEY, "CACHET_MODEL": "default"}
    try:
        rc, out, err = node("api.test.mjs", env, 300, ["--test", "--test-reporter=tap"])
        print("api.test.mjs:\n" + summarize_node_test(out), flush=True)
        if not check(rc == 0, f"api.test.mjs failed (rc {rc})"):
            print(out[-6000:], err[-3000:])

        rss0 = s.rss_kb()
        rc, out, err = node("load.mjs", env, 300)
        rss1 = s.rss_kb()
        print(f"load 1: {out.strip()}  VmRSS {rss0} -> {rss1} kB", flush=True)
        check(rc == 0, f"load test 1 failed (rc {rc}): {out[-2000:]} {err[-2000:]}")
        rc, out, err = node("load.mjs", env, 300)
        rss2 = s.rss_kb()
        print(f"load 2: {out.strip()}  VmRSS {rss1} -> {rss2} kB", flush=True)
        check(rc == 0, f"load test 2 failed (rc {rc}): {out[-2000:]} {err[-2000:]}")
        # 32 MiB of prefix cache plus allocator and thread overhead; a second run reuses it all.
        check(rss1 - rss0 < 128 * 1024, f"VmRSS grew by {rss1 - rss0} kB in the first load run")
        check(rss2 - rss1 < 24 * 1024, f"VmRSS grew by {rss2 - rss1} kB in the second load run")
        check(metric(s, "cachet_queue_depth") == 0, "requests left in the queue after the load")
        check(metric(s, "cachet_active_requests") == 0, "slots still held after the load")
        check(metric(s, "cachet_prefix_cache_bytes") <= 32 * 1024 * 1024,
              "the prefix cache exceeds its budget")

        if os.path.exists("/usr/bin/chromium"):
            rc, out, err = node("web.mjs", env, 120)
            print(f"web.mjs: {out.strip()[-500:]}", flush=True)
            check(rc == 0, f"web page test failed (rc {rc}): {out[-2000:]} {err[-2000:]}")
        else:
            print("NOTE: /usr/bin/chromium not found: web page test skipped")
    finally:
        rc = s.stop()
        check(rc == 0, f"server A exited with {rc}")


def busy_and_shutdown_tests(cachet, wd):
    s = Server(cachet, ["-t", "1", "--parallel", "1", "--queue", "0", "--shutdown-grace", "0.5",
                        "--quiet"], os.path.join(wd, "server-b.log"))
    stream_box = {}
    first_chunk = threading.Event()

    def stream():
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        c.request("POST", "/v1/completions",
                  body=json.dumps({"prompt": "Once", "max_tokens": 4000, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        stream_box["status"] = r.status
        data = b""
        while True:
            chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not chunk:
                break
            data += chunk
            first_chunk.set()
        stream_box["data"] = data.decode("utf-8", "replace")
        first_chunk.set()

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    try:
        check(first_chunk.wait(60), "the long stream produced nothing")
        status, headers, body = s.request(
            "POST", "/v1/completions", json.dumps({"prompt": "Twice", "max_tokens": 4}))
        check(status == 503, f"a request while the only slot is busy got {status}, not 503")
        check("Retry-After" in headers, "the 503 answer has no Retry-After header")
        try:
            err = json.loads(body)["error"]
            check(set(err) >= {"message", "type", "param", "code"}, f"503 error object {err}")
        except (ValueError, KeyError):
            check(False, f"the 503 answer is not an error object: {body[:200]!r}")
        print(f"busy server: {status}, Retry-After {headers.get('Retry-After')}", flush=True)
    finally:
        t0 = time.time()
        rc = s.stop(timeout=60)
        t.join(30)
    data = stream_box.get("data", "")
    events = [e for e in data.split("\n\n") if e.strip()]
    check(rc == 0, f"SIGTERM: the server exited with {rc}")
    check(len(events) >= 2 and events[-1].strip() == "data: [DONE]",
          f"SIGTERM: the stream in flight did not end with [DONE]: {data[-300:]!r}")
    if len(events) >= 2:
        try:
            last = json.loads(events[-2][len("data: "):])
            check(last["choices"][0]["finish_reason"] in ("length", "stop"),
                  f"SIGTERM: last chunk {last}")
        except (ValueError, KeyError, IndexError):
            check(False, f"SIGTERM: bad last chunk {events[-2][:300]!r}")
    print(f"SIGTERM: stream ended with {len(events)} events, exit {rc} after "
          f"{time.time() - t0:.1f} s", flush=True)


def hostile_request_tests(cachet, wd):
    """Bodies past --max-body-kb however they are sent, numbers past a double, megabytes where a
    word belongs, and a prompt far past the context: each a 4xx error object, and the server
    answers normally afterwards."""
    import gzip
    s = Server(cachet, ["-t", "1", "--parallel", "1", "--max-body-kb", "64", "--ctx", "64",
                        "--quiet"], os.path.join(wd, "server-hostile.log"))

    def error_of(status, data, want_status, want_code, what):
        try:
            e = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            check(False, f"{what}: not an error object: {data[:200]!r}")
            return None
        check(status == want_status and e.get("code") == want_code,
              f"{what}: got {status} {e}, want {want_status} {want_code}")
        return e

    try:
        big = json.dumps({"prompt": "a" * (200 << 10), "max_tokens": 1}).encode()
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        c.request("POST", "/v1/completions", body=iter([big[i:i + 8192]
                                                       for i in range(0, len(big), 8192)]),
                  headers={"Content-Type": "application/json"}, encode_chunked=True)
        r = c.getresponse()
        error_of(r.status, r.read(), 411, "length_required", "a chunked body")
        c.close()
        # ... refused before it is read: 32 MiB chunked leave the server's memory as it was
        rss0 = s.rss_kb()
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        chunk = b"a" * (1 << 20)
        try:
            c.request("POST", "/v1/completions", body=iter([chunk] * 32),
                      headers={"Content-Type": "application/json"}, encode_chunked=True)
            r = c.getresponse()
            error_of(r.status, r.read(), 411, "length_required", "a 32 MiB chunked body")
        except OSError:
            pass  # the server may answer and close before all of it is sent
        c.close()
        check(s.rss_kb() - rss0 < 16 * 1024, f"a 32 MiB chunked body grew the server by "
              f"{s.rss_kb() - rss0} kB")
        status, _, data = s.request("POST", "/v1/completions", gzip.compress(big),
                                    {"Content-Encoding": "gzip"})
        error_of(status, data, 415, "unsupported_encoding", "a gzip body")
        status, _, data = s.request("POST", "/v1/completions",
                                    b'{"prompt": "hi", "max_tokens": 1, "foo": -1e400}')
        error_of(status, data, 400, "invalid_json", "a number past a double")
        status, _, data = s.request("POST", "/v1/chat/completions", json.dumps(
            {"messages": [{"role": "x" * 50000, "content": "hi"}]}).encode())
        e = error_of(status, data, 400, "unsupported_value", "a 50 kB role")
        check(e is not None and len(e.get("message", "")) < 300,
              f"the error quotes the whole role back: {len(data)} bytes")
        status, _, data = s.request("POST", "/v1/completions", json.dumps(
            {"prompt": "to be or not " * 4000, "max_tokens": 1}).encode())
        e = error_of(status, data, 400, "context_length_exceeded", "a prompt far past --ctx")
        check(e is not None and "bytes of text" in e.get("message", ""),
              f"a prompt far past --ctx was tokenized: {e}")
        status, headers, data = s.request("GET", "/v1/chat/completions")
        check(status == 405 and headers.get("Allow") == "POST",
              f"GET on a POST path: {status} {headers} {data[:200]!r}")
        # Connections that send half a request and wait do not lock other clients out.
        import socket
        idle = []
        for _ in range(120):
            sk = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            sk.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            idle.append(sk)
        try:
            status, _, _ = s.request("GET", "/health", timeout=30)
            check(status == 200, f"/health beside 120 idle connections: {status}")
        except OSError as e:
            check(False, f"/health beside 120 idle connections: {e}")
        for sk in idle:
            sk.close()
        status, _, data = s.request("POST", "/v1/completions", json.dumps(
            {"prompt": "To be", "max_tokens": 4}).encode())
        check(status == 200 and json.loads(data)["choices"][0]["text"] is not None,
              f"a normal request after the hostile ones: {status} {data[:200]!r}")
    finally:
        s.stop()


def speech_tests(cachet, wd):
    maker = os.path.join(ROOT, "tests", "reference", "make_tiny_metavoice.py")
    if not os.path.exists(maker):
        print("NOTE: tests/reference/make_tiny_metavoice.py is not there: speech test skipped")
        return
    mv_dir = os.path.join(wd, "tiny_metavoice")
    r = subprocess.run(["/usr/bin/python3", maker, "--out", mv_dir], capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        print(f"NOTE: make_tiny_metavoice.py failed ({r.stderr.strip()[-300:]}): speech test "
              "skipped")
        return
    log = os.path.join(wd, "server-c.log")
    try:
        s = Server(cachet, ["-t", "1", "--tts", mv_dir, "--quiet", "--api-key", KEY], log)
    except RuntimeError as e:
        with open(log) as f:
            text = f.read()
        if "not available in this build" in text:
            print("NOTE: this build has no MetaVoice: speech test skipped")
            return
        check(False, f"server with --tts did not start: {e}: {text[-1000:]}")
        return
    try:
        env = {"CACHET_URL": s.url, "CACHET_API_KEY": KEY, "CACHET_MODEL": "default"}
        rc, out, err = node("speech.test.mjs", env, 600, ["--test", "--test-reporter=tap"])
        print("speech.test.mjs:\n" + summarize_node_test(out), flush=True)
        if not check(rc == 0, f"speech.test.mjs failed (rc {rc})"):
            print(out[-4000:], err[-2000:])
        if os.path.exists("/usr/bin/chromium"):
            rc, out, err = node("web.mjs", env, 300)
            print(f"web.mjs with speech: {out.strip()[-500:]}", flush=True)
            check(rc == 0, f"web page speech test failed (rc {rc}): {out[-2000:]} {err[-2000:]}")
        auth = {"Authorization": f"Bearer {KEY}"}

        def speech(body):
            status, _, data = s.request("POST", "/v1/audio/speech", json.dumps(body).encode(), auth)
            try:
                return status, json.loads(data).get("error", {})
            except ValueError:
                return status, {}

        status, e = speech({"input": "hi", "seed": -5})
        check(status == 400 and e.get("param") == "seed", f"speech seed -5: {status} {e}")
        status, _ = speech({"input": "hi", "seed": -1})
        check(status == 200, f"speech seed -1 (random): {status}")
        status, _ = speech({"input": "hi", "seed": 18446744073709551615})
        check(status == 200, f"speech seed 2^64 - 1: {status}")
        status, e = speech({"input": "hi", "voice": "alloy\u0000../../etc/passwd"})
        check(status == 400 and "passwd" in e.get("message", ""),
              f"an error message stops at a NUL: {e}")
        status, e = speech({"input": "hi", "instructions": "Speak like a pirate."})
        check(status == 400 and e.get("param") == "instructions", f"speech instructions: {e}")
        status, e = speech({"input": "hi", "stream_format": "sse"})
        check(status == 400 and e.get("param") == "stream_format", f"speech sse: {e}")
        status, _ = speech({"input": "hi", "instructions": "", "stream_format": "audio"})
        check(status == 200, f"speech with empty instructions and audio streaming: {status}")
        # The input limit (2000) counts characters, not bytes
        status, e = speech({"input": "€" * 2001})
        check(status == 400 and "2001 characters" in e.get("message", ""),
              f"speech input of 2001 characters: {status} {e}")
        status, _, data = s.request("POST", "/v1/completions", json.dumps(
            {"prompt": "To be", "max_tokens": 2, "seed": 18446744073709551615}).encode(), auth)
        check(status == 200, f"completion seed 2^64 - 1: {status} {data[:200]!r}")
    finally:
        s.stop()
    # A speech request past --timeout: 504 'timeout', counted as a timeout.
    s = Server(cachet, ["-t", "1", "--tts", mv_dir, "--quiet", "--timeout", "0.001"],
               os.path.join(wd, "server-d.log"))
    try:
        status, _, data = s.request("POST", "/v1/audio/speech",
                                    json.dumps({"input": "Hello there, a timeout."}).encode())
        err = json.loads(data).get("error", {}) if data.startswith(b"{") else {}
        check(status == 504 and err.get("code") == "timeout", f"speech timeout: {status} {err}")
        check(metric(s, "cachet_timeouts_total") == 1, "the speech timeout is not counted")
    finally:
        s.stop()


def cors_tests(cachet, wd):
    """--cors ORIGIN: preflights answered before authentication, every answer names the origin;
    without it, neither."""
    origin = "https://app.example"
    s = Server(cachet, ["-t", "1", "--parallel", "1", "--api-key", KEY, "--cors", origin,
                        "--quiet"], os.path.join(wd, "server-cors.log"))
    try:
        st, h, _ = s.request("OPTIONS", "/v1/chat/completions",
                             headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                      "Access-Control-Request-Headers": "authorization"})
        check(st == 204 and h.get("Access-Control-Allow-Origin") == origin
              and "POST" in h.get("Access-Control-Allow-Methods", "")
              and "Authorization" in h.get("Access-Control-Allow-Headers", ""),
              f"--cors: preflight answered {st} {h}")
        st, h, body = s.request("POST", "/v1/completions",
                                json.dumps({"prompt": "ROMEO:", "max_tokens": 2}),
                                headers={"Authorization": f"Bearer {KEY}", "Origin": origin})
        check(st == 200 and h.get("Access-Control-Allow-Origin") == origin,
              f"--cors: completion answered {st} {h}")
        st, h, _ = s.request("GET", "/v1/models", headers={"Origin": origin})
        check(st == 401 and h.get("Access-Control-Allow-Origin") == origin,
              f"--cors: an error still names the origin: {st} {h}")
    finally:
        check(s.stop() == 0, "the --cors server did not exit cleanly")
    s = Server(cachet, ["-t", "1", "--parallel", "1", "--quiet"],
               os.path.join(wd, "server-nocors.log"))
    try:
        st, h, _ = s.request("OPTIONS", "/v1/chat/completions",
                             headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
        check(st != 204 and "Access-Control-Allow-Origin" not in h,
              f"without --cors: preflight answered {st} {h}")
        st, h, _ = s.request("GET", "/v1/models", headers={"Origin": origin})
        check(st == 200 and "Access-Control-Allow-Origin" not in h,
              f"without --cors: no CORS header: {st} {h}")
    finally:
        check(s.stop() == 0, "the server without --cors did not exit cleanly")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    if shutil.which("node") is None:
        print("FAIL: node is not installed (scripts/setup.sh installs it)")
        return 1
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "openai")):
        print("FAIL: tests/server/node_modules is missing: run scripts/setup-server-tests.sh")
        return 1
    t0 = time.time()
    main_server_tests(a.cachet, a.workdir)
    busy_and_shutdown_tests(a.cachet, a.workdir)
    hostile_request_tests(a.cachet, a.workdir)
    cors_tests(a.cachet, a.workdir)
    speech_tests(a.cachet, a.workdir)
    print(f"test_server: {len(FAILURES)} failure(s) in {time.time() - t0:.0f} s")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
