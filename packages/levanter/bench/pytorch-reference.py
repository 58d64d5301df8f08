#!/usr/bin/env python3
"""PyTorch reference for `pnpm bench levanter`: levanter's GPT-2 trained the plain PyTorch way.

The same model and optimizer as levanter's (src/models/gpt2.ts, src/models/layers.ts,
src/optim/adamw.ts): pre-LayerNorm blocks, learned positions, GELU (tanh), MLP 4x with biases,
final LayerNorm, tied embeddings (logits = x . wte^T), causal softmax attention; init N(0, 0.02)
for matrices and the token table, N(0, 0.01) for positions, N(0, 0.02 / sqrt(2 layers)) for the
two output projections of each block; AdamW betas 0.9/0.95, eps 1e-8, decoupled weight decay 0.1
on matrices and embeddings only, global grad-norm clipping at 1.0; float32.

Prints one JSON line per run to stdout:
  {"variant": "pytorch", "threads", "tokensPerSec", "flopsPerSec", "stepMs", "peakRssMiB",
   "steps", "warmup", "torch", "blas", ...}
tokens/s is the median of the timed steps (the warm-up steps are not timed); peak RSS is the
process's maximum resident set (getrusage), interpreter and torch included.

  python3 bench/pytorch-reference.py --threads 2 --steps 3
  python3 bench/pytorch-reference.py --d-model 512 --layers 6 --heads 8 --steps 1
With --decode N it times greedy decoding with a KV cache instead (batch 1, a --prompt-token prompt, N new tokens;
{"variant": "pytorch-decode", "tokensPerSec", "tokens", ...}):
  python3 bench/pytorch-reference.py --vocab 50257 --context 1024 --d-model 768 --layers 12 --heads 12 --decode 32
With --init-from DIR it starts from the weights levanter exported there (exportHf), so its losses
can be compared with levanter's step by step (bench/pytorch-reference.test.ts).
"""

import argparse
import json
import math
import os
import resource
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--vocab", type=int, default=512, help="vocabulary size (default 512)")
parser.add_argument("--context", type=int, default=128, help="sequence length (default 128)")
parser.add_argument("--d-model", type=int, default=256, help="hidden size (default 256)")
parser.add_argument("--layers", type=int, default=4, help="transformer blocks (default 4)")
parser.add_argument("--heads", type=int, default=4, help="attention heads; must divide --d-model (default 4)")
parser.add_argument("--batch", type=int, default=16, help="sequences per step (default 16)")
parser.add_argument("--steps", type=int, default=3, help="timed steps; the median is reported (default 3)")
parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
parser.add_argument("--threads", type=int, default=1, help="intra-op threads, torch.set_num_threads (default 1)")
parser.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
parser.add_argument(
    "--decode",
    type=int,
    default=0,
    metavar="N",
    help="instead of training: greedy decoding with a KV cache at batch 1, N new tokens after a --prompt prompt",
)
parser.add_argument("--prompt", type=int, default=16, help="prompt tokens for --decode (default 16)")
parser.add_argument(
    "--init-from",
    metavar="DIR",
    help="start from the weights levanter's exportHf wrote to DIR (model.safetensors) instead of a random init",
)
args = parser.parse_args()
for name in ("vocab", "context", "d_model", "layers", "heads", "batch", "steps", "threads"):
    if getattr(args, name) < 1:
        parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
if args.decode < 0 or args.prompt < 1:
    parser.error(f"--decode must be 0 or more and --prompt positive, got {args.decode} and {args.prompt}")
if args.decode and args.prompt + args.decode > args.context:
    parser.error(f"--prompt {args.prompt} + --decode {args.decode} is past --context {args.context}; shorten one")
if args.warmup < 0:
    parser.error(f"--warmup must be 0 or more, got {args.warmup}")
if args.d_model % args.heads:
    parser.error(f"--d-model {args.d_model} is not a multiple of --heads {args.heads}; change one of them")

