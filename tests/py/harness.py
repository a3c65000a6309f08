"""Shared pieces of the reference tests: a tally of named checks and a subprocess runner."""
import os
import subprocess


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = []
        self.skipped = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS {name} {detail}", flush=True)
        else:
            self.failed.append(name)
            print(f"FAIL {name} {detail}", flush=True)
        return ok

    def skip(self, name, why):
        self.skipped.append(name)
        print(f"SKIP {name}: {why}", flush=True)


def run(cmd, timeout=120, env=None, input=None):
    """(returncode, stdout, stderr) of cmd, output decoded as UTF-8; env: extra variables;
    input: text for its standard input."""
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       env=full_env, input=None if input is None else input.encode())
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
