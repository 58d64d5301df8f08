"""Reference Qwen3 checkpoint and logits for levanter's Hugging Face import/export tests.

An independent implementation (PyTorch + numpy, no levanter code, no transformers): it writes a
tiny Qwen3ForCausalLM-style checkpoint (config.json + safetensors, written by hand in ../hf_reference.py) and the
logits its own forward pass gives for fixed ids. The forward follows transformers' Qwen3: Llama's
decoder (RMSNorm, rotary, SwiGLU, grouped-query attention) with q_norm/k_norm, RMSNorms of size
head_dim applied to each query and key head before rotary; head_dim need not be
hidden_size / num_attention_heads (here it is twice that). Run once with a Python that has torch:

    /usr/bin/python3 packages/levanter/test-fixtures/hf-qwen3/make_fixtures.py

The outputs are committed; the tests do not need torch. The draws, RMSNorm, rotary and the files written are
../hf_reference.py's, shared with the other Llama-family fixtures.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from hf_reference import causal_mask, rms_norm, rotary, weight_drawer, write_fixture  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
IDS = [3, 17, 0, 21, 8, 8, 13, 5, 23, 12]
V, D, F, L, HEADS, KV, HEAD_DIM = 24, 16, 32, 2, 4, 2, 8
THETA, EPS, MAXPOS = 1_000_000.0, 1e-6, 32


def make_weights(gen):
    w, mat, norm = weight_drawer(gen)
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
    rms, rope = rms_norm(EPS), rotary(T, K, THETA)
    mask = causal_mask(T)
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


def main():
    gen = torch.Generator().manual_seed(4321)
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
    write_fixture(os.path.join(HERE, "gqa-qknorm-f32"), config, w, {"ids": IDS, "logits": forward(w, IDS)})


if __name__ == "__main__":
    main()
