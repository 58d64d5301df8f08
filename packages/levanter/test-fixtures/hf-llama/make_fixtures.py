"""Reference Llama checkpoints and logits for levanter's Hugging Face import/export tests.

An independent implementation (PyTorch + numpy, no levanter code): it writes tiny
LlamaForCausalLM-style checkpoints (config.json + safetensors, written by hand in ../hf_reference.py) and the
logits its own forward pass gives for fixed ids. Run once with a Python that has torch:

    /usr/bin/python3 packages/levanter/test-fixtures/hf-llama/make_fixtures.py

The outputs are committed; the tests do not need torch. The draws, RMSNorm, rotary and the files written are
../hf_reference.py's, shared with the other Llama-family fixtures; the scaled rotary frequencies are this file's.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from hf_reference import causal_mask, inv_freq, rms_norm, rotary, weight_drawer, write_fixture  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
IDS = [3, 17, 0, 39, 8, 8, 22, 5, 31, 12]

CASES = {
    # grouped-query attention, float32, one file, untied head, plain rotary
    "gqa-f32": dict(heads=4, kv=2, tie=False, dtype="F32", shards=1, rope_scaling=None),
    # bfloat16, two shards with an index, tied head, llama3 rotary scaling
    "bf16-sharded-tied-llama3": dict(
        heads=4, kv=2, tie=True, dtype="BF16", shards=2,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
    ),
    # float16, one key/value head (multi-query), linear rotary scaling (older "type" key)
    "f16-mqa-linear": dict(heads=4, kv=1, tie=False, dtype="F16", shards=1,
                           rope_scaling={"type": "linear", "factor": 2.0}),
}
V, D, F, L, THETA, EPS, MAXPOS = 40, 32, 64, 2, 10000.0, 1e-5, 32
TORCH_DTYPE = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
CONFIG_DTYPE = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def make_weights(case, gen):
    heads, kv = case["heads"], case["kv"]
    K = D // heads
    w, mat, norm = weight_drawer(gen, std=0.2, norm_std=0.1)
    mat("model.embed_tokens.weight", (V, D), 0.5)
    for i in range(L):
        p = f"model.layers.{i}"
        norm(f"{p}.input_layernorm.weight", D)
        mat(f"{p}.self_attn.q_proj.weight", (heads * K, D))  # nn.Linear: [out, in]
        mat(f"{p}.self_attn.k_proj.weight", (kv * K, D))
        mat(f"{p}.self_attn.v_proj.weight", (kv * K, D))
        mat(f"{p}.self_attn.o_proj.weight", (D, heads * K))
        norm(f"{p}.post_attention_layernorm.weight", D)
        mat(f"{p}.mlp.gate_proj.weight", (F, D))
        mat(f"{p}.mlp.up_proj.weight", (F, D))
        mat(f"{p}.mlp.down_proj.weight", (D, F))
    norm("model.norm.weight", D)
    if not case["tie"]:
        mat("lm_head.weight", (V, D), 0.5)
    # round to the stored dtype: the reference computes with exactly what the file holds
    return {k: t.to(TORCH_DTYPE[case["dtype"]]) for k, t in w.items()}


def scaled_inv_freq(K, scaling):
    """Rotary inverse frequencies with Hugging Face's linear or llama3 scaling (none: the plain ones)."""
    f = inv_freq(K, THETA)
    if scaling is None:
        return f
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":
        return f / scaling["factor"]
    assert kind == "llama3"
    factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for x in f:
        wavelen = 2 * math.pi / x
        if wavelen < old / hi:
            out.append(x)
        elif wavelen > old / lo:
            out.append(x / factor)
        else:
            s = (old / wavelen - lo) / (hi - lo)
            out.append((1 - s) * x / factor + s * x)
    return np.array(out)


def forward(case, w, ids):
    heads, kv = case["heads"], case["kv"]
    K = D // heads
    g = {k: t.to(torch.float64) for k, t in w.items()}
    T = len(ids)
    x = g["model.embed_tokens.weight"][torch.tensor(ids)]  # [T, D]
    rms, rope = rms_norm(EPS), rotary(T, K, THETA, scaled_inv_freq(K, case["rope_scaling"]))
    mask = causal_mask(T)
    for i in range(L):
        p = f"model.layers.{i}"
        a = rms(x, g[f"{p}.input_layernorm.weight"])
        q = (a @ g[f"{p}.self_attn.q_proj.weight"].T).view(T, heads, K).transpose(0, 1)
        k = (a @ g[f"{p}.self_attn.k_proj.weight"].T).view(T, kv, K).transpose(0, 1)
        v = (a @ g[f"{p}.self_attn.v_proj.weight"].T).view(T, kv, K).transpose(0, 1)
        q, k = rope(q), rope(k)
        k = k.repeat_interleave(heads // kv, 0)  # query head h reads key/value head h // (heads/kv)
        v = v.repeat_interleave(heads // kv, 0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(K) + mask, -1) @ v  # [h, T, K]
        x = x + att.transpose(0, 1).reshape(T, heads * K) @ g[f"{p}.self_attn.o_proj.weight"].T
        m = rms(x, g[f"{p}.post_attention_layernorm.weight"])
        gate = m @ g[f"{p}.mlp.gate_proj.weight"].T
        up = m @ g[f"{p}.mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ g[f"{p}.mlp.down_proj.weight"].T
    x = rms(x, g["model.norm.weight"])
    head = g["model.embed_tokens.weight"] if case["tie"] else g["lm_head.weight"]
    return x @ head.T  # [T, V]


def main():
    gen = torch.Generator().manual_seed(1234)
    for name, case in CASES.items():
        w = make_weights(case, gen)
        config = {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
            "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
            "num_attention_heads": case["heads"], "num_key_value_heads": case["kv"],
            "max_position_embeddings": MAXPOS, "hidden_act": "silu", "rms_norm_eps": EPS,
            "rope_theta": THETA, "tie_word_embeddings": case["tie"],
            "torch_dtype": CONFIG_DTYPE[case["dtype"]],
        }
        if case["rope_scaling"] is not None:
            config["rope_scaling"] = case["rope_scaling"]
        reference = {"ids": IDS, "logits": forward(case, w, IDS)}
        write_fixture(os.path.join(HERE, name), config, w, reference, shards=case["shards"])


if __name__ == "__main__":
    main()