# The thread pools read these when the libraries load, so they are set before torch is imported.
# PASSIVE: idle OpenMP threads sleep instead of spinning (spinning steals the other core's time).
os.environ["OMP_NUM_THREADS"] = str(args.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(args.threads)
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d, heads, proj_std):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        for lin, std in ((self.c_attn, 0.02), (self.c_proj, proj_std), (self.c_fc, 0.02), (self.mlp_proj, proj_std)):
            nn.init.normal_(lin.weight, 0.0, std)
            nn.init.zeros_(lin.bias)

    def forward(self, x, mask, past=None):
        """x [B, T, D] after `past` (keys, values [B, H, S, K]) if given; mask [T, S + T] additive. Returns x and the
        keys and values through this step."""
        B, T, D = x.shape
        H, K = self.heads, D // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, H, K).transpose(1, 2) for t in (q, k, v))  # [B, H, T, K]
        if past is not None:
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(K)) + mask, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")), (k, v)


class Gpt2(nn.Module):
    def __init__(self, vocab, context, d, layers, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe.weight, 0.0, 0.01)
        self.h = nn.ModuleList(Block(d, heads, 0.02 / math.sqrt(2 * layers)) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        mask = torch.triu(torch.full((context, context), -1e9), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[:T]
        mask = self.mask[:T, :T]
        for block in self.h:
            x, _ = block(x, mask)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head: [B, T, V]

    def forward_cached(self, ids, cache):
        """ids [B, T] at the positions after the cache's (a list of per-block keys/values, empty at first): the last
        position's logits [B, V] and the cache grown by T."""
        S = cache[0][0].shape[2] if cache else 0
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[S : S + T]
        mask = self.mask[S : S + T, : S + T]
        grown = []
        for i, block in enumerate(self.h):
            x, kv = block(x, mask, cache[i] if cache else None)
            grown.append(kv)
        return F.linear(self.ln_f(x[:, -1]), self.wte.weight), grown


def greedy_decode(model, prompt, n):
    """The plain PyTorch decoding loop: prefill the prompt, then n greedy tokens one at a time over the KV cache."""
    with torch.inference_mode():
        logits, cache = model.forward_cached(prompt, [])
        out = []
        for i in range(n):
            token = logits.argmax(dim=-1, keepdim=True)  # [1, 1]
            out.append(int(token))
            if i + 1 < n:
                logits, cache = model.forward_cached(token, cache)
    return out


def read_safetensors(file):
    """name -> float32 tensor, from a safetensors file (an 8-byte header length, a JSON header, the data)."""
    with open(file, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit(f"pytorch-reference: {file}: tensor {name} is {t['dtype']}, expected F32")
        start, end = t["data_offsets"]
        data = bytearray(raw[8 + n + start : 8 + n + end])
        out[name] = torch.frombuffer(data, dtype=torch.float32).reshape(t["shape"])
    return out


def load_levanter(model, folder):
    """Copy levanter's GPT-2 weights (Hugging Face names; Conv1D matrices are [in, out]) into the model."""
    file = os.path.join(folder, "model.safetensors")
    if not os.path.exists(file):
        sys.exit(f"pytorch-reference: --init-from {folder}: no model.safetensors there; write it with exportHf")
    w = read_safetensors(file)
    # name -> (parameter, whether levanter stores it transposed: the [in, out] matrices of nn.Linear's [out, in])
    ours = {
        "transformer.wte.weight": (model.wte.weight, False),
        "transformer.wpe.weight": (model.wpe.weight, False),
        "transformer.ln_f.weight": (model.ln_f.weight, False),
        "transformer.ln_f.bias": (model.ln_f.bias, False),
    }
    for i, blk in enumerate(model.h):
        mods = (
            ("ln_1", blk.ln_1),
            ("attn.c_attn", blk.c_attn),
            ("attn.c_proj", blk.c_proj),
            ("ln_2", blk.ln_2),
            ("mlp.c_fc", blk.c_fc),
            ("mlp.c_proj", blk.mlp_proj),
        )
        for name, mod in mods:
            ours[f"transformer.h.{i}.{name}.weight"] = (mod.weight, isinstance(mod, nn.Linear))
            ours[f"transformer.h.{i}.{name}.bias"] = (mod.bias, False)
    with torch.no_grad():
        for name, (p, transposed) in ours.items():
            if name not in w:
                sys.exit(f"pytorch-reference: {file} has no tensor {name}; export a GPT-2 of this size")
            t = w[name].t() if transposed else w[name]
            if t.shape != p.shape:
                sys.exit(
                    f"pytorch-reference: {file}: {name} has shape {list(w[name].shape)}, "
                    f"this model's is {list(p.shape)}{' transposed' if transposed else ''}; check the size flags"
                )
            p.copy_(t)


model = Gpt2(args.vocab, args.context, args.d_model, args.layers, args.heads)
if args.init_from:
    load_levanter(model, args.init_from)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]  # matrices and embeddings
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]  # biases and norms
opt = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
    lr=args.lr,
    betas=(0.9, 0.95),
    eps=1e-8,
)

