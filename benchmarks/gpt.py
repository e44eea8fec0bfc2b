"""GPT's loss and all its gradients, however the model is written (issue 22), on every side from the same weights:

- attngraph's ``GPT`` module traced and compiled (``graph.grad().compile()``), and the loss written as nanoGPT writes
  its model, a function of plain arrays differentiated by ``ag.value_and_grad``: one fused projection ``c_attn``
  (d → 3d) reshaped to (B, T, 3, H, d/H) and transposed to (3, B, H, T, d/H), tied head;
- PyTorch: nanoGPT's ``model.py`` (``torch_reference.NanoGPT``), eager and ``torch.compile``d, and the same model
  as a function of its parameters (``torch.func.grad_and_value`` over ``functional_call``), eager and compiled;
- JAX: ``jax.jit(jax.value_and_grad(loss))`` of the same function (JAX has no module form of its own).

The module forms are compared with each other and the functional forms with each other, JAX with both; each line
gives the attngraph side's kernel calls per step (``Executable.kernel_calls``: its nodes, but the views folded into
their readers). The loss is the mean next-token cross-entropy; no optimizer step."""
from __future__ import annotations

from typing import Callable

import numpy as np

import attngraph as ag
from attngraph.core.executor import compile as compile_graph
from attngraph.models.gpt import GPT

from .harness import compare, load, ratio
from .peers import jr, tr


VOCAB = 65
TARGETS = {"torch": 1.0, "torch.compile": 1.2, "jax": 1.0}
FORMS = {"module": ("attngraph GPT", {"torch": "torch", "torch.compile": "torch.compile", "jax": "jax"}),
         "functional": ("attngraph value_and_grad",
                        {"torch": "torch.func", "torch.compile": "torch.func compiled", "jax": "jax"})}


def init(rng: np.random.Generator, width: int, layers: int, length: int, dtype=np.float32) -> dict[str, np.ndarray]:
    """nanoGPT's parameters by the names of its ``state_dict`` (the tied head once, as ``wte``), matrices stored
    (in, out) as attngraph's (PyTorch's ``Linear`` holds their transposes): N(0, 0.02) weights, zero biases, unit
    LayerNorm gains, as nanoGPT initializes them."""
    def normal(*shape):
        return (0.02 * rng.standard_normal(shape)).astype(dtype)

    params = {"transformer.wte.weight": normal(VOCAB, width), "transformer.wpe.weight": normal(length, width)}
    for i in range(layers):
        h = f"transformer.h.{i}"
        for name, (fan_in, fan_out) in {"attn.c_attn": (width, 3 * width), "attn.c_proj": (width, width),
                                        "mlp.c_fc": (width, 4 * width), "mlp.c_proj": (4 * width, width)}.items():
            params[f"{h}.{name}.weight"], params[f"{h}.{name}.bias"] = normal(fan_in, fan_out), np.zeros(fan_out, dtype)
        for norm in ("ln_1", "ln_2"):
            params[f"{h}.{norm}.weight"], params[f"{h}.{norm}.bias"] = np.ones(width, dtype), np.zeros(width, dtype)
    params["transformer.ln_f.weight"], params["transformer.ln_f.bias"] = np.ones(width, dtype), np.zeros(width, dtype)
    return params


def layer_count(params: dict) -> int:
    return sum(name.endswith(".ln_1.weight") for name in params)


