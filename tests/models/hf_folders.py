"""What ``GPT2LMHeadModel(tiny config).save_pretrained(folder)`` writes, drawn at random without transformers."""
import json
from pathlib import Path

import numpy as np

GPT2_SHAPES = {"wte.weight": ("V", "d"), "wpe.weight": ("P", "d"), "ln_f.weight": ("d",), "ln_f.bias": ("d",),
               "h.0.ln_1.weight": ("d",), "h.0.ln_1.bias": ("d",), "h.0.ln_2.weight": ("d",), "h.0.ln_2.bias": ("d",),
               "h.0.attn.c_attn.weight": ("d", "3d"), "h.0.attn.c_attn.bias": ("3d",),
               "h.0.attn.c_proj.weight": ("d", "d"), "h.0.attn.c_proj.bias": ("d",),
               "h.0.mlp.c_fc.weight": ("d", "4d"), "h.0.mlp.c_fc.bias": ("4d",),
               "h.0.mlp.c_proj.weight": ("4d", "d"), "h.0.mlp.c_proj.bias": ("d",)}


def gpt2_folder(folder: Path, vocab: int = 50, d: int = 8, positions: int = 32) -> Path:
    """config.json and model.safetensors of a one-layer GPT-2 with two heads, its weights random."""
    from safetensors.numpy import save_file
    sizes = {"V": vocab, "P": positions, "d": d, "3d": 3 * d, "4d": 4 * d}
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({f"transformer.{name}": (rng.standard_normal([sizes[s] for s in shape]) * 0.3).astype(np.float32)
               for name, shape in GPT2_SHAPES.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(dict(
        model_type="gpt2", n_embd=d, n_head=2, n_layer=1, vocab_size=vocab, n_positions=positions)))
    return folder
