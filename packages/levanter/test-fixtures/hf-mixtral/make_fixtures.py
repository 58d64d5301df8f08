"""Reference Mixtral (mixture-of-experts) checkpoint, logits and router loss for levanter's tests.

An independent implementation (PyTorch + numpy, no levanter code, no transformers): it writes a
tiny MixtralForCausalLM-style checkpoint (config.json + safetensors, written by hand in ../hf_reference.py), the
logits its own forward pass gives for fixed ids, and the router's load-balancing loss. The forward
follows transformers' Mixtral: Llama's decoder (RMSNorm, rotary, grouped-query attention) whose MLP
is a sparse block: a linear router (block_sparse_moe.gate), softmax over its logits, the top k
experts kept and their weights renormalised to sum to 1, each expert a SwiGLU (w2(silu(w1 x) * w3 x)).
The loss: per layer num_experts * sum_e (share of tokens with e among their top k) * (mean router prob
of e), as transformers' load_balancing_loss_func for one sequence and one layer, averaged over layers
(transformers pools the layers' tokens before the product; the same for one layer).
Run once with a Python that has torch:

    /usr/bin/python3 packages/levanter/test-fixtures/hf-mixtral/make_fixtures.py

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
V, D, F, L, HEADS, KV, E, TOPK = 24, 16, 12, 2, 4, 2, 4, 2
THETA, EPS, MAXPOS, COEF = 1_000_000.0, 1e-5, 32, 0.02


def make_weights(gen):
    w, mat, norm = weight_drawer(gen)
    mat("model.embed_tokens.weight", (V, D), 0.5)
    for i in range(L):
        p = f"model.layers.{i}"
        norm(f"{p}.input_layernorm.weight", D)
        mat(f"{p}.self_attn.q_proj.weight", (HEADS * D // HEADS, D))  # nn.Linear: [out, in]
        mat(f"{p}.self_attn.k_proj.weight", (KV * D // HEADS, D))
        mat(f"{p}.self_attn.v_proj.weight", (KV * D // HEADS, D))
        mat(f"{p}.self_attn.o_proj.weight", (D, D))
        norm(f"{p}.post_attention_layernorm.weight", D)
        mat(f"{p}.block_sparse_moe.gate.weight", (E, D), 0.8)
        for e in range(E):
            q = f"{p}.block_sparse_moe.experts.{e}"
            mat(f"{q}.w1.weight", (F, D))
            mat(f"{q}.w2.weight", (D, F))
            mat(f"{q}.w3.weight", (F, D))
    norm("model.norm.weight", D)
    mat("lm_head.weight", (V, D), 0.5)
    return w


def forward(w, ids):
    g = {k: t.to(torch.float64) for k, t in w.items()}
    T, K = len(ids), D // HEADS
    x = g["model.embed_tokens.weight"][torch.tensor(ids)]  # [T, D]
    rms, rope = rms_norm(EPS), rotary(T, K, THETA)
    mask = causal_mask(T)
    router_logits = []
    for i in range(L):
        p = f"model.layers.{i}"
        a = rms(x, g[f"{p}.input_layernorm.weight"])
        q = rope((a @ g[f"{p}.self_attn.q_proj.weight"].T).view(T, HEADS, K).transpose(0, 1))
        k = rope((a @ g[f"{p}.self_attn.k_proj.weight"].T).view(T, KV, K).transpose(0, 1))
        v = (a @ g[f"{p}.self_attn.v_proj.weight"].T).view(T, KV, K).transpose(0, 1)
        k = k.repeat_interleave(HEADS // KV, 0)
        v = v.repeat_interleave(HEADS // KV, 0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(K) + mask, -1) @ v  # [h, T, K]
        x = x + att.transpose(0, 1).reshape(T, D) @ g[f"{p}.self_attn.o_proj.weight"].T
        m = rms(x, g[f"{p}.post_attention_layernorm.weight"])
        logits = m @ g[f"{p}.block_sparse_moe.gate.weight"].T  # [T, E]
        router_logits.append(logits)
        probs = torch.softmax(logits, -1)
        top_w, top_i = torch.topk(probs, TOPK, -1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        out = torch.zeros_like(m)
        for t in range(T):  # sparse, as transformers: only the chosen experts run
            for j in range(TOPK):
                q = f"{p}.block_sparse_moe.experts.{int(top_i[t, j])}"
                h = torch.nn.functional.silu(m[t] @ g[f"{q}.w1.weight"].T) * (m[t] @ g[f"{q}.w3.weight"].T)
                out[t] += top_w[t, j] * (h @ g[f"{q}.w2.weight"].T)
        x = x + out
    x = rms(x, g["model.norm.weight"])
    return x @ g["lm_head.weight"].T, router_logits


def load_balancing_loss(router_logits):
    total = 0.0
    for logits in router_logits:  # [T, E] per layer
        probs = torch.softmax(logits, -1)
        _, sel = torch.topk(probs, TOPK, -1)
        expert_mask = torch.nn.functional.one_hot(sel, E).to(torch.float64)  # [T, k, E]
        tokens_per_expert = expert_mask.mean(0)  # [k, E]
        prob_per_expert = probs.mean(0)  # [E]
        total += float((tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() * E)
    return total / len(router_logits)


def main():
    gen = torch.Generator().manual_seed(2468)
    w = make_weights(gen)
    config = {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": V,
        "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": HEADS, "num_key_value_heads": KV, "num_local_experts": E,
        "num_experts_per_tok": TOPK, "router_aux_loss_coef": COEF, "output_router_logits": True,
        "max_position_embeddings": MAXPOS, "hidden_act": "silu", "rms_norm_eps": EPS,
        "rope_theta": THETA, "attention_dropout": 0.0, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "float32",
    }
    logits, router_logits = forward(w, IDS)
    aux = round(load_balancing_loss(router_logits), 9)
    write_fixture(os.path.join(HERE, "top2-of-4-f32"), config, w, {"ids": IDS, "aux_loss": aux, "logits": logits})


if __name__ == "__main__":
    main()
