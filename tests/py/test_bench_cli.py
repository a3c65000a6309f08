#!/usr/bin/env python3
"""`cachet bench`, `bench kernels` and `bench-codec`: the script-readable lines and their arithmetic.

Timings are never asserted. Checks: every figure line has its documented form; each roofline or
bandwidth share is the printed figure over the printed reference; the reference of a figure is
the higher of the two probes around it; the state and RSS lines are present and the state does
not grow with context; bad presets and types are clear errors.
"""
import argparse
import re
import sys

from harness import Results, run

NUM = r"([0-9]+(?:\.[0-9]+)?)"


def bench_model(cachet, res):
    rc, out, err = run([cachet, "bench", "--random", "recurrentgemma-tiny", "--type", "Q8_0",
                        "-t", "2", "-p", "32", "--long-context", "96", "--decode-steps", "4"],
                       timeout=300)
    if not res.check("bench runs", rc == 0, err.strip()[-300:]):
        return
    lines = out.splitlines()
    res.check("first bandwidth line", any(re.fullmatch(rf"bandwidth: {NUM} GB/s", l) for l in lines))
    res.check("burst line", any(l.startswith("burst bandwidth: ") for l in lines))
    res.check("prefill line", any(re.fullmatch(rf"prefill 32: {NUM} tok/s", l) for l in lines))
    for ctx in (32, 96):
        pat = re.compile(rf"decode after {ctx}: {NUM} tok/s \(([0-9]+)% of roofline, {NUM} tok/s "
                         rf"at {NUM} GB/s\)")
        idx = [i for i, l in enumerate(lines) if pat.fullmatch(l)]
        if not res.check(f"decode after {ctx} line", len(idx) == 1, "" if len(idx) == 1 else out):
            continue
        i = idx[0]
        tps, share, roof, bw = (float(x) for x in pat.fullmatch(lines[i]).groups())
        res.check(f"decode after {ctx} share", abs(share - 100 * tps / roof) <= 1.0 + 0.05 * share,
                  f"{share}% vs {tps}/{roof}")
        probe = re.fullmatch(rf"bandwidth: {NUM} GB/s \(the higher of the probes just before and "
                             rf"after the next figure: {NUM}, {NUM} GB/s\)", lines[i - 1])
        if res.check(f"probes before decode after {ctx}", probe is not None, lines[i - 1]):
            best, before, after = (float(x) for x in probe.groups())
            res.check(f"reference is the higher probe ({ctx})",
                      abs(best - max(before, after)) <= 0.05 and abs(bw - best) <= 0.05,
                      f"{best} {before} {after} {bw}")
        # The spread of the same steps: the median step's rate over the same roofline, the
        # slowest no faster than the median, at a position the steps reached
        spat = re.compile(rf"decode step time after {ctx}: median {NUM} ms \(([0-9]+)% of "
                          rf"roofline\), slowest {NUM} ms \(position ([0-9]+)\)")
        sp = [m for m in (spat.fullmatch(l) for l in lines) if m]
        if res.check(f"decode step time after {ctx} line", len(sp) == 1, out):
            med, mshare, slow, pos = (float(x) for x in sp[0].groups())
            want = 100 * 1e3 / med / roof  # the median printed to 0.01 ms
            res.check(f"median step share ({ctx})",
                      abs(mshare - want) <= 1.0 + want * (0.006 / med + 0.01),
                      f"{mshare}% vs 1000/{med}/{roof}")
            res.check(f"slowest step ({ctx})", slow >= med - 0.01 and pos >= ctx,
                      f"median {med}, slowest {slow} at {pos}")
    # How much slower the long context decodes: the means' shortfall, and the median steps'
    cmp = [re.fullmatch(rf"decode after 96 against after 32: {NUM}% (slower|faster) \(median "
                        rf"steps {NUM}% (slower|faster)\)", l) for l in lines]
    cmp = [m for m in cmp if m]
    mean = [re.fullmatch(rf"decode after {ctx}: {NUM} tok/s .*", l) for ctx in (32, 96)
            for l in lines]
    mean = [float(m.group(1)) for m in mean if m]
    if res.check("decode comparison line", len(cmp) == 1 and len(mean) == 2, out):
        pct = float(cmp[0].group(1)) * (1 if cmp[0].group(2) == "slower" else -1)
        want = 100 * (1 - mean[1] / mean[0])
        res.check("decode comparison arithmetic", abs(pct - want) <= 0.1 + 0.01 * abs(want),
                  f"{pct} vs 100 (1 - {mean[1]} / {mean[0]})")
    rss = [re.fullmatch(rf"RSS after 32: {NUM} GiB, after 96: {NUM} GiB", l) for l in lines]
    res.check("RSS line", any(rss))
    res.check("peak RSS line", any(re.fullmatch(rf"peak RSS: {NUM} GiB", l) for l in lines))
    res.check("state line", any(re.fullmatch(rf"state: {NUM} MiB per sequence", l) for l in lines))
    cpu_line(out, res, "bench")
    # The host's steal while the tokens were timed: where /proc/stat has the column, one line
    # whose share is the stolen CPU-seconds over the CPU-seconds of the timed part.
    steal = [re.fullmatch(rf"host steal: {NUM}% of the CPU time while the tokens were decoded "
                          rf"\({NUM} of {NUM} CPU-seconds\)", l) for l in lines]
    steal = [m for m in steal if m]
    if steal_column():
        if res.check("host steal line", len(steal) == 1, out):
            share, stolen, total = (float(x) for x in steal[0].groups())
            # (steal comes in clock ticks: over a short timed part one tick is a large share,
            # and the printed figures are rounded, so the arithmetic is checked on long parts)
            if total >= 2:
                res.check("host steal share", abs(share - 100 * stolen / total) <=
                          0.05 + 100 * 0.005 / total + share * 0.05 / total,
                          f"{share}% vs {stolen}/{total}")
    else:
        res.check("no host steal line without /proc/stat's column", not steal, out)


