"""Reference for the MetaVoice text front end, written from the original's semantics.

normalize_text: the original's fam/llm/utils.py::normalize_text (translation table, Latin-1
check, \\t \\n \\r * -> space, str.strip(), runs of two or more `re` \\s -> one space).
BPE: tiktoken's Encoding (pat_str pre-tokenization with the `regex` module, whole-piece lookup,
then byte-pair merging by lowest rank, leftmost on ties; special tokens refused in the input),
plus the original's TrainedBPETokeniser (ids + [eot], then + offset).

write_tiny_meta(dir) writes a small first_stage.meta.json: a 512-rank BPE trained here on a
fixed English/Latin-1 corpus with the GPT-2 pattern, offset 2049, special token 512.
"""

import json
import os
import random
import re

import regex

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
              r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

EOT = "<|endoftext|>"

_CONVERSION = {
    8175: "'", 8189: "'", 8190: "'", 8208: "-", 8209: "-", 8210: "-", 8211: "-", 8212: "-",
    8213: "-", 8214: "||", 8216: "'", 8217: "'", 8218: ",", 8219: "`", 8220: '"', 8221: '"',
    8222: ",,", 8223: '"', 8228: ".", 8229: "..", 8230: "...", 8242: "'", 8243: '"',
    8245: "'", 8246: '"', 180: "'", 2122: "TM",
}


def normalize_text(text):
    text = text.translate(_CONVERSION)
    bad = [(c, ord(c)) for c in text if ord(c) >= 256]
    if bad:
        raise ValueError(f"Non-supported character found: {bad}")
    text = text.replace("\t", " ").replace("\n", " ").replace("\r", " ").replace("*", " ")
    text = text.strip()
    return re.sub(r"\s\s+", " ", text)


class BPE:
    """tiktoken-style encoder over {bytes: rank}."""

    def __init__(self, pat_str, ranks, specials, offset):
        self.pat = regex.compile(pat_str)
        self.ranks = dict(ranks)
        self.specials = dict(specials)
        self.offset = offset
        self.decoder = {v: k for k, v in self.ranks.items()}
        for k, v in self.specials.items():
            self.decoder[v] = k.encode("utf-8")
        self.eot = self.specials[EOT]

    @staticmethod
    def from_meta(path):
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
        tok = meta["tokenizer"]
        ranks = {bytes([b]): b for b in range(256)}
        for k, v in tok["mergeable_ranks"].items():
            if v >= 256:
                ranks[k.encode("utf-8")] = v
        specials = tok.get("special_tokens") or {EOT: len(ranks)}
        return BPE(tok["pat_str"], ranks, specials, tok["offset"])

    def merge(self, piece):
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        return [self.ranks[p] for p in parts]

    def pieces(self, text):
        return [m.group(0) for m in self.pat.finditer(text)]

    def encode_raw(self, text):
        for s in self.specials:
            if s in text:
                raise ValueError(f"special token {s!r} in text")
        ids = []
        for p in self.pieces(text):
            b = p.encode("utf-8")
            if b in self.ranks:
                ids.append(self.ranks[b])
            else:
                ids.extend(self.merge(b))
        return ids

    def encode(self, text, offset=None):
        off = self.offset if offset is None else offset
        return [i + off for i in self.encode_raw(text) + [self.eot]]

    def stage1_ids(self, text):
        return self.encode(normalize_text(text))

    def stage2_ids(self, text):
        return self.encode(normalize_text(text), 1025)

    def decode_raw(self, ids):
        return b"".join(self.decoder[i] for i in ids).decode("utf-8", errors="replace")


def corpus(seed=5, n=1500):
    rng = random.Random(seed)
    words = ("hi how are you today the quick brown fox jumps over lazy dog hello world "
             "voice speech model audio sound text token metavoice clone speaker "
             "don't can't it's we're they've I'm you'll he'd 2024 1337 42 3.14 "
             "café naïve résumé façade Ünïcödé señor ¿qué? ¡sí! 50% £10 €5 ©2024 "
             "Hello World THE Quick, comma. period! question? (parens) \"quotes\"").split()
    syll = "ba be bi bo bu ca co da de di do fa fe ga ge ha he hi ho ka ke la le li lo ma me "\
           "mi mo na ne ni no pa pe ra re ri ro sa se si so ta te ti to va ve ya za é ñ ü".split()
    words += ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(300)]
    lines = []
    for _ in range(n):
        k = rng.randint(2, 12)
        lines.append(" ".join(rng.choice(words) for _ in range(k)))
    return "\n".join(lines)


def train_bpe(text, pat_str, n_ranks=512):
    """Plain BPE training: merge the most frequent adjacent pair (ties: smallest bytes) whose
    concatenation is valid UTF-8 (so every token is a JSON string key)."""
    pat = regex.compile(pat_str)
    counts = {}
    for m in pat.finditer(text):
        b = m.group(0).encode("utf-8")
        counts[b] = counts.get(b, 0) + 1
    words = [([bytes([c]) for c in w], n) for w, n in counts.items()]
    ranks = {bytes([b]): b for b in range(256)}
    while len(ranks) < n_ranks:
        pairs = {}
        for parts, n in words:
            for i in range(len(parts) - 1):
                key = (parts[i], parts[i + 1])
                pairs[key] = pairs.get(key, 0) + n
        cands = []
        for (a, b), n in pairs.items():
            tok = a + b
            if tok in ranks:
                continue
            try:
                tok.decode("utf-8")
            except UnicodeDecodeError:
                continue
            cands.append((-n, tok, a, b))
        if not cands:
            # Nothing left to merge: fill with unreachable-by-corpus ASCII tokens.
            i = len(ranks)
            tok = ("x%dq" % i).encode()
            ranks[tok] = len(ranks)
            continue
        cands.sort()
        _, tok, a, b = cands[0]
        ranks[tok] = len(ranks)
        for idx, (parts, n) in enumerate(words):
            i, out = 0, []
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(tok)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            words[idx] = (out, n)
    return ranks


def meta_dict(ranks, pat_str, offset=2049, with_specials=True):
    mr = {}
    for tok, r in ranks.items():
        if r < 256:
            if r < 128:
                mr[tok.decode("ascii")] = r
            continue
        mr[tok.decode("utf-8")] = r
    tok = {"name": "tiny", "pat_str": pat_str, "offset": offset, "mergeable_ranks": mr}
    if with_specials:
        tok["special_tokens"] = {EOT: len(ranks)}
    return {"tokenizer": tok, "speaker_cond": True, "speaker_emb_size": 256}


_CACHE = {}


def write_tiny_meta(dir, pat_str=GPT2_PAT, name="first_stage.meta.json"):
    """Writes DIR/first_stage.meta.json (512 ranks, offset 2049); returns its path."""
    key = pat_str
    if key not in _CACHE:
        _CACHE[key] = train_bpe(corpus(), pat_str)
    os.makedirs(dir, exist_ok=True)
    path = os.path.join(dir, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta_dict(_CACHE[key], pat_str), f, ensure_ascii=False)
    return path
