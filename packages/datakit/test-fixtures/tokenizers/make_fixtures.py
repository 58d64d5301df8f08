"""Tiny tokenizer.json files in the layouts people download, and the ids an independent reference
tokenizer (this file) gives for sample texts. The vocabularies and merges are written here by hand
(no third-party data); the layouts follow Hugging Face `tokenizers`' JSON format for
Llama 3-style byte-level BPE (Split regex + ByteLevel, ignore_merges), Llama 2-style SentencePiece
BPE (Prepend/Replace normalizer, byte fallback) and Mistral-style (Metaspace pre-tokenizer).

Run once with a Python that has the `regex` module (Debian: python3-regex):
    /usr/bin/python3 packages/datakit/test-fixtures/tokenizers/make_fixtures.py
"""
import json
import os
import unicodedata

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def added(id_, content, special=True, lstrip=False, rstrip=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": not special, "special": special}


def build_vocab(base, merges):
    vocab = dict(base)
    for l, r in merges:
        assert l in vocab and r in vocab, (l, r)
        if l + r not in vocab:
            vocab[l + r] = len(vocab)
    return vocab


# ---------------------------------------------------------------- Llama 3 style (byte-level)
def llama3_json():
    base = {B2U[b]: b for b in range(256)}
    G = B2U[ord(" ")]  # 'Ġ'
    merges = [("h", "e"), (G, "t"), (G + "t", "he"), ("i", "n"), (G, "w"), ("o", "r"), (G + "w", "or"),
              ("l", "d"), (G + "wor", "ld"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("1", "2"), ("12", "3"),
              ("'", "s"), (G, "i"), (G + "i", "n"), ("Ã", "©"), ("a", "f"), ("c", "af"), ("caf", "Ã©"),
              ("\u010a", "\u010a"), ("e", "r"), (G, "h"), ("H", "e")]
    vocab = build_vocab(base, merges)
    # reachable only whole (ignore_merges): no merge path builds it
    vocab[G + "hello"] = len(vocab)
    n = len(vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(n, "<|begin_of_text|>"), added(n + 1, "<|eot_id|>"),
                         added(n + 2, "<tool>", special=False)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                                   "ids": [n], "tokens": ["<|begin_of_text|>"]}}}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": [f"{l} {r}" for l, r in merges]},
    }


def qwen2_json():
    """Qwen2's layout: the Llama 3 one with an NFC normalizer and merges always applied."""
    tok = llama3_json()
    tok["normalizer"] = {"type": "NFC"}
    tok["model"]["ignore_merges"] = False
    tok["post_processor"] = None
    return tok


# ---------------------------------------------------------------- SentencePiece style (Llama 2, Mistral)
def sp_model(extra_merges=()):
    base = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        base[f"<0x{b:02X}>"] = 3 + b
    for ch in ["▁", "t", "h", "e", "l", "o", "w", "r", "d", "H", "i", "n", "a", "c", "é", "1", "2", ",", "!", "I"]:
        base[ch] = len(base)
    # "f" is not in the vocabulary: it falls back to its byte
    merges = [("h", "e"), ("▁", "t"), ("▁t", "he"), ("l", "l"), ("e", "ll"), ("H", "ell"), ("Hell", "o"),
              ("▁", "w"), ("o", "r"), ("▁w", "or"), ("l", "d"), ("▁wor", "ld"), ("▁", "H"), ("ell", "o"),
              ("▁H", "ello"), ("i", "n"), ("▁", "in"), ("c", "a"), ("▁", "ca"), ("1", "2"), ("▁", "1"),
              ("ello", "!")] + list(extra_merges)
    vocab = build_vocab(base, merges)
    return vocab, merges


def llama2_json():
    vocab, merges = sp_model()
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[l, r] for l, r in merges]},
    }


def mistral_json():
    vocab, merges = sp_model()
    n = len(vocab)
    vocab["[INST]"] = n
    vocab["[/INST]"] = n + 1
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"), added(n, "[INST]"),
                         added(n + 1, "[/INST]")],
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
        "post_processor": None,
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{l} {r}" for l, r in merges]},
    }


# ---------------------------------------------------------------- the reference tokenizer
def bpe(symbols, ranks):
    """Merge the lowest-ranked adjacent pair (leftmost on ties), one occurrence at a time."""
    symbols = list(symbols)
    while len(symbols) > 1:
        best, at = None, -1
        for i in range(len(symbols) - 1):
            r = ranks.get((symbols[i], symbols[i + 1]))
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        symbols[at:at + 2] = [symbols[at] + symbols[at + 1]]
    return symbols


