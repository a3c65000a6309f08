#!/usr/bin/env python3
"""cachet tokenize/detokenize against the SentencePiece library.

Trains small SentencePiece models with spm_train (byte fallback, BPE and unigram), then checks
on many strings that `cachet tokenize` gives the ids of the python `sentencepiece` module, that
`cachet detokenize` (whole and streamed one id at a time) gives its text for the same ids and
for random id sequences, and that the tokenizer loads the same from a directory, from the
.model file and from GGUF files (with the serialized model, and with only the llama.cpp keys).
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

import sentencepiece as spm

FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg)


def run(cachet, args, input_bytes=None):
    r = subprocess.run([cachet] + args, input=input_bytes, capture_output=True, timeout=120)
    return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")


def write_corpus(path):
    rng = random.Random(7)
    words = ("the quick brown fox jumps over the lazy dog while a recurrent model reads "
             "tokens state language gemma hello world numbers 12345 67890 don't can't it's "
             "Hello World THE Quick").split()
    lines = []
    for _ in range(3000):
        n = rng.randint(2, 14)
        sep = rng.choice([" ", " ", " ", "  ", "\t", "   "])
        lines.append(sep.join(rng.choice(words) for _ in range(n)))
    extra = [
        "日本語のテキストです。東京は大きい都市です。私は学生です。",
        "中文文本测试，你好世界。今天天气很好。",
        "한국어 문장입니다. 안녕하세요.",
        "emoji 😀🎉👍 test 🚀 rocket ❤️ heart",
        "Ünïcödé àccents café naïve résumé façade",
        "<start_of_turn>user hi<end_of_turn> <start_of_turn>model hello<end_of_turn>",
        "code: def f(x): return x * 2  # comment {braces} [brackets] (parens)",
    ]
    lines += extra * 30
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def train(workdir, corpus, name, vocab, extra):
    prefix = os.path.join(workdir, name)
    args = ["spm_train", f"--input={corpus}", f"--model_prefix={prefix}", f"--vocab_size={vocab}",
            "--byte_fallback=true", "--character_coverage=0.9995",
            "--user_defined_symbols=<start_of_turn>,<end_of_turn>",
            "--control_symbols=<ctrl1>,<ctrl2>",
            "--pad_id=0", "--eos_id=1", "--bos_id=2", "--unk_id=3",
            "--pad_piece=<pad>", "--eos_piece=<eos>", "--bos_piece=<bos>", "--unk_piece=<unk>",
            "--num_threads=1", "--minloglevel=2"] + extra
    r = subprocess.run(args, capture_output=True, timeout=300)
    if r.returncode != 0:
        print(r.stderr.decode()[-2000:])
        sys.exit("spm_train failed")
    return prefix + ".model"


def test_strings():
    rng = random.Random(11)
    base = [
        "", " ", "  ", "a", "hello world", "Hello World", " hello", "hello ", "  two  spaces  ",
        "tabs\tand\nnewlines\n\n", "\n", "\t\t", "The quick brown fox jumps over the lazy dog.",
        "日本語", "东京 and 北京", "안녕하세요", "😀", "👍🏽 skin tone", "🇫🇷 flag", "❤️",
        "mixed 日本語 text with emoji 🎉 and accents café",
        "Ελληνικά κείμενο", "Кириллица текст", "العربية", "हिन्दी", "ＡＢＣ full width",
        "ﬁ ligature", "e\u0301 combining", "zero\u200bwidth", "\u00a0nbsp\u00a0",
        "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
        "<bos>not control in text<eos>", "<ctrl1>", "<unk>", "<0xE2>",
        "numbers 1234567890 3.14159", "don't can't won't", "x" * 200, "ab" * 50 + " " * 10,
        "\u2581 lower one eighth block", "trailing space ", "   leading",
    ]
    pool = list("abcdefghijklmnopqrstuvwxyz ABCXYZ  \t\n0123456789.,!?'\"") + list(
        "日本語中文한국😀🎉éàüß€∑ΩЖ")
    for _ in range(100):
        n = rng.randint(1, 40)
        base.append("".join(rng.choice(pool) for _ in range(n)))
    return base


def write_gguf(path, kvs):
    """Minimal GGUF v3 writer: metadata only, no tensors."""
    T_U8, T_I32, T_U32, T_F32, T_BOOL, T_STR, T_ARR = 0, 5, 4, 6, 7, 8, 9

    def s(x):
        b = x.encode("utf-8") if isinstance(x, str) else x
        return struct.pack("<Q", len(b)) + b

    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)))
    for key, (typ, val) in kvs:
        out += s(key)
        if typ == "str":
            out += struct.pack("<I", T_STR) + s(val)
        elif typ == "u32":
            out += struct.pack("<II", T_U32, val)
        elif typ == "bool":
            out += struct.pack("<IB", T_BOOL, 1 if val else 0)
        elif typ == "u8[]":
            out += struct.pack("<IIQ", T_ARR, T_U8, len(val)) + bytes(val)
        elif typ == "i32[]":
            out += struct.pack("<IIQ", T_ARR, T_I32, len(val)) + struct.pack(f"<{len(val)}i", *val)
        elif typ == "f32[]":
            out += struct.pack("<IIQ", T_ARR, T_F32, len(val)) + struct.pack(f"<{len(val)}f", *val)
        elif typ == "str[]":
            out += struct.pack("<IIQ", T_ARR, T_STR, len(val)) + b"".join(s(v) for v in val)
        else:
            raise ValueError(typ)
    while len(out) % 32:
        out += b"\0"
    with open(path, "wb") as f:
        f.write(out)


def llama_kvs(sp):
    n = sp.get_piece_size()
    toks, scores, types = [], [], []
    for i in range(n):
        toks.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_byte(i):
            t = 6
        elif sp.is_unused(i):
            t = 5
        elif toks[-1] in ("<start_of_turn>", "<end_of_turn>"):
            t = 4
        else:
            t = 1
        types.append(t)
    return [
        ("general.architecture", ("str", "recurrent_gemma")),
        ("tokenizer.ggml.model", ("str", "llama")),
        ("tokenizer.ggml.tokens", ("str[]", toks)),
        ("tokenizer.ggml.scores", ("f32[]", scores)),
        ("tokenizer.ggml.token_type", ("i32[]", types)),
        ("tokenizer.ggml.bos_token_id", ("u32", sp.bos_id())),
        ("tokenizer.ggml.eos_token_id", ("u32", sp.eos_id())),
        ("tokenizer.ggml.padding_token_id", ("u32", sp.pad_id())),
        ("tokenizer.ggml.unknown_token_id", ("u32", sp.unk_id())),
        ("tokenizer.ggml.add_space_prefix", ("bool", False)),
    ]


def compare_model(cachet, workdir, label, model_arg, sp, strings):
    n_before = len(FAILURES)
    # Each string through a file (exact bytes), a few through argv too.
    for i, text in enumerate(strings):
        path = os.path.join(workdir, "text_" + label.replace("/", "_") + f"_{i}.txt")
        with open(path, "wb") as f:
            f.write(text.encode("utf-8"))
        want = sp.encode(text)
        rc, out, err = run(cachet, ["tokenize", "-m", model_arg, "-f", path])
        check(rc == 0, f"{label}: tokenize failed on {text!r}: {err}")
        if rc != 0:
            continue
        got = json.loads(out)
        check(got == want, f"{label}: tokenize {text!r}: got {got} want {want}")
        if i % 10 == 0 and text and not text.startswith("-") and "\0" not in text:
            rc, out2, err = run(cachet, ["tokenize", "-m", model_arg, "--", text])
            check(rc == 0 and json.loads(out2) == want, f"{label}: argv tokenize {text!r}: {err}")
        # Round trip through detokenize, whole and streamed.
        ids_arg = json.dumps(want)
        for extra in ([], ["--stream"]):
            rc, out3, err = run(cachet, ["detokenize", "-m", model_arg] + extra + ["--", ids_arg])
            check(rc == 0, f"{label}: detokenize {extra} failed: {err}")
            check(out3 == sp.decode(want).encode("utf-8"),
                  f"{label}: detokenize {extra} {want}: got {out3!r} want {sp.decode(want)!r}")
    print(f"{label}: {len(strings)} strings, {len(FAILURES) - n_before} failures")


def compare_random_ids(cachet, workdir, label, model_arg, sp, count):
    rng = random.Random(3)
    n = sp.get_piece_size()
    byte_ids = [i for i in range(n) if sp.is_byte(i)]
    lead = [i for i in byte_ids if int(sp.id_to_piece(i)[3:5], 16) >= 0xC0]
    cont = [i for i in byte_ids if 0x80 <= int(sp.id_to_piece(i)[3:5], 16) < 0xC0]
    space = [i for i in range(n) if sp.id_to_piece(i).startswith("\u2581")]
    specials = [sp.bos_id(), sp.eos_id(), sp.pad_id(), sp.unk_id()]
    n_before = len(FAILURES)
    seqs = []
    for _ in range(count):
        seq = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            if r < 0.25:
                seq.append(rng.choice(lead))
                seq += [rng.choice(cont) for _ in range(rng.randint(0, 3))]
            elif r < 0.35:
                seq.append(rng.choice(byte_ids))
            elif r < 0.55:
                seq.append(rng.choice(space))
            elif r < 0.62:
                seq.append(rng.choice(specials))
            else:
                seq.append(rng.randrange(n))
        seqs.append(seq)
    for seq in seqs:
        want = sp.decode(seq).encode("utf-8")
        for extra in ([], ["--stream"]):
            rc, out, err = run(cachet, ["detokenize", "-m", model_arg] + extra +
                               ["--", ",".join(map(str, seq))])
            check(rc == 0 and out == want,
                  f"{label}: detokenize {extra} {seq}: got {out!r} want {want!r} {err}")
    print(f"{label}: {count} random id sequences, {len(FAILURES) - n_before} failures")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    cachet, wd = args.cachet, args.workdir

    corpus = os.path.join(wd, "corpus.txt")
    write_corpus(corpus)
    # Gemma-like: BPE, identity normalizer, no dummy prefix, whitespace kept.
    bpe = train(wd, corpus, "bpe", 400, ["--model_type=bpe", "--normalization_rule_name=identity",
                                    "--add_dummy_prefix=false",
                                    "--remove_extra_whitespaces=false",
                                    "--allow_whitespace_only_pieces=true",
                                    "--split_digits=true"])
    # Unigram with the default NFKC normalizer and dummy prefix.
    uni = train(wd, corpus, "unigram", 400, ["--model_type=unigram"])

    strings = test_strings()
    for name, model in (("bpe", bpe), ("unigram", uni)):
        sp = spm.SentencePieceProcessor(model_file=model)
        d = os.path.join(wd, f"dir_{name}")
        os.makedirs(d, exist_ok=True)
        with open(model, "rb") as f:
            proto = f.read()
        with open(os.path.join(d, "tokenizer.model"), "wb") as f:
            f.write(proto)
        compare_model(cachet, wd, f"{name}/dir", d, sp, strings)
        compare_model(cachet, wd, f"{name}/file", model, sp, strings[::5])
        compare_random_ids(cachet, wd, f"{name}/dir", d, sp, 100)
        # GGUF carrying the serialized model (and the llama.cpp keys).
        g = os.path.join(wd, f"{name}_proto.gguf")
        write_gguf(g, llama_kvs(sp) + [("tokenizer.sentencepiece.model", ("u8[]", proto))])
        compare_model(cachet, wd, f"{name}/gguf", g, sp, strings[::3])
        # Special tokens and BOS.
        rc, out, err = run(cachet, ["tokenize", "-m", d, "--bos", "--", "<start_of_turn>user"])
        ids = json.loads(out) if rc == 0 else None
        want = [sp.bos_id()] + sp.encode("<start_of_turn>user")
        check(ids == want and sp.piece_to_id("<start_of_turn>") in ids,
              f"{name}: --bos / <start_of_turn>: {out!r} want {want} {err}")

    # GGUF with only the llama.cpp keys: the model is rebuilt from the vocabulary (BPE with
    # byte fallback and an identity normalizer), which is the BPE model above.
    sp = spm.SentencePieceProcessor(model_file=bpe)
    g = os.path.join(wd, "bpe_llama_keys.gguf")
    write_gguf(g, llama_kvs(sp))
    compare_model(cachet, wd, "bpe/gguf-llama-keys", g, sp, strings[::2])

    # Errors: clear messages, non-zero exit.
    empty = os.path.join(wd, "empty_dir")
    os.makedirs(empty, exist_ok=True)
    rc, _, err = run(cachet, ["tokenize", "-m", empty, "x"])
    check(rc != 0 and "tokenizer.model" in err, f"directory without tokenizer: {err}")
    rc, _, err = run(cachet, ["tokenize", "-m", corpus, "x"])
    check(rc != 0 and "not a GGUF file" in err, f"text file as model: {err}")
    rc, _, err = run(cachet, ["tokenize", "-m", os.path.join(wd, "missing.gguf"), "x"])
    check(rc != 0 and "no such file" in err, f"missing model: {err}")
    g2 = os.path.join(wd, "no_tokenizer.gguf")
    write_gguf(g2, [("general.architecture", ("str", "recurrent_gemma"))])
    rc, _, err = run(cachet, ["tokenize", "-m", g2, "x"])
    check(rc != 0 and "no tokenizer" in err, f"GGUF without tokenizer: {err}")
    d = os.path.join(wd, "dir_bpe")
    rc, _, err = run(cachet, ["detokenize", "-m", d, "1,2,100000"])
    check(rc != 0 and "100000" in err and "outside the vocabulary" in err, f"bad id: {err}")
    rc, _, err = run(cachet, ["detokenize", "-m", d, "1,x"])
    check(rc != 0 and "'x'" in err, f"bad id text: {err}")
    rc, _, err = run(cachet, ["detokenize", "-m", d, "[1, -2]"])
    check(rc != 0 and "-2" in err, f"negative id: {err}")

    if FAILURES:
        print(f"test_tokenizer: {len(FAILURES)} failures")
        return 1
    print("test_tokenizer: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
