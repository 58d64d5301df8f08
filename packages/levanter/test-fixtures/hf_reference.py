"""What the Llama-family fixture scripts (hf-qwen3/, hf-mixtral/) share: their weights' draws, a float64 RMSNorm and
rotary, the causal mask, and the files they write (config.json, a safetensors file written by hand, reference.json).

Independent of levanter and of transformers: PyTorch + numpy only. Imported by those scripts, not run itself.
"""
import json
import os
import struct

import numpy as np
import torch


def weight_drawer(gen):
    """A dict of weights and its two draws: mat (normal, times std) and norm (1 + 0.2 * normal), in call order."""
    w = {}

    def mat(name, shape, std=0.3):
        w[name] = torch.randn(*shape, generator=gen, dtype=torch.float32) * std

    def norm(name, n):
        w[name] = 1.0 + 0.2 * torch.randn(n, generator=gen, dtype=torch.float32)

    return w, mat, norm


def rms_norm(eps):
    """RMSNorm over the last axis with epsilon eps: v / sqrt(mean(v^2) + eps) * weight."""

    def rms(v, weight):
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + eps) * weight

    return rms


def rotary(T, K, theta):
    """Rotary positions 0..T-1 for heads of K: a function of v [h, T, K] (rotate_half, as transformers)."""
    inv = 1.0 / (theta ** (np.arange(0, K, 2, dtype=np.float64) / K))
    freqs = torch.tensor(np.outer(np.arange(T), inv))  # [T, K/2]
    cos, sin = torch.cat([freqs.cos()] * 2, -1), torch.cat([freqs.sin()] * 2, -1)

    def rope(v):
        a, b = v[..., : K // 2], v[..., K // 2:]
        return v * cos + torch.cat([-b, a], -1) * sin

    return rope


def causal_mask(T):
    """Additive [T, T] mask: -inf above the diagonal."""
    return torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)


def write_safetensors(path, tensors):
    """float32 tensors in order, the header padded to 8 bytes, as safetensors lays them out."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = t.contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":"))
    h += " " * ((8 - (len(h) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h.encode())
        for b in blobs:
            f.write(b)


def write_fixture(out, config, weights, reference):
    """out/config.json, out/model.safetensors and out/reference.json (the reference's logits rounded to 7 places)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(out, "model.safetensors"), weights)
    ref = {k: ([round(float(v), 7) for v in x.flatten()] if k == "logits" else x) for k, x in reference.items()}
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)
        f.write("\n")