def bench_profile(cachet, res):
    """`--profile`: one line per phase of the first decode figure, then the time outside them.

    Each product's line carries its rate; the shares add up to the whole of the timed tokens.
    """
    rc, out, err = run([cachet, "bench", "--random", "recurrentgemma-tiny", "--type", "Q8_0",
                        "-t", "2", "-p", "16", "--long-context", "0", "--decode-steps", "6",
                        "--profile"], timeout=300)
    if not res.check("bench --profile runs", rc == 0, err.strip()[-300:]):
        return
    pat = re.compile(rf"profile: (.+): {NUM} ms per token \({NUM}%\)(?:, {NUM} GB/s)?")
    rows = [pat.fullmatch(l) for l in out.splitlines() if l.startswith("profile: ")]
    if not res.check("profile lines have their form", rows and all(rows), out):
        return
    names = [m.group(1) for m in rows]
    rates = {m.group(1): m.group(4) for m in rows}
    res.check("profile ends with the time outside the phases",
              names[-1] == "outside the phases" and names.count("outside the phases") == 1, out)
    for phase in ("output head", "mlp gate, up", "mlp down", "linear_x, linear_y", "linear_out",
                  "rg_lru gates"):
        res.check(f"profile has '{phase}' with its rate", rates.get(phase) is not None, out)
    for phase in ("conv1d", "rg_lru scan", "local attention", "outside the phases"):
        res.check(f"profile has '{phase}' without a rate", phase in rates and rates[phase] is None,
                  out)
    share = sum(float(m.group(3)) for m in rows)
    res.check("profile shares add up to the whole", 98.5 <= share <= 101.5, f"{share}%")
    times = [float(m.group(2)) for m in rows[:-1]]
    res.check("profile phases slowest first", times == sorted(times, reverse=True), out)


def cpu_line(out, res, what):
    """The host the figures were taken on: `cpu: NAME: FEATURES`, NAME as /proc/cpuinfo has it
    (where it has one) and AMX named exactly where the kernel lists its tile flags."""
    found = [re.fullmatch(r"cpu: (.+): (AVX-512(?: with VNNI(?: and BF16)?)?|AVX2|no AVX2)"
                          r"(, AMX)?", l) for l in out.splitlines() if l.startswith("cpu: ")]
    if not res.check(f"{what}: one cpu line", len(found) == 1 and found[0] is not None, out):
        return
    name, _, amx = found[0].groups()
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if ":" in l:
                    k, v = (x.strip() for x in l.split(":", 1))
                    info.setdefault(k, v)
    except OSError:
        return
    if "model name" in info:
        res.check(f"{what}: cpu name is /proc/cpuinfo's", name == " ".join(info["model name"].split()),
                  f"{name!r} vs {info['model name']!r}")
    if "flags" in info:
        flags = info["flags"].split()
        res.check(f"{what}: AMX named where the CPU has it",
                  bool(amx) == ("amx_tile" in flags and "amx_bf16" in flags), f"{amx} {flags}")


