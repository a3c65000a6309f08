#!/usr/bin/env python3
"""`cachet run`, `perplexity` and `chat` on a tiny random RecurrentGemma with a trained
SentencePiece tokenizer, against the PyTorch reference (tests/reference/recurrent_gemma.py).

Checks: greedy `run` prints exactly the text of the reference's greedy tokens (model directory
and converted GGUF); `perplexity` equals exp(mean NLL) of the reference logits; a two-turn
greedy `chat` equals the reference continuing one token sequence in the Gemma chat format
(earlier turns stay in the state); stop strings cut the text before the stop string; the same
seed gives the same text; bad parameters and inputs give clear errors.
"""
import argparse
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402

import make_tiny_rg  # noqa: E402
from recurrent_gemma import RecurrentGemma  # noqa: E402

FAILURES = []
VOCAB = 512


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg)
    return bool(cond)


def run(cachet, args, stdin=None):
    r = subprocess.run([cachet] + args, input=stdin, capture_output=True, timeout=600)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def write_corpus(path):
    import random
    rng = random.Random(5)
    words = ("the quick brown fox jumps over the lazy dog while a recurrent model reads "
             "tokens state language hello world user model answer question").split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(3000)]
    lines += ["<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\nhi<end_of_turn>"] * 50
    lines += ["caf\u00e9 na\u00efve \u65e5\u672c 12345"] * 20
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def train_tokenizer(wd):
    corpus = os.path.join(wd, "corpus.txt")
    write_corpus(corpus)
    prefix = os.path.join(wd, "tok")
    args = ["spm_train", f"--input={corpus}", f"--model_prefix={prefix}",
            f"--vocab_size={VOCAB}", "--byte_fallback=true", "--model_type=bpe",
            "--normalization_rule_name=identity", "--add_dummy_prefix=false",
            "--remove_extra_whitespaces=false", "--character_coverage=0.99",
            "--user_defined_symbols=<start_of_turn>,<end_of_turn>",
            "--pad_id=0", "--eos_id=1", "--bos_id=2", "--unk_id=3", "--pad_piece=<pad>",
            "--eos_piece=<eos>", "--bos_piece=<bos>", "--unk_piece=<unk>", "--num_threads=1",
            "--minloglevel=2"]
    r = subprocess.run(args, capture_output=True, timeout=300)
    if r.returncode != 0:
        print(r.stderr.decode()[-2000:])
        sys.exit("spm_train failed")
    return prefix + ".model"


class Reference:
    def __init__(self, model_dir, sp):
        self.m = RecurrentGemma.load(model_dir, torch.float64)
        self.sp = sp
        self.stops = {sp.eos_id(), sp.piece_to_id("<end_of_turn>")}

    def greedy(self, tokens, n):
        """Greedy continuation; returns (generated tokens, stopped_on_stop_token)."""
        seq = list(tokens)
        out = []
        for _ in range(n):
            lg = self.m.logits(seq)[-1]
            top2 = torch.topk(lg, 2).values
            if float(top2[0] - top2[1]) < 1e-4:
                print("note: near tie in greedy reference, comparing up to here")
                return out, None
            t = int(torch.argmax(lg))
            if t in self.stops:
                return out, True
            out.append(t)
            seq.append(t)
        return out, False

    def nll(self, tokens):
        lg = self.m.logits(tokens)
        lp = torch.log_softmax(lg, dim=-1)
        return -sum(float(lp[i, tokens[i + 1]]) for i in range(len(tokens) - 1)) / (
            len(tokens) - 1)


