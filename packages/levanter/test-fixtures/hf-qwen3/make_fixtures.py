"""Reference Qwen3 checkpoint and logits for levanter's Hugging Face import/export tests.

An independent implementation (PyTorch + numpy, no levanter code, no transformers): it writes a
tiny Qwen3ForCausalLM-style checkpoint (config.json + safetensors, written by hand here) and the
logits its own forward pass gives for fixed ids. The forward follows transformers' Qwen3: Llama's
decoder (RMSNorm, rotary, SwiGLU, grouped-query attention) with q_norm/k_norm, RMSNorms of size
head_dim applied to each query and key head before rotary; head_dim need not be
hidden_size / num_attention_heads (here it is twice that). Run once with a Python that has torch:

    /usr/bin/python3 packages/levanter/test-fixtures/hf-qwen3/make_fixtures.py

The outputs are committed; the tests do not need torch.
"""
import json
import math
import os
import struct

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
IDS = [3, 17, 0, 21, 8, 8, 13, 5, 23, 12]
V, D, F, L, HEADS, KV, HEAD_DIM = 24, 16, 32, 2, 4, 2, 8
THETA, EPS, MAXPOS = 1_000_000.0, 1e-6, 32


def make_weights(gen):
    w = {}

    def mat(name, shape, std=0.3):
        w[name] = torch.randn(*shape, generator=gen, dtype=torch.float32) * std

    def norm(name, n):
        w[name] = 1.0 + 0.2 * torch.randn(n, generator=gen, dtype=torch.float32)

    mat("model.embed_tokens.weight", (V, D), 0.5)
    for i in range(L):
        p = f"model.layers.{i}"
        norm(f"{p}.input_layernorm.weight", D)
        mat(f"{p}.self_attn.q_proj.weight", (HEADS * HEAD_DIM, D))  # nn.Linear: [out, in]
        mat(f"{p}.self_attn.k_proj.weight", (KV * HEAD_DIM, D))
        mat(f"{p}.self_attn.v_proj.weight", (KV * HEAD_DIM, D))
        mat(f"{p}.self_attn.o_proj.weight", (D, HEADS * HEAD_DIM))
        norm(f"{p}.self_attn.q_norm.weight", HEAD_DIM)
        norm(f"{p}.self_attn.k_norm.weight", HEAD_DIM)
        norm(f"{p}.post_attention_layernorm.weight", D)
        mat(f"{p}.mlp.gate_proj.weight", (F, D))
        mat(f"{p}.mlp.up_proj.weight", (F, D))
        mat(f"{p}.mlp.down_proj.weight", (D, F))
    norm("model.norm.weight", D)
    mat("lm_head.weight", (V, D), 0.5)
    return w


def forward(w, ids):
    g = {k: t.to(torch.float64) for k, t in w.items()}
    T, K = len(ids), HEAD_DIM
    x = g["model.embed_tokens.weight"][torch.tensor(ids)]  # [T, D]
    inv = 1.0 / (THETA ** (np.arange(0, K, 2, dtype=np.float64) / K))
    freqs = torch.tensor(np.outer(np.arange(T), inv))  # [T, K/2]
    cos, sin = torch.cat([freqs.cos()] * 2, -1), torch.cat([freqs.sin()] * 2, -1)

    def rms(v, weight):  # over the last axis
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + EPS) * weight

    def rope(v):  # v [h, T, K], rotate_half
        a, b = v[..., : K // 2], v[..., K // 2:]
        return v * cos + torch.cat([-b, a], -1) * sin

    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    for i in range(L):
        p = f"model.layers.{i}"
        a = rms(x, g[f"{p}.input_layernorm.weight"])
        q = (a @ g[f"{p}.self_attn.q_proj.weight"].T).view(T, HEADS, K)
        k = (a @ g[f"{p}.self_attn.k_proj.weight"].T).view(T, KV, K)
        v = (a @ g[f"{p}.self_attn.v_proj.weight"].T).view(T, KV, K).transpose(0, 1)
        # Qwen3: q_norm / k_norm over each head's head_dim values, then rotary
        q = rope(rms(q, g[f"{p}.self_attn.q_norm.weight"]).transpose(0, 1))
        k = rope(rms(k, g[f"{p}.self_attn.k_norm.weight"]).transpose(0, 1))
        k = k.repeat_interleave(HEADS // KV, 0)  # query head h reads key/value head h // (heads/kv)
        v = v.repeat_interleave(HEADS // KV, 0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(K) + mask, -1) @ v  # [h, T, K]
        x = x + att.transpose(0, 1).reshape(T, HEADS * K) @ g[f"{p}.self_attn.o_proj.weight"].T
        m = rms(x, g[f"{p}.post_attention_layernorm.weight"])
        gate = m @ g[f"{p}.mlp.gate_proj.weight"].T
        up = m @ g[f"{p}.mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ g[f"{p}.mlp.down_proj.weight"].T
    x = rms(x, g["model.norm.weight"])
    return x @ g["lm_head.weight"].T  # [T, V], untied


def write_safetensors(path, tensors):
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


def main():
    gen = torch.Generator().manual_seed(4321)
    out = os.path.join(HERE, "gqa-qknorm-f32")
    os.makedirs(out, exist_ok=True)
    w = make_weights(gen)
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": V,
        "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HEAD_DIM,
        "max_position_embeddings": MAXPOS, "hidden_act": "silu", "rms_norm_eps": EPS,
        "rope_theta": THETA, "rope_scaling": None, "attention_bias": False, "attention_dropout": 0.0,
        "use_sliding_window": False, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(out, "model.safetensors"), w)
    logits = forward(w, IDS)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"ids": IDS, "logits": [round(float(v), 7) for v in logits.flatten()]}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