def steal_column():
    try:
        with open("/proc/stat") as f:
            first = f.readline().split()
        return first[0] == "cpu" and len(first) >= 9
    except OSError:
        return False


def bench_kernels(cachet, res):
    rc, out, err = run([cachet, "bench", "kernels", "--quick", "-t", "2", "--types", "Q8_0"],
                       timeout=600, env={"CACHET_STREAM_LOG": "1"})
    if not res.check("bench kernels runs", rc == 0, err.strip()[-300:]):
        return
    lines = out.splitlines()
    res.check("kernels bandwidth line",
              any(re.fullmatch(rf"bandwidth: {NUM} GB/s", l) for l in lines))
    for shape in ("2560x7680", "7680x2560", "4096x14336"):
        pat = re.compile(rf"matvec Q8_0 {shape}: {NUM} GB/s \(([0-9]+)% of bandwidth, {NUM} GB/s "
                         r"around it\)")
        m = [pat.fullmatch(l) for l in lines if pat.fullmatch(l)]
        if res.check(f"matvec {shape} line", len(m) == 1, "" if len(m) == 1 else out):
            gbs, share, ref = (float(x) for x in m[0].groups())
            res.check(f"matvec {shape} share", abs(share - 100 * gbs / ref) <= 1.0 + 0.05 * share,
                      f"{share}% vs {gbs}/{ref}")
    ok = any(re.fullmatch(rf"matmul Q8_0 4096x14336 N=512: {NUM} GFLOP/s", l) for l in lines)
    res.check("matmul line", ok, "" if ok else out)
    ok = any(re.fullmatch(r"matmul path: (f32 FMA|bf16 dot products|AMX bf16 tiles)", l)
             for l in lines)
    res.check("matmul path line", ok, "" if ok else out)
    cpu_line(out, res, "bench kernels")
    if lines and lines[0].endswith("isa: avx512"):  # the interleaved layouts: a stream way
        ways = (r"(1 group|1 group \+ prefetch|2 groups|2 groups \+ prefetch|4 groups|"
                r"1 group \+ far prefetch|2 groups \+ far prefetch|"
                r"2 groups \+ near prefetch)")
        ok = any(re.fullmatch(rf"stream Q8_0: {ways} \((the fastest measured|not measured)\)",
                              l) for l in lines)
        res.check("stream way line", ok, "" if ok else out)
        # CACHET_STREAM_LOG=1: each measured choice with every way's median; the way kept is
        # the one with the highest median (Q8_0 has six distinct ways for one row)
        log = re.compile(r"stream ways Q8_0, 1 row:((?: [0-9a-z]+ [0-9]+\.[0-9]+,?)+) GB/s "
                         r"\(median per product\); keeps ([0-9a-z]+)")
        found = [log.fullmatch(l) for l in err.splitlines() if log.fullmatch(l)]
        if res.check("stream ways log line", len(found) >= 1, err[-500:]):
            for m in found:
                rates = {k: float(v) for k, v in
                         (w.split() for w in m.group(1).strip().split(","))}
                res.check("stream ways log keeps the fastest",
                          len(rates) >= 2 and rates.get(m.group(2)) == max(rates.values()),
                          m.group(0))


def bench_kernels_rows(cachet, res):
    """--rows 2: products of two activation rows, labelled as such."""
    rc, out, err = run([cachet, "bench", "kernels", "--quick", "-t", "2", "--types", "Q8_0",
                        "--rows", "2"], timeout=600)
    if not res.check("bench kernels --rows 2 runs", rc == 0, err.strip()[-300:]):
        return
    pat = re.compile(rf"matvec Q8_0 4096x14336 \(2 rows\): {NUM} GB/s \([0-9]+% of bandwidth, "
                     rf"{NUM} GB/s around it\)")
    ok = any(pat.fullmatch(l) for l in out.splitlines())
    res.check("matvec line of two rows", ok, "" if ok else out)
    rc, _, err = run([cachet, "bench", "kernels", "--quick", "--types", "Q8_0", "--rows", "5"])
    res.check("--rows 5 is an error", rc != 0 and "--rows 5" in err, err.strip())