# The bench's token stream (bench/variant.ts), cut into consecutive windows.
n_tokens = 200_000
stream = torch.tensor([(i * 7919 + (i >> 7)) % args.vocab for i in range(n_tokens)], dtype=torch.long)
window = args.batch * (args.context + 1)


def batch(step):
    start = (step * window) % (n_tokens - window)
    rows = stream[start : start + window].view(args.batch, args.context + 1)
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def train_step(step):
    ids, targets = batch(step)
    logits = model(ids)
    loss = F.cross_entropy(logits.view(-1, args.vocab), targets.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def blas_library():
    """The BLAS this process loaded (Debian's torch goes through libblas.so.3 and its alternatives)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
        return ",".join(sorted(os.path.realpath(p) for p in libs)) or "none"
    except OSError:
        return "unknown"


if args.decode:
    # The prompt levanter's decode bench feeds (bench/decode-roofline.ts); tokens/s is the new tokens over the whole
    # call (prefill included), the median of --steps calls after --warmup.
    prompt = torch.tensor([[(i * 7919) % args.vocab for i in range(args.prompt)]], dtype=torch.long)
    rates, tokens = [], []
    for s in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        tokens = greedy_decode(model, prompt, args.decode)
        if s >= args.warmup:
            rates.append(args.decode / (time.perf_counter() - t0))
    print(
        json.dumps(
            {
                "variant": "pytorch-decode",
                "threads": args.threads,
                "tokensPerSec": sorted(rates)[len(rates) // 2],
                "rounds": rates,
                "tokens": tokens,
                "params": sum(p.numel() for p in model.parameters()),
                "peakRssMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "torch": torch.__version__,
                "blas": blas_library(),
                "ompWaitPolicy": os.environ.get("OMP_WAIT_POLICY"),
            }
        ),
        flush=True,
    )
    sys.exit(0)

times, cpu_times, losses = [], [], []
for s in range(args.warmup + args.steps):
    t0, c0 = time.perf_counter(), time.process_time()
    loss = train_step(s)
    if s >= args.warmup:
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)  # every thread's CPU time: what a shared machine cannot inflate
    losses.append(loss)
if not math.isfinite(loss):
    sys.exit(f"pytorch-reference: the loss is {loss} after {args.warmup + args.steps} steps")

step_s = sorted(times)[len(times) // 2]
tokens_per_step = args.batch * args.context
n_params = sum(p.numel() for p in model.parameters())
# levanter's model FLOPs per token (src/models/lm.ts): 6 per matrix parameter (the position table is a lookup) plus
# attention.
flops_per_token = 6 * (n_params - args.context * args.d_model) + 12 * args.layers * args.d_model * args.context
print(
    json.dumps(
        {
            "variant": "pytorch",
            "threads": args.threads,
            "tokensPerSec": tokens_per_step / step_s,
            "flopsPerSec": tokens_per_step / step_s * flops_per_token,
            "stepMs": step_s * 1000,
            "cpuMsPerStep": sorted(cpu_times)[len(cpu_times) // 2] * 1000,
            "peakRssMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "steps": args.steps,
            "warmup": args.warmup,
            "losses": losses,
            "params": n_params,
            "torch": torch.__version__,
            "blas": blas_library(),
            "ompWaitPolicy": os.environ.get("OMP_WAIT_POLICY"),
        }
    ),
    flush=True,
)
