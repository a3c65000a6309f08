#!/usr/bin/env python3
"""What the commands do with the files they are given and the files they write.

Checks: an output that is a symlink is written through it (the link stays, its target gets the
bytes); an output FIFO is written in place, not replaced by a regular file; a replaced file keeps
its permissions; an output that is an input (or a file of an input directory) is refused before
any work and the input is left as it was; a directory where a file is expected, an empty output
path and bad seeds and thread counts are clear errors; quantizing notes what fell back to another
type and only warns about lossy requantization; the embedded default model works from a copy of
the executable far from the source tree.
"""
import argparse
import os
import re
import shutil
import stat
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from harness import Results, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    cachet = os.path.abspath(a.cachet)
    wd = os.path.abspath(a.workdir)
    shutil.rmtree(wd, ignore_errors=True)
    os.makedirs(wd)
    R = Results()

    def c(*args, timeout=300):
        return run([cachet] + list(args), timeout=timeout)

    tiny = os.path.join(wd, "tiny.gguf")
    rc, _, err = c("random-model", "recurrentgemma-tiny", "-o", tiny, "--type", "F32", "-t", "2")
    if not R.check("random-model", rc == 0, err):
        return 1
    tiny_bytes = open(tiny, "rb").read()

    # An output symlink: the link stays, its target gets the file, with the target's mode.
    target = os.path.join(wd, "target.gguf")
    with open(target, "wb") as f:
        f.write(b"old")
    os.chmod(target, 0o600)
    link = os.path.join(wd, "link.gguf")
    os.symlink("target.gguf", link)
    rc, _, err = c("quantize", tiny, link, "Q8_0", "-q")
    R.check("symlink output: written", rc == 0, err)
    R.check("symlink output: the link stays a link", os.path.islink(link))
    R.check("symlink output: the target holds the model",
            open(target, "rb").read(4) == b"GGUF", repr(open(target, "rb").read(4)))
    R.check("symlink output: the target keeps mode 0600",
            stat.S_IMODE(os.stat(target).st_mode) == 0o600, oct(os.stat(target).st_mode))
    R.check("no temporary files left", not [n for n in os.listdir(wd) if ".tmp" in n],
            str(os.listdir(wd)))

    # An output FIFO: written in place, and the reader gets the whole file.
    fifo = os.path.join(wd, "out.fifo")
    os.mkfifo(fifo)
    got = {}

    def reader():
        with open(fifo, "rb") as f:
            got["bytes"] = f.read()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    rc, _, err = c("quantize", tiny, fifo, "Q8_0", "-q")
    if rc != 0:  # the reader still waits for a writer: let its open return
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    t.join(timeout=120)
    R.check("fifo output: written", rc == 0, err)
    R.check("fifo output: still a FIFO", stat.S_ISFIFO(os.stat(fifo).st_mode))
    R.check("fifo output: the reader got the model",
            got.get("bytes", b"")[:4] == b"GGUF" and got["bytes"] == open(target, "rb").read(),
            str(len(got.get("bytes", b""))))

    # Outputs that are inputs are refused before any work; the input is unchanged.
    rc, _, err = c("quantize", tiny, tiny, "Q4_K", "-q")
    R.check("quantize onto its input: refused", rc != 0 and "is an input" in err, err)
    R.check("quantize onto its input: input unchanged", open(tiny, "rb").read() == tiny_bytes)
    rc, _, err = c("quantize", tiny, link, "Q4_K", "-q")
    R.check("quantize onto a link to another file: allowed", rc == 0, err)
    os.remove(link)
    os.symlink("tiny.gguf", link)
    rc, _, err = c("quantize", tiny, link, "Q4_K", "-q")
    R.check("quantize onto a link to its input: refused", rc != 0 and "is an input" in err, err)
    R.check("the linked input unchanged", open(tiny, "rb").read() == tiny_bytes)
    os.remove(link)

    hf = os.path.join(wd, "hf")
    os.makedirs(hf)
    rc, _, err = run(["/usr/bin/python3", os.path.join(HERE, "..", "reference", "make_tiny_rg.py"),
                      "--preset", "tiny", "--out", hf], timeout=300)
    if R.check("tiny HF model", rc == 0, err):
        st = os.path.join(hf, "model.safetensors")
        before = open(st, "rb").read()
        rc, _, err = c("convert", hf, "-o", st, "-q")
        R.check("convert onto a file of its input directory: refused",
                rc != 0 and "a file of the input" in err, err)
        R.check("convert: the checkpoint unchanged", open(st, "rb").read() == before)
        rc, _, err = c("convert", st, "-o", os.path.join(hf, "config.json"), "-q")
        R.check("convert onto a file beside its input: refused",
                rc != 0 and "a file of the input" in err, err)
        # A folder reached through a symlink inside the input directory is part of it.
        outside = os.path.join(wd, "outside")
        os.makedirs(outside)
        kept = os.path.join(outside, "kept.json")
        with open(kept, "w") as f:
            f.write("{}")
        os.symlink(outside, os.path.join(hf, "linked"))
        rc, _, err = c("convert", hf, "-o", kept, "-q")
        R.check("convert onto a file in a symlinked folder of its input: refused",
                rc != 0 and "a file of the input" in err and open(kept).read() == "{}", err)
        os.remove(os.path.join(hf, "linked"))
        # Biases stay F32 whatever the matrices become (the RG-LRU gate biases are 2-D).
        q40 = os.path.join(wd, "hf_q40.gguf")
        rc, _, err = c("convert", hf, "-o", q40, "--type", "Q4_0", "-q")
        rc2, out, err2 = c("inspect", q40)
        biases = [l.split() for l in out.splitlines() if l.split() and
                  l.split()[0].endswith("bias")]
        R.check("convert Q4_0: biases stay F32", rc == 0 and rc2 == 0 and biases and
                all(b[1] == "F32" for b in biases), f"{err} {err2} {biases[:3]}")
        # Q4_K needs rows of 256: the tiny model's matrices fall back, and the summary says so
        q4k = os.path.join(wd, "hf_q4k.gguf")
        rc, _, err = c("convert", hf, "-o", q4k, "--type", "Q4_K", "-q")
        R.check("convert Q4_K: fallback named", rc == 0 and re.search(
            r"matrices in Q8_0 \(all \d+: their rows are not whole Q4_K blocks\)", err), err)
        # The file is named after the model's folder, not the path it was converted from
        rc, out, err = c("inspect", q4k)
        R.check("convert: general.name is the folder's name",
                rc == 0 and re.search(r'general\.name\s+string\s+"' +
                                      re.escape(os.path.basename(hf)) + '"', out),
                out[:600])

    # Requantizing warns only when it loses precision, once per source type.
    q4 = os.path.join(wd, "q4.gguf")
    rc, _, err = c("random-model", "recurrentgemma-tiny", "-o", q4, "--type", "Q4_K", "-t", "2")
    rc, _, err = c("quantize", q4, os.path.join(wd, "f32.gguf"), "F32", "-q")
    R.check("quantize Q4_K to F32: no precision note", rc == 0 and "loses precision" not in err,
            err)
    rc, _, err = c("quantize", q4, os.path.join(wd, "q2.gguf"), "Q2_K", "-q")
    R.check("quantize Q4_K to Q2_K: one precision note",
            rc == 0 and err.count("loses precision") == 1, err)

    # Directories and empty paths.
    d = os.path.join(wd, "adir")
    os.makedirs(d)
    rc, _, err = c("quantize", tiny, d, "Q8_0", "-q")
    R.check("output is a directory", rc != 0 and "is a directory" in err, err)
    rc, _, err = c("quantize", tiny, "", "Q8_0", "-q")
    R.check("empty output path", rc != 0 and "output path is empty" in err, err)
    rc, _, err = c("run", "-m", tiny, "--prompt-file", d, "-n", "2")
    R.check("prompt file is a directory", rc != 0 and "is a directory" in err, err)
    rc, _, err = c("perplexity", "-m", tiny, "-f", d)
    R.check("perplexity text is a directory", rc != 0 and "is a directory" in err, err)

    # Seeds: the whole unsigned 64-bit range, and nothing else.
    rc1, out1, _ = c("run", "-p", "To be", "-n", "8", "--seed", "18446744073709551615", "-t", "1")
    rc2, out2, _ = c("run", "-p", "To be", "-n", "8", "--seed", "9223372036854775807", "-t", "1")
    R.check("seeds past 2^63 are their own seeds", rc1 == 0 and rc2 == 0 and out1 != out2,
            f"{out1!r} {out2!r}")
    for bad, needle in (("-5", "whole number"), ("18446744073709551616", "larger than"),
                        ("12x", "whole number")):
        rc, _, err = c("run", "-p", "x", "-n", "1", "--seed", bad)
        R.check(f"--seed {bad}: refused", rc != 0 and needle in err, err)
    rc, _, err = c("random-model", "recurrentgemma-tiny", "-o", os.path.join(wd, "r.gguf"),
                   "--seed", "-5")
    R.check("random-model --seed -5: refused", rc != 0 and "whole number" in err, err)
    for args, needle in ((["--decode-steps", "1"], "--decode-steps"), (["-p", "0"], "-p 0"),
                         (["--long-context", "-5"], "--long-context"),
                         (["--tts-seconds", "nan"], "--tts-seconds")):
        rc, _, err = c("bench", "--random", "recurrentgemma-tiny", "--type", "F32", "-t", "1",
                       *args)
        R.check(f"bench {' '.join(args)}: refused", rc != 0 and needle in err, err)
    # Options that a model of this kind would ignore are refused, not dropped
    rc, _, err = c("bench", "--random", "recurrentgemma-tiny", "--type", "F32", "-t", "1",
                   "--tts-seconds", "2")
    R.check("bench --tts-seconds on a text model: refused",
            rc != 0 and "only MetaVoice" in err, err)
    tiny = os.path.join(wd, "bench_tiny.gguf")
    rc, _, err = c("random-model", "recurrentgemma-tiny", "--type", "F32", "-o", tiny)
    R.check("random-model for bench", rc == 0, err)
    rc, _, err = c("bench", "-m", tiny, "--type", "Q8_0", "-t", "1")
    R.check("bench -m FILE --type: refused", rc != 0 and "--type: applies to --random" in err, err)
    rc, _, err = c("run", "-p", "x", "-n", "1", "-t", "100000")
    R.check("-t 100000: refused", rc != 0 and "at most" in err, err)

    # Threads that cannot all start: a clear error, not an abort.
    if b"__asan_init" in open(cachet, "rb").read():
        R.skip("threads that cannot start", "AddressSanitizer needs more address space")
    else:
        rc, _, err = run(["sh", "-c", "ulimit -s 8192; ulimit -v 3000000; "
                          f"exec '{cachet}' run -t 600 -n 1 -p x"], timeout=120)
        R.check("threads that cannot start", rc == 1 and "cannot start 600 threads" in err, err)

    # The default model is in the executable: a copy elsewhere runs without the source tree.
    lone = os.path.join(wd, "lone")
    os.makedirs(lone)
    shutil.copy(cachet, os.path.join(lone, "cachet"))
    rc, out, err = run([os.path.join(lone, "cachet"), "run", "-p", "ROMEO:", "-n", "12",
                        "--seed", "3", "-t", "1"], timeout=120)
    rc0, out0, _ = c("run", "-p", "ROMEO:", "-n", "12", "--seed", "3", "-t", "1")
    R.check("default model from a copied executable", rc == 0 and out.strip() and out == out0,
            f"{err} {out!r} {out0!r}")

    print(f"test_cli_files: {R.passed} passed, {len(R.failed)} failed")
    return 1 if R.failed else 0


if __name__ == "__main__":
    sys.exit(main())