def chat_turn(sp, msg, first):
    sot, eot = sp.piece_to_id("<start_of_turn>"), sp.piece_to_id("<end_of_turn>")
    ids = [sp.bos_id()] if first else [eot] + sp.encode("\n")
    ids += [sot] + sp.encode("user\n" + msg) + [eot] + sp.encode("\n") + [sot] + sp.encode(
        "model\n")
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    cachet, wd = args.cachet, args.workdir
    os.makedirs(wd, exist_ok=True)

    model_dir = os.path.join(wd, "tiny")
    cfg = make_tiny_rg.make_config("tiny", vocab_size=VOCAB)
    w = make_tiny_rg.init_weights(cfg, seed=3)
    # A separate output head: with tied embeddings a random model mostly repeats its input.
    gen = torch.Generator().manual_seed(1003)
    w["lm_head.weight"] = torch.randn(w["model.embed_tokens.weight"].shape, generator=gen) * (
        2.0 / math.sqrt(cfg["hidden_size"]))
    cfg["tie_word_embeddings"] = False
    make_tiny_rg.write_model(model_dir, cfg, w)
    tok_model = train_tokenizer(wd)
    shutil.copy(tok_model, os.path.join(model_dir, "tokenizer.model"))
    sp = spm.SentencePieceProcessor(model_file=tok_model)
    ref = Reference(model_dir, sp)
    common = ["-t", "1"]

    # GGUF made by convert carries the tokenizer.
    gguf = os.path.join(wd, "tiny.gguf")
    rc, _, err = run(cachet, ["convert", model_dir, "-o", gguf, "-q"])
    check(rc == 0, f"convert failed: {err}")
    models = [model_dir] + ([gguf] if rc == 0 else [])
    # A GGUF file without a tokenizer of its own (as candle's RecurrentGemma files are) and a
    # lone .safetensors file take the tokenizer.model beside them
    bare_src, bare_dir = os.path.join(wd, "bare_src"), os.path.join(wd, "bare")
    for d in (bare_src, bare_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    for f in os.listdir(model_dir):
        if f != "tokenizer.model":
            shutil.copy(os.path.join(model_dir, f), bare_src)
    bare = os.path.join(bare_dir, "model.gguf")
    rc, _, err = run(cachet, ["convert", bare_src, "-o", bare, "-q"])
    check(rc == 0, f"convert without a tokenizer failed: {err}")
    rc, _, err = run(cachet, ["run", "-m", bare, "-p", "x", "-n", "1"])
    check(rc != 0 and "tokenizer.model" in err and "beside" in err,
          f"a GGUF without a tokenizer, none beside it: rc {rc} {err!r}")
    shutil.copy(tok_model, os.path.join(bare_dir, "tokenizer.model"))
    models += [bare, os.path.join(model_dir, "model.safetensors")]

    # 1. Greedy run == reference greedy.
    prompts = ["hello world", "the quick brown fox", "caf\u00e9 \u65e5\u672c"]
    n = 16
    distinct = 0
    for prompt in prompts:
        toks = [sp.bos_id()] + sp.encode(prompt)
        want_ids, _ = ref.greedy(toks, n)
        distinct = max(distinct, len(set(want_ids)))
        want = sp.decode(want_ids)
        for m in models:
            rc, out, err = run(cachet, ["run", "-m", m, "-p", prompt, "-n", str(n), "--temp", "0"]
                               + common)
            check(rc == 0, f"run {m} {prompt!r} failed: {err}")
            if len(want_ids) == n:
                check(out == want, f"run {m} {prompt!r}: got {out!r} want {want!r}")
            else:
                check(out.startswith(want), f"run {m} {prompt!r}: got {out!r} want {want!r}...")
            check(re.search(r"prompt: \d+ tokens, [\d.]+ tok/s; generation: \d+ tokens, "
                            r"[\d.]+ tok/s", err), f"run stats line missing: {err!r}")
    check(distinct >= 4, f"the test model's greedy output is degenerate ({distinct} tokens)")
    print("run: greedy checked")
    # A prompt from standard input, and from a file, less the newline that ends its last line
    want = run(cachet, ["run", "-m", model_dir, "-p", "hello world", "-n", "6", "--temp", "0"]
               + common)[1]
    rc, out, err = run(cachet, ["run", "-m", model_dir, "--prompt-file", "-", "-n", "6", "--temp",
                                "0"] + common, stdin=b"hello world\n")
    check(rc == 0 and out == want, f"--prompt-file -: got {out!r} want {want!r} {err}")
    pf = os.path.join(wd, "prompt.txt")
    with open(pf, "w") as f:
        f.write("hello world\n")
    rc, out, err = run(cachet, ["run", "-m", model_dir, "--prompt-file", pf, "-n", "6", "--temp",
                                "0"] + common)
    check(rc == 0 and out == want, f"--prompt-file: got {out!r} want {want!r} {err}")

    # A prompt that starts with <bos>, as a chat template renders it, gets no second one
    rc, out, err = run(cachet, ["run", "-m", model_dir, "-p", "<bos>hello world", "-n", "6",
                                "--temp", "0", "-v"] + common)
    n_prompt = 1 + len(sp.encode("hello world"))
    check(rc == 0 and out == want and f"prompt tokens: {n_prompt}\n" in err,
          f"<bos> in the prompt: got {out!r} want {want!r} {err}")

    # 2. Same seed, same text; sampling parameters are honoured (top-k 1 == greedy).
    base = ["run", "-m", model_dir, "-p", "hello", "-n", "12"] + common
    r1 = run(cachet, base + ["--seed", "7", "--temp", "1.5"])
    r2 = run(cachet, base + ["--seed", "7", "--temp", "1.5"])
    check(r1[0] == 0 and r1[1] == r2[1], f"same seed differs: {r1[1]!r} vs {r2[1]!r}")
    g = run(cachet, base + ["--temp", "0"])
    k1 = run(cachet, base + ["--seed", "3", "--temp", "2", "--top-k", "1"])
    check(g[1] == k1[1], f"top-k 1 != greedy: {k1[1]!r} vs {g[1]!r}")
    rc, out, err = run(cachet, base + ["--seed", "7", "-v"])
    check(rc == 0 and "seed: 7" in err, f"-v prints the seed: {err!r}")
    # --profile: the same text, and on stderr the prompt's phases, then the generation's, each
    # list ending with the time outside the phases; the products carry their rates.
    rc, out, err = run(cachet, base + ["--seed", "7", "--temp", "1.5", "--profile"])
    check(rc == 0 and out == r1[1], f"--profile changes the text: {out!r} vs {r1[1]!r}")
    lines = err.splitlines()
    heads = [i for i, l in enumerate(lines) if l.startswith("profile of the ")]
    check(len(heads) == 2 and re.fullmatch(r"profile of the prompt \([0-9]+ tokens, one pass\):",
                                           lines[heads[0]])
          and re.fullmatch(r"profile of the generation \([0-9]+ tokens\):", lines[heads[1]]),
          f"--profile headings: {err!r}")
    if len(heads) == 2:
        for a, b, unit in ((heads[0] + 1, heads[1], "pass"), (heads[1] + 1, len(lines), "token")):
            rows = [re.fullmatch(r"profile: (.+): [0-9.]+ ms per " + unit +
                                 r" \(([0-9.]+)%\)(, [0-9.]+ GB/s)?", l)
                    for l in lines[a:b] if l.startswith("profile: ")]
            check(rows and all(rows) and rows[-1].group(1) == "outside the phases",
                  f"--profile {unit} lines: {err!r}")
            if rows and all(rows):
                named = {m.group(1): m.group(3) for m in rows}
                check(named.get("mlp down") and named.get("output head"),
                      f"--profile {unit}: products without rates: {err!r}")
                share = sum(float(m.group(2)) for m in rows)
                check(98.5 <= share <= 101.5, f"--profile {unit}: shares add up to {share}%")

    # 3. Stop strings: the text ends right before the first occurrence.
    rc, full, _ = run(cachet, ["run", "-m", model_dir, "-p", "the quick", "-n", "24",
                               "--temp", "0"] + common)
    if rc == 0 and len(full) > 8:
        stop = full[len(full) // 2:len(full) // 2 + 3]
        rc, out, err = run(cachet, ["run", "-m", model_dir, "-p", "the quick", "-n", "24",
                                    "--temp", "0", "--stop", stop, "--stop", "\u0001never"]
                           + common)
        want = full[:full.find(stop)]
        check(rc == 0 and out == want, f"stop {stop!r}: got {out!r} want {want!r} {err}")
    print("run: seeds and stop strings checked")

    # 4. Perplexity == exp(mean NLL) of the reference, BOS first.
    text_path = os.path.join(wd, "ppl.txt")
    text = "the lazy dog reads tokens while the quick fox jumps\nhello world " * 6
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(text)
    toks = [sp.bos_id()] + sp.encode(text)
    want = math.exp(ref.nll(toks))
    for m in models:
        for chunk in ("512", "7"):
            rc, out, err = run(cachet, ["perplexity", "-m", m, "-f", text_path, "--chunk", chunk]
                               + common)
            last = out.strip().splitlines()[-1] if out.strip() else ""
            mt = re.fullmatch(r"perplexity: ([0-9]+\.[0-9]+)", last)
            check(rc == 0 and mt, f"perplexity output {out!r} {err}")
            if mt:
                got = float(mt.group(1))
                check(abs(got - want) <= 1e-3 * want + 1e-3,
                      f"perplexity {m} chunk {chunk}: got {got} want {want}")
            check(f"tokens: {len(toks) - 1}" in out, f"perplexity token count: {out!r}")
    toks_nb = sp.encode(text)
    want_nb = math.exp(ref.nll(toks_nb))
    rc, out, err = run(cachet, ["perplexity", "-m", model_dir, "-f", text_path, "--no-bos"]
                       + common)
    mt = re.search(r"perplexity: ([0-9.]+)\s*$", out)
    check(rc == 0 and mt and abs(float(mt.group(1)) - want_nb) <= 1e-3 * want_nb,
          f"perplexity --no-bos: {out!r} want {want_nb}")
    with open(text_path, "rb") as f:
        rc, out, err = run(cachet, ["perplexity", "-m", model_dir, "-f", "-"] + common,
                           stdin=f.read())
    mt = re.search(r"perplexity: ([0-9.]+)\s*$", out)
    check(rc == 0 and mt and abs(float(mt.group(1)) - want) <= 1e-3 * want,
          f"perplexity -f -: {out!r} want {want}")
    print(f"perplexity checked ({want:.4f})")

    # 5. Chat: two greedy turns == the reference on one growing token sequence.
    n_reply = 10
    msgs = ["hello", "what is the state"]
    seq = []
    replies = []
    for i, msg in enumerate(msgs):
        seq += chat_turn(sp, msg, i == 0)
        reply, _ = ref.greedy(seq, n_reply)
        seq += reply
        replies.append(sp.decode(reply) + "\n")
    expected = "".join(replies)
    rc, out, err = run(cachet, ["chat", "-m", model_dir, "--temp", "0", "-n", str(n_reply)]
                       + common, stdin=("\n".join(msgs) + "\n").encode())
    check(rc == 0 and out == expected, f"chat: got {out!r} want {expected!r} {err}")
    # /reset starts a new conversation: the same first message gives the same reply.
    rc, out2, err = run(cachet, ["chat", "-m", model_dir, "--temp", "0", "-n", str(n_reply)]
                        + common, stdin=b"hello\n/reset\nhello\n/quit\nignored\n")
    first = replies[0]
    check(rc == 0 and out2 == first + first, f"chat /reset: got {out2!r} want {first * 2!r}")
    print("chat checked")

    # --ignore-eos: a greedy reply that ends on a stop token goes on to -n
    rc, _, err = run(cachet, ["chat", "-m", model_dir, "--temp", "0", "-n", "3000", "-v"] + common,
                     stdin=b"hello\n")
    m = re.search(r"\[\d+ new tokens, (\d+) generated, stop token", err)
    check(rc == 0 and m and int(m.group(1)) < 3000, f"chat: a greedy reply ends: {err[-300:]!r}")
    rc, _, err = run(cachet, ["chat", "-m", model_dir, "--temp", "0", "-n", "3000", "-v",
                              "--ignore-eos"] + common, stdin=b"hello\n")
    check(rc == 0 and "3000 generated, length" in err, f"--ignore-eos: {err[-300:]!r}")

    # Ctrl-C: `run` stops, prints its speed line and exits with 130; in `chat` it ends the
    # reply and the conversation goes on
    p = subprocess.Popen([cachet, "run", "-m", model_dir, "-p", "hello", "-n", "100000000",
                          "--temp", "1", "--seed", "1", "--ignore-eos"] + common,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(64)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 130 and b"generation:" in err,
          f"run after Ctrl-C: rc {p.returncode} stderr {err[-300:]!r}")
    p = subprocess.Popen([cachet, "chat", "-m", model_dir, "-n", "100000000", "--temp", "1",
                          "--seed", "1", "--ignore-eos"] + common, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    got = bytearray()

    def reader():
        while True:
            b = p.stdout.read1(65536)
            if not b:
                return
            got.extend(b)

    threading.Thread(target=reader, daemon=True).start()

    def wait_for(cond, what):
        end = time.time() + 60
        while time.time() < end and not cond():
            time.sleep(0.01)
        return check(cond(), f"chat after Ctrl-C: {what}; stdout ...{bytes(got[-200:])!r}")

    ok = True
    for turn in (b"hello\n", b"again\n"):  # two replies, each cut short by Ctrl-C
        seen = len(got)
        p.stdin.write(turn)
        p.stdin.flush()
        ok = ok and wait_for(lambda: len(got) > seen + 64, "a reply started")
        n = got.count(b"[interrupted]")
        p.send_signal(signal.SIGINT)
        ok = ok and wait_for(lambda: got.count(b"[interrupted]") == n + 1, "the reply ended")
    p.stdin.write(b"/quit\n")
    p.stdin.close()
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    check(ok and rc == 0 and got.count(b"[interrupted]") == 2,
          f"chat after Ctrl-C: rc {rc}, {got.count(b'[interrupted]')} replies interrupted")
    print("Ctrl-C checked")

    # 6. Errors.
    def expect_error(argv, needle, what, stdin=None):
        rc, out, err = run(cachet, argv, stdin)
        check(rc != 0 and needle in err, f"{what}: rc {rc}, stderr {err!r}")

    expect_error(["run", "-m", model_dir, "-p", "x", "--temp", "-1"], "temperature",
                 "negative temperature")
    expect_error(["run", "-m", model_dir, "-p", "x", "--top-p", "1.5"], "top-p", "top-p > 1")
    expect_error(["run", "-m", model_dir, "-p", "x", "--top-k", "-3"], "top-k", "top-k < 0")
    expect_error(["run", "-m", model_dir, "-p", "x", "--min-p", "2"], "min-p", "min-p > 1")
    expect_error(["run", "-m", model_dir, "-p", "x", "--repeat-penalty", "0"], "repeat penalty",
                 "repeat penalty 0")
    expect_error(["run", "-m", model_dir, "-p", "x", "--stop", ""], "stop", "empty stop")
    expect_error(["run", "-m", model_dir], "prompt", "no prompt")
    expect_error(["run", "-m", model_dir, "--prompt-file", os.path.join(wd, "nope.txt")],
                 "nope.txt", "missing prompt file")
    no_tok = os.path.join(wd, "no_tokenizer")
    os.makedirs(no_tok, exist_ok=True)
    for f in os.listdir(model_dir):
        if f != "tokenizer.model":
            shutil.copy(os.path.join(model_dir, f), no_tok)
    expect_error(["run", "-m", no_tok, "-p", "x"], "tokenizer.model", "directory w/o tokenizer")
    expect_error(["run", "-m", text_path, "-p", "x"], "ppl.txt", "text file as model")
    expect_error(["perplexity", "-m", model_dir, "-f", os.path.join(wd, "nope.txt")],
                 "nope.txt", "missing perplexity text")
    empty = os.path.join(wd, "empty.txt")
    open(empty, "w").close()
    expect_error(["perplexity", "-m", model_dir, "-f", empty], "at least one token",
                 "empty perplexity text")

    if FAILURES:
        print(f"test_text_cli: {len(FAILURES)} failures")
        return 1
    print("test_text_cli: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
