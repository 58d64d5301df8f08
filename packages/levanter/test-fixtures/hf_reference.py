"""What the Llama-family fixture scripts (hf-llama/, hf-qwen3/, hf-mixtral/) share: their weights' draws, a float64
RMSNorm and rotary, the causal mask, and the files they write (config.json, safetensors files written by hand, in one
file or in shards with an index, and reference.json).

Independent of levanter and of transformers: PyTorch + numpy only. Imported by those scripts, not run itself.
"""
import json
import math
import os
import struct

import numpy as np
import torch


def weight_drawer(gen, std=0.3, norm_std=0.2):
    """A dict of weights and its two draws, in call order: mat (normal, times std unless given) and norm
    (1 + norm_std * normal)."""
    w = {}

    def mat(name, shape, std=std):
        w[name] = torch.randn(*shape, generator=gen, dtype=torch.float32) * std

    def norm(name, n):
        w[name] = 1.0 + norm_std * torch.randn(n, generator=gen, dtype=torch.float32)

    return w, mat, norm


def rms_norm(eps):
    """RMSNorm over the last axis with epsilon eps: v / sqrt(mean(v^2) + eps) * weight."""

    def rms(v, weight):
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + eps) * weight

    return rms


def inv_freq(K, theta):
    """The K/2 rotary inverse frequencies theta^(-2i/K), float64."""
    return 1.0 / (theta ** (np.arange(0, K, 2, dtype=np.float64) / K))


def rotary(T, K, theta, inv=None):
    """Rotary positions 0..T-1 for heads of K: a function of v [h, T, K] (rotate_half, as transformers); inv: the
    inverse frequencies when scaled (inv_freq(K, theta) unless given)."""
    inv = inv_freq(K, theta) if inv is None else inv
    freqs = torch.tensor(np.outer(np.arange(T), inv))  # [T, K/2]
    cos, sin = torch.cat([freqs.cos()] * 2, -1), torch.cat([freqs.sin()] * 2, -1)

    def rope(v):
        a, b = v[..., : K // 2], v[..., K // 2:]
        return v * cos + torch.cat([-b, a], -1) * sin

    return rope


def causal_mask(T):
    """Additive [T, T] mask: -inf above the diagonal."""
    return torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)


SAFETENSORS_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


def raw_bytes(t):
    """A tensor's values as little-endian bytes (bfloat16 through its 16-bit pattern: numpy has no bfloat16)."""
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    return t.contiguous().numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors):
    """Tensors (all float32, bfloat16 or float16) in order, the header padded to 8 bytes, as safetensors lays them
    out. Returns the data's size in bytes."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = raw_bytes(t)
        dtype, shape = SAFETENSORS_DTYPE[t.dtype], list(t.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":"))
    h += " " * ((8 - (len(h) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h.encode())
        for b in blobs:
            f.write(b)
    return off


def write_json(path, value, **kw):
    with open(path, "w") as f:
        json.dump(value, f, **kw)
        f.write("\n")


def write_fixture(out, config, weights, reference, shards=1):
    """out/config.json, the weights (out/model.safetensors, or with shards > 1 that many files of consecutive tensors
    and model.safetensors.index.json) and out/reference.json (the reference's logits rounded to 7 places)."""
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "config.json"), config, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), weights)
    else:
        names, per = list(weights), math.ceil(len(weights) / shards)
        weight_map, total = {}, 0
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {k: weights[k] for k in names[s * per:(s + 1) * per]}
            total += write_safetensors(os.path.join(out, file), part)
            weight_map.update({k: file for k in part})
        write_json(os.path.join(out, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
    ref = {k: ([round(float(v), 7) for v in x.flatten()] if k == "logits" else x) for k, x in reference.items()}
    write_json(os.path.join(out, "reference.json"), ref)
