"""Greedy decoding speed, in tokens per second: attngraph's ``GPT.generate`` with its key/value cache (the prompt
through the full graph, then one step graph per token), attngraph without the cache (the whole sequence through
the full graph per token, as ``generate`` did before), and PyTorch with a key/value cache (a same-sized GPT
written below on attngraph's weights; its tokens are checked against attngraph's). Each figure is the median over
rounds of a whole ``generate`` call (tracing and graph compilation included, numba's kernels warm), divided into
the new tokens. Prints one line per side.

    python -m benchmarks.decode [--batch 1] [--prompt 16] [--tokens 100] [--kv-heads 4] [--rounds 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import attngraph as ag
from attngraph.models import GPT

try:
    import torch
except ImportError:         # the PyTorch side is skipped
    torch = None


def uncached(model: GPT, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy decoding with no cache: every token recomputes the whole window of the last max_length tokens."""
    tokens = prompt
    logits_of = ag.trace(model, tokens=ag.Input((len(tokens), "T"), "int64")).compile()
    for _ in range(new_tokens):
        logits = logits_of(tokens=tokens[:, -model.max_length:])[:, -1]
        tokens = np.concatenate([tokens, logits.argmax(-1)[:, None]], axis=1)
    return tokens


def torch_cached(model: GPT):
    """Greedy decoding in PyTorch with a key/value cache, on ``model``'s weights (attngraph's x·W layout)."""
    w = {name: torch.from_numpy(value) for name, value in model.state_dict().items()}
    attention = model.transformer.layers[0].self_attn
    heads, kv_heads, d_head = attention.heads, attention.kv_heads, attention.d_model // attention.heads
    up, down = sorted({name.split(".")[4] for name in w if ".ffn." in name}, key=int)      # the MLP's two Linears

    def linear(x, name):
        return x @ w[f"{name}.weight"] + w[f"{name}.bias"]

    def norm(x, name):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"])

    def forward(tokens, start, caches):
        """Logits of tokens (B, T) at positions start … start + T − 1; caches[i] = (k, v) grow in place."""
        b, t = tokens.shape
        x = w["token_embed.weight"][tokens] + w["positions.weight"][start:start + t]
        for i, cache in enumerate(caches):
            layer = f"transformer.layers.{i}"
            h = norm(x, f"{layer}.self_attn_norm")
            q = linear(h, f"{layer}.self_attn.w_q").view(b, t, heads, d_head).transpose(1, 2)
            k, v = (linear(h, f"{layer}.self_attn.w_{n}").view(b, t, kv_heads, d_head).transpose(1, 2) for n in "kv")
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
            k, v = (z.repeat_interleave(heads // kv_heads, 1) for z in (k, v))
            mask = torch.ones(t, k.shape[2], dtype=torch.bool).tril(k.shape[2] - t)      # bottom-right causal
            mixed = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + linear(mixed.transpose(1, 2).reshape(b, t, heads * d_head), f"{layer}.self_attn.w_o")
            h = torch.nn.functional.gelu(linear(norm(x, f"{layer}.ffn_norm"), f"{layer}.ffn.{up}"), approximate="tanh")
            x = x + linear(h, f"{layer}.ffn.{down}")
        return norm(x, "transformer.norm") @ w["token_embed.weight"].T

    @torch.no_grad()
    def generate(prompt: np.ndarray, new_tokens: int) -> np.ndarray:
        tokens = torch.from_numpy(prompt)
        caches = [[] for _ in model.transformer.layers]
        logits = forward(tokens, 0, caches)
        for _ in range(new_tokens):
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], 1)
            logits = forward(tokens[:, -1:], tokens.shape[1] - 1, caches)
        return tokens.numpy()
    return generate


def rate(generate, prompt: np.ndarray, new_tokens: int, rounds: int) -> tuple[float, np.ndarray]:
    """(median tokens per second over ``rounds`` after one warm-up call, the tokens)."""
    tokens = generate(prompt, new_tokens)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        generate(prompt, new_tokens)
        times.append(time.perf_counter() - start)
    return len(prompt) * new_tokens / statistics.median(times), tokens


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.decode", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=16, help="prompt length")
    parser.add_argument("--tokens", type=int, default=100, help="new tokens (prompt + tokens <= 128 positions)")
    parser.add_argument("--kv-heads", type=int, default=4, help="key/value heads of the 4 attention heads")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    model = GPT(vocab=65, d_model=128, heads=4, layers=2, d_ff=512, max_length=128, dropout=0.0,
                kv_heads=args.kv_heads, rng=np.random.default_rng(0)).eval()
    prompt = np.random.default_rng(1).integers(0, 65, (args.batch, args.prompt))
    print(f"GPT d_model 128, 4 heads ({args.kv_heads} key/value), 2 layers; batch {args.batch}, prompt {args.prompt}, "
          f"{args.tokens} new tokens; median of {args.rounds} generate calls")
    cached, tokens = rate(lambda p, n: model.generate(p, n, temperature=0), prompt, args.tokens, args.rounds)
    print(f"attngraph, cached      {cached:8.0f} tokens/s")
    plain, plain_tokens = rate(lambda p, n: uncached(model, p, n), prompt, args.tokens, args.rounds)
    print(f"attngraph, uncached    {plain:8.0f} tokens/s   (cached: {cached / plain:.1f}x; same tokens: "
          f"{np.array_equal(tokens, plain_tokens)})")
    if torch is None:
        print("PyTorch not installed: its side is skipped")
        return
    reference, torch_tokens = rate(torch_cached(model), prompt, args.tokens, args.rounds)
    print(f"PyTorch {torch.__version__}, cached {reference:8.0f} tokens/s   ({torch.get_num_threads()} threads; "
          f"attngraph cached / PyTorch: {cached / reference:.2f}; same tokens: {np.array_equal(tokens, torch_tokens)})")


if __name__ == "__main__":
    main()
