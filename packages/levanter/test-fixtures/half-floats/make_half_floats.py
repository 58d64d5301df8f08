"""float16 and bfloat16 rounding references for levanter's safetensors conversion tests.

numpy rounds float32 → float16 and torch rounds float32 → bfloat16 (both to nearest, ties to
even); this records the bits they give, and the float32 value of sample half bit patterns. Run
once with a Python that has torch: /usr/bin/python3 make_half_floats.py
"""
import json
import os

import numpy as np
import torch

rng = np.random.default_rng(7)
edges = [0.0, -0.0, 1.0, -2.5, 3.14159265, 65504.0, 65519.0, 65520.0, 1e5, -1e5, 6e-8, 5.9604645e-8,
         2.9802322e-8, 2.98e-8, 1e-10, 6.1035156e-05, 6.097e-05, 1 + 2 ** -11, 1 + 3 * 2 ** -11,
         1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.3895314e38, 3.4028235e38, 1e-39, float("inf"), float("-inf")]
values = np.array(edges + list(rng.standard_normal(40) * 10.0 ** rng.integers(-9, 6, 40)), dtype=np.float32)
f16 = values.astype(np.float16).view(np.uint16)
bf16 = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
patterns = np.concatenate([np.array([0, 1, 0x3ff, 0x400, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x8001], dtype=np.uint16),
                           rng.integers(0, 0x7c00, 60).astype(np.uint16)])
out = {
    "values": [float(v) if np.isfinite(v) else str(v) for v in values],
    "f16": [int(b) for b in f16],
    "bf16": [int(b) for b in bf16],
    "patterns": [int(p) for p in patterns],
    "f16Decoded": [float(v) if np.isfinite(v) else str(v) for v in patterns.view(np.float16).astype(np.float32)],
    "bf16Decoded": [float(v) if np.isfinite(v) else str(v) for v in torch.from_numpy(patterns.view(np.int16).copy()).view(torch.bfloat16).float().numpy()],
}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "half-floats.json"), "w") as f:
    json.dump(out, f)
    f.write("\n")