def loss(params: dict, tokens, targets, heads: int):
    """nanoGPT's forward and mean cross-entropy over attngraph tensors: per layer
    x += c_proj(attention(c_attn(ln_1(x)) as (3, B, H, T, d/H))), x += c_proj(gelu(c_fc(ln_2(x)))); logits =
    ln_f(x) wteᵀ."""
    b, t = tokens.shape
    x = ag.embedding(params["transformer.wte.weight"], tokens) + params["transformer.wpe.weight"][:t]
    width = x.shape[-1]
    for i in range(layer_count(params)):
        p = {name[len(f"transformer.h.{i}."):]: value for name, value in params.items()
             if name.startswith(f"transformer.h.{i}.")}
        h = ag.layer_norm(x, p["ln_1.weight"], p["ln_1.bias"])
        qkv = ag.transpose(ag.reshape(h @ p["attn.c_attn.weight"] + p["attn.c_attn.bias"],
                                      (b, t, 3, heads, width // heads)), (2, 0, 3, 1, 4))
        y = ag.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], causal=True)
        x = x + ag.reshape(ag.swapaxes(y, 1, 2), (b, t, width)) @ p["attn.c_proj.weight"] + p["attn.c_proj.bias"]
        h = ag.layer_norm(x, p["ln_2.weight"], p["ln_2.bias"])
        x = x + ag.gelu(h @ p["mlp.c_fc.weight"] + p["mlp.c_fc.bias"]) @ p["mlp.c_proj.weight"] + p["mlp.c_proj.bias"]
    x = ag.layer_norm(x, params["transformer.ln_f.weight"], params["transformer.ln_f.bias"])
    return ag.cross_entropy(x @ ag.transpose(params["transformer.wte.weight"]), targets)


def functional(params: dict, heads: int) -> Callable:
    """``value_and_grad`` of ``loss`` over the parameters as positional arrays, then the tokens and targets."""
    names = list(params)

    def positional(*args):
        return loss(dict(zip(names, args)), *args[len(names):], heads)
    return ag.value_and_grad(positional, argnums=tuple(range(len(names))))


def module_state(params: dict) -> dict[str, np.ndarray]:
    """nanoGPT's parameters as the ``state_dict`` of attngraph's ``GPT``: c_attn's columns split into w_q, w_k, w_v."""
    state = {"token_embed.weight": params["transformer.wte.weight"],
             "positions.weight": params["transformer.wpe.weight"],
             "transformer.norm.weight": params["transformer.ln_f.weight"],
             "transformer.norm.bias": params["transformer.ln_f.bias"]}
    for i in range(layer_count(params)):
        h, layer = f"transformer.h.{i}", f"transformer.layers.{i}"
        for kind in ("weight", "bias"):
            for name, part in zip(("w_q", "w_k", "w_v"), np.split(params[f"{h}.attn.c_attn.{kind}"], 3, -1)):
                state[f"{layer}.self_attn.{name}.{kind}"] = np.ascontiguousarray(part)
            for ours, theirs in {"self_attn.w_o": "attn.c_proj", "self_attn_norm": "ln_1", "ffn.0": "mlp.c_fc",
                                 "ffn.2": "mlp.c_proj", "ffn_norm": "ln_2"}.items():
                state[f"{layer}.{ours}.{kind}"] = params[f"{h}.{theirs}.{kind}"]
    return state


def module(params: dict, heads: int, length: int) -> GPT:
    """attngraph's ``GPT`` (no dropout, d_ff = 4d) holding ``params``."""
    width = params["transformer.wte.weight"].shape[1]
    model = GPT(VOCAB, width, heads, layer_count(params), 4 * width, length, dropout=0.0)
    model.astype(params["transformer.wte.weight"].dtype).load_state_dict(module_state(params))
    return model


def gpt_case(name: str, width: int, heads: int, layers: int, length: int, batch: int, rounds: int,
             dtype=np.float32) -> dict:
    """Every side's loss and gradients at one size (see the module's docstring); the record's ``rows`` print
    them, ``ratio`` holds "form: attngraph/peer" for each pair."""
    rng = np.random.default_rng(0)
    params = init(rng, width, layers, length, dtype)
    tokens, targets = (rng.integers(0, VOCAB, (batch, length)) for _ in range(2))
    model = module(params, heads, length)
    graph = ag.trace(lambda tokens, targets: ag.cross_entropy(model(tokens), targets), tokens=tokens, targets=targets)
    module_step = graph.grad(wrt=[n for n in graph.parameters.values() if not n.stop_gradient]).compile()
    functional_step, arrays = functional(params, heads), [*params.values(), tokens, targets]
    traced = ag.trace(lambda **a: loss({n: a[f"arg{i}"] for i, n in enumerate(params)}, a["tokens"], a["targets"],
                                       heads), **{f"arg{i}": v for i, v in enumerate(params.values())},
                      tokens=tokens, targets=targets)
    functional_graph = traced.grad(wrt=[f"arg{i}" for i in range(len(params))])
    calls = {"attngraph GPT": module_step.kernel_calls,
             "attngraph value_and_grad": compile_graph(functional_graph).kernel_calls}
    runs = {"attngraph GPT": lambda: module_step(tokens=tokens, targets=targets),
            "attngraph value_and_grad": lambda: functional_step(*arrays)}
    if tr is not None:
        runs.update({"torch": tr.nanogpt_step(params, heads, tokens, targets),
                     "torch.compile": tr.nanogpt_step(params, heads, tokens, targets, compiled=True),
                     "torch.func": tr.nanogpt_func_step(params, heads, tokens, targets),
                     "torch.func compiled": tr.nanogpt_func_step(params, heads, tokens, targets, compiled=True)})
    if jr is not None:
        runs["jax"] = jr.nanogpt_step(params, heads, tokens, targets)
    before = load()
    timings = compare(runs, rounds)
    record = {"name": name, "config": dict(vocab=VOCAB, width=width, heads=heads, layers=layers, T=length,
                                           batch=batch, dtype=np.dtype(dtype).name, step="loss and gradients"),
              "load": [round(before, 2), round(load(), 2)], "kernel_calls": calls,
              **{side: timing.summary() for side, timing in timings.items()}}
    record["ratio"] = {f"{form}: {ours}/{peer}": ratio(timings[ours], timings[peer])
                       for form, (ours, peers) in FORMS.items() for peer in peers.values() if peer in timings}
    limits = {f"{form}: {ours}/{peer}": TARGETS[kind] for form, (ours, peers) in FORMS.items()
              for kind, peer in peers.items()}
    record["target"] = ", ".join(f"{kind} <= {limit:g}" for kind, limit in TARGETS.items()) + " in both forms"
    record["met"] = all(record["ratio"][key] <= limits[key] for key in record["ratio"]) if record["ratio"] else None
    record["rows"] = rows(record)
    return record


def rows(record: dict) -> list[str]:
    """A line per side (median [interquartile range], peak memory, kernel calls), then the ratios of each form."""
    lines = []
    peers = dict.fromkeys(peer for _, peers in FORMS.values() for peer in peers.values())
    sides = [side for side in (*record["kernel_calls"], *peers) if side in record]
    for side in sides:
        summary, calls = record[side], record["kernel_calls"].get(side)
        peak = f"peak +{summary['peak_bytes'] / 2 ** 20:.1f} MiB" if summary["peak_bytes"] is not None else ""
        lines.append(f"  {side:<25} {summary['median_s'] * 1e3:8.1f} ms [{summary['p25_s'] * 1e3:.1f}-"
                     f"{summary['p75_s'] * 1e3:.1f}]  {peak:<18} {f'{calls} kernel calls' if calls else ''}")
    for form in FORMS:
        ratios = [f"{key.split(': ')[1]} {value:.2f}" for key, value in record["ratio"].items()
                  if key.startswith(f"{form}:")]
        lines.append(f"  {form} ratios: {', '.join(ratios)}")
    return lines