def bench_kernels_shapes(cachet, res):
    """--shapes: one matvec line per shape asked for, in order, and no matmul lines."""
    rc, out, err = run([cachet, "bench", "kernels", "--quick", "-t", "2", "--types", "Q8_0",
                        "--shapes", "512x256,96x512"], timeout=600)
    if not res.check("bench kernels --shapes runs", rc == 0, err.strip()[-300:]):
        return
    got = [l.split(":")[0] for l in out.splitlines() if l.startswith("matvec ")]
    res.check("one matvec line per shape, in order",
              got == ["matvec Q8_0 512x256", "matvec Q8_0 96x512"], out)
    res.check("no matmul figures with --shapes",
              not any(l.startswith("matmul Q8_0") for l in out.splitlines()), out)
    for bad, says in (("512x100", "whole blocks of 32"), ("512", "not ROWSxCOLS"),
                      ("0x256", "not ROWSxCOLS"), ("70000x70000x2", "not ROWSxCOLS"),
                      ("100000x100000000", "more than"), ("65536x65536", "more than 4 GiB")):
        rc, _, err = run([cachet, "bench", "kernels", "--quick", "--types", "Q8_0", "--shapes",
                          bad])
        res.check(f"--shapes {bad} is an error", rc != 0 and bad in err and says in err,
                  err.strip())


def bench_codec(cachet, res):
    """`bench-codec`: the first decode of the process, then the best of the repetitions."""
    rc, out, err = run([cachet, "bench-codec", "--random", "--seconds", "1", "--reps", "2",
                        "-t", "2"], timeout=300)
    if not res.check("bench-codec runs", rc == 0, err.strip()[-300:]):
        return
    lines = out.splitlines()
    for i, what in enumerate(("encodec first decode", "encodec decode")):
        pat = rf"{what}: {NUM} s of audio in {NUM} s \({NUM}x real time\)"
        m = re.fullmatch(pat, lines[i]) if i < len(lines) else None
        if not res.check(f"{what} line", m is not None, out):
            continue
        audio, secs, rtf = (float(x) for x in m.groups())
        res.check(f"{what}: one second of audio", abs(audio - 1.0) < 0.05, lines[i])
        # The factor is printed from unrounded times: within the rounding of the seconds.
        lo, hi = audio / (secs + 0.005), audio / max(secs - 0.005, 1e-9)
        res.check(f"{what}: factor is audio over seconds", lo - 0.5 <= rtf <= hi + 0.5, lines[i])
    rc, _, err = run([cachet, "bench-codec", "--random", "--reps", "0"])
    res.check("bench-codec --reps 0 is an error", rc != 0 and "--reps" in err, err.strip())


def bad_input(cachet, res):
    rc, _, err = run([cachet, "bench", "--random", "no-such-preset", "--type", "Q8_0"])
    res.check("unknown preset is an error", rc != 0 and "no-such-preset" in err, err.strip())
    rc, _, err = run([cachet, "bench", "kernels", "--types", "Q9_9"])
    res.check("unknown type is an error", rc != 0 and "Q9_9" in err, err.strip())
    rc, out, err = run([cachet, "bench", "kernels", "--quick", "--types", "Q8_0"], timeout=300,
                       env={"CACHET_STREAM": "3q"})
    if out.startswith("threads:") and "isa: avx512" in out.splitlines()[0]:
        res.check("bad CACHET_STREAM is an error",
                  rc != 0 and "CACHET_STREAM='3q'" in err and "expected" in err, err.strip())
        rc, out, err = run([cachet, "bench", "kernels", "--quick", "--types", "Q8_0"],
                           timeout=300, env={"CACHET_MATMUL": "fp8"})
        res.check("bad CACHET_MATMUL is an error",
                  rc != 0 and "CACHET_MATMUL='fp8'" in err and "expected" in err, err.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    res = Results()
    bad_input(a.cachet, res)
    bench_model(a.cachet, res)
    bench_profile(a.cachet, res)
    bench_kernels(a.cachet, res)
    bench_kernels_rows(a.cachet, res)
    bench_kernels_shapes(a.cachet, res)
    bench_codec(a.cachet, res)
    print(f"{res.passed} passed, {len(res.failed)} failed: {res.failed}")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