def split_added(tok, text, match_special):
    """[(segment, is_added)]: added tokens (non-special always, special when asked) cut out of the text."""
    toks = [t for t in tok["added_tokens"] if match_special or not t["special"]]
    if not toks:
        return [(text, False)]
    out, i, seg = [], 0, ""
    by_len = sorted(toks, key=lambda t: -len(t["content"]))
    while i < len(text):
        hit = next((t for t in by_len if text.startswith(t["content"], i)), None)
        if hit is None:
            seg += text[i]
            i += 1
            continue
        if hit["lstrip"]:
            seg = seg.rstrip()
        out.append((seg, False))
        out.append((hit["content"], True))
        seg = ""
        i += len(hit["content"])
        if hit["rstrip"]:
            while i < len(text) and text[i].isspace():
                i += 1
    out.append((seg, False))
    return [(s, a) for s, a in out if s or a]


def encode(tok, text, match_special=False):
    model = tok["model"]
    vocab = model["vocab"]
    added_ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    ranks = {}
    for r, m in enumerate(merges):
        ranks.setdefault(m, r)
    ids = []
    for index, (seg, is_added) in enumerate(split_added(tok, text, match_special)):
        if is_added:
            ids.append(added_ids[seg])
            continue
        if not seg:
            continue
        pre = tok["pre_tokenizer"]
        if model["byte_fallback"] or (pre and pre["type"] == "Metaspace"):
            norm = tok["normalizer"]
            if norm:
                for n in norm["normalizers"]:
                    if n["type"] == "Prepend" and seg:
                        seg = n["prepend"] + seg
                    elif n["type"] == "Replace":
                        seg = seg.replace(n["pattern"]["String"], n["content"])
            if pre and pre["type"] == "Metaspace":
                seg = seg.replace(" ", pre["replacement"])
                if pre["prepend_scheme"] == "always" or (pre["prepend_scheme"] == "first" and index == 0):
                    if not seg.startswith(pre["replacement"]):
                        seg = pre["replacement"] + seg
            symbols = []
            for ch in seg:
                if ch in vocab:
                    symbols.append(ch)
                else:
                    fb = [f"<0x{b:02X}>" for b in ch.encode("utf-8")]
                    symbols.extend(fb if all(f in vocab for f in fb) else [model["unk_token"]])
            # byte tokens never merge with their neighbours here (no merges name them)
            for s in bpe(symbols, ranks):
                ids.append(vocab[s])
            continue
        if tok["normalizer"] and tok["normalizer"]["type"] == "NFC":
            seg = unicodedata.normalize("NFC", seg)
        pattern = pre["pretokenizers"][0]["pattern"]["Regex"]
        for piece in regex.findall(pattern, seg):
            chars = "".join(B2U[b] for b in piece.encode("utf-8"))
            if model.get("ignore_merges") and chars in vocab:
                ids.append(vocab[chars])
                continue
            ids.extend(vocab[s] for s in bpe(list(chars), ranks))
    return ids


TEXTS = [
    "Hello world",
    "hello world, the winter",
    " the  world\n\nin café 12345!",
    "I'M here, I'll go; it'S fine",
    "naïve 日本語 🦙 end",
    "line1\r\nline2\n\n\nx",
    "<|begin_of_text|>Hello<|eot_id|> <tool> then",
    "[INST] Hello [/INST] the world</s>",
    "",
    "   ",
    "cafe\u0301 Cafe\u0301s \ufb01ne",
]


def template(tok, ids):
    """The post-processor's TemplateProcessing `single`: its special tokens around the sequence."""
    post = tok["post_processor"]
    if post and post["type"] == "Sequence":
        post = next((p for p in post["processors"] if p["type"] == "TemplateProcessing"), None)
    if not post or post["type"] != "TemplateProcessing":
        return ids
    out = []
    for item in post["single"]:
        if "Sequence" in item:
            out.extend(ids)
        else:
            out.extend(post["special_tokens"][item["SpecialToken"]["id"]]["ids"])
    return out


def main():
    out = {}
    for name, make in [("llama3-style", llama3_json), ("llama2-style", llama2_json), ("mistral-style", mistral_json),
                       ("qwen2-style", qwen2_json)]:
        tok = make()
        with open(os.path.join(HERE, f"{name}.tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")
        out[name] = [{"text": t, "specials": s, "ids": encode(tok, t, s == "match")}
                     for t in TEXTS for s in ("ignore", "match")]
        out[name + " with special tokens"] = [{"text": t, "specials": "match", "ids": template(tok, encode(tok, t, True))}
                                              for t in TEXTS]
    with open(os.path.join(HERE, "reference-ids.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
