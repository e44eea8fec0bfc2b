"""The PyTorch side of the benchmarks: the same computations as attngraph's, written as a PyTorch user would
(nanoGPT's ``model.py`` for GPT, ``scaled_dot_product_attention``, ``F.layer_norm``, ``nn.GRUCell``,
``torch.optim.AdamW``). The GRU models (``Seq2Seq``, ``HAN``) bear attngraph's module names and take its parameters
(``load``). Imported only when PyTorch is installed."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attngraph.models.tokens import PAD


class CausalSelfAttention(nn.Module):
    """nanoGPT's: one projection c_attn (d → 3d) split into q, k, v, each viewed (B, T, H, d/H) and transposed to
    (B, H, T, d/H), ``scaled_dot_product_attention(is_causal=True)``, heads merged and projected by c_proj."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x):
        b, t, width = x.size()
        q, k, v = (part.view(b, t, self.heads, width // self.heads).transpose(1, 2)
                   for part in self.c_attn(x).split(width, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, width))


class MLP(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """nanoGPT's pre-norm block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(width), CausalSelfAttention(width, heads)
        self.ln_2, self.mlp = nn.LayerNorm(width), MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's ``model.py`` GPT (Karpathy): token and learned position embeddings, the blocks, ln_f, and the
    lm_head tied to wte (no dropout; GELU's tanh form, as GPT-2 and attngraph's GPT)."""

    def __init__(self, vocab: int, width: int, heads: int, layers: int, length: int):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(length, width),
            h=nn.ModuleList(Block(width, heads) for _ in range(layers)), ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, tokens):
        x = self.transformer.wte(tokens) + self.transformer.wpe(torch.arange(tokens.shape[1]))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def nanogpt(params: dict[str, np.ndarray], heads: int) -> NanoGPT:
    """``NanoGPT`` holding ``params`` (benchmarks.gpt.init's: nanoGPT's names, matrices (in, out)), in their dtype."""
    vocab, width = params["transformer.wte.weight"].shape
    layers = sum(name.endswith(".ln_1.weight") for name in params)
    model = NanoGPT(vocab, width, heads, layers, len(params["transformer.wpe.weight"]))
    model.to(torch.from_numpy(params["transformer.wte.weight"]).dtype)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.copy_(torch.from_numpy(linear_weight(name, params[name])))
    return model


def linear_weight(name: str, array: np.ndarray) -> np.ndarray:
    """A Linear's weight as PyTorch holds it (out, in), from or to attngraph's (in, out); other arrays as they are."""
    return array.T if name.endswith(".weight") and array.ndim == 2 and ".h." in name else array


def nanogpt_loss(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def nanogpt_step(params: dict[str, np.ndarray], heads: int, tokens: np.ndarray, targets: np.ndarray,
                 compiled: bool = False):
    """nanoGPT's loss and the gradients of every parameter (``.grad``), as a function of nothing; with
    ``compiled``, the model goes through ``torch.compile`` (inductor's fused C++ kernels), as nanoGPT's
    ``train.py --compile``."""
    model = nanogpt(params, heads)
    forward = torch.compile(model) if compiled else model
    tokens, targets = torch.from_numpy(tokens), torch.from_numpy(targets)

    def step():
        model.zero_grad(set_to_none=True)
        loss = nanogpt_loss(forward(tokens), targets)
        loss.backward()
        return loss
    return step


def nanogpt_func_step(params: dict[str, np.ndarray], heads: int, tokens: np.ndarray, targets: np.ndarray,
                      compiled: bool = False):
    """The same loss as a function of the parameters, ``torch.func.grad_and_value`` over ``functional_call`` (the
    functional form, as ``ag.value_and_grad``), as a function of nothing returning (gradients, loss); with
    ``compiled``, that function through ``torch.compile``."""
    model = nanogpt(params, heads)
    weights = {name: p.detach() for name, p in model.named_parameters()}
    tokens, targets = torch.from_numpy(tokens), torch.from_numpy(targets)

    def loss(weights):
        return nanogpt_loss(torch.func.functional_call(model, weights, (tokens,)), targets)
    grad_and_value = torch.func.grad_and_value(loss)
    step = torch.compile(grad_and_value) if compiled else grad_and_value
    return lambda: step(weights)


def adamw_step(model: nn.Module, compiled: bool, loss_of):
    """One AdamW training step (lr 3e-4) of ``loss_of(model)``, as a function of nothing; with ``compiled``,
    ``loss_of`` gets ``torch.compile(model)``."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    forward = torch.compile(model) if compiled else model

    def step():
        loss = loss_of(forward)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def attend(scores, values, mask):
    """attngraph's masked attention over one query: Σ_j α_j values_j, α = softmax(scores) over the keys that
    ``mask`` allows, and zero where it allows none (filling with the lowest float rather than −inf keeps such
    a row finite; the product with the mask then zeroes it)."""
    weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), -1) * mask
    return torch.einsum("bt,btd->bd", weights, values)


def unroll(cell: nn.GRUCell, x, mask, steps):
    """``cell`` over x (B, T, in) at time ``steps`` in their order; a padded step (mask False) carries the state
    over and outputs zero. The states (B, T, H) in time order and the final state."""
    h = x.new_zeros(x.shape[0], cell.hidden_size)
    states = [None] * x.shape[1]
    for t in steps:
        real = mask[:, t, None]
        h = torch.where(real, cell(x[:, t], h), h)
        states[t] = h * real
    return torch.stack(states, 1), h


class GRU(nn.Module):
    """attngraph's bidirectional GRU encoder: ([h→_t; h←_t] (B, T, 2H), the final states [h→; h←]), masked.
    nn.GRU's sequence kernel cannot carry the state over padding inside a sequence batch without
    pack_padded_sequence, which refuses the empty sentences of a HAN batch: each direction runs its
    nn.GRUCell (the same cell as attngraph's) step by step."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.cell, self.backward_cell = nn.GRUCell(input_size, hidden), nn.GRUCell(input_size, hidden)

    def forward(self, x, mask):
        forward, last = unroll(self.cell, x, mask, range(x.shape[1]))
        backward, first = unroll(self.backward_cell, x, mask, reversed(range(x.shape[1])))
        return torch.cat([forward, backward], -1), torch.cat([last, first], -1)


class AdditiveScore(nn.Module):
    """attngraph's AdditiveScore: e_j = vᵀ tanh(W s + U h_j + b) for keys = U h + b, the memory's projection
    (computed once for all decoder steps, as attngraph's graph does after common-subexpression elimination)."""

    def __init__(self, query_dim: int, key_dim: int, hidden: int):
        super().__init__()
        self.w_query, self.w_key = nn.Linear(query_dim, hidden, bias=False), nn.Linear(key_dim, hidden)
        self.v = nn.Parameter(torch.empty(hidden).uniform_(-hidden ** -0.5, hidden ** -0.5))

    def forward(self, query, keys):
        return torch.tanh(self.w_query(query)[:, None] + keys) @ self.v


class Attention(nn.Module):
    """attngraph's Attention over one query: the context attend(score(query, keys), values, mask)."""

    def __init__(self, score: nn.Module):
        super().__init__()
        self.score = score

    def forward(self, query, keys, values, mask):
        return attend(self.score(query, keys), values, mask)


class Seq2Seq(nn.Module):
    """attngraph's BahdanauSeq2Seq: logits (B, T, vocab) for src (B, S) and tgt_in (B, T), teacher forcing;
    s_0 = tanh(W h←_1), then each step α = attention(s, h), c = Σ α h, s = GRU([E y; c], s),
    logits = W_o tanh(U_o [s; c; E y])."""

    def __init__(self, vocab: int, embed_dim: int, hidden: int):
        super().__init__()
        self.src_embed, self.tgt_embed = nn.Embedding(vocab, embed_dim), nn.Embedding(vocab, embed_dim)
        self.encoder = GRU(embed_dim, hidden)
        self.bridge = nn.Linear(hidden, hidden)
        self.attention = Attention(AdditiveScore(hidden, 2 * hidden, hidden))
        self.cell = nn.GRUCell(embed_dim + 2 * hidden, hidden)
        self.readout = nn.Linear(3 * hidden + embed_dim, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src, tgt_in):
        mask = src != PAD
        memory, final = self.encoder(self.src_embed(src), mask)
        state = torch.tanh(self.bridge(final[:, self.cell.hidden_size:]))
        keys = self.attention.score.w_key(memory)
        logits = []
        for embedded in self.tgt_embed(tgt_in).unbind(1):
            context = self.attention(state, keys, memory, mask)
            state = self.cell(torch.cat([embedded, context], -1), state)
            logits.append(self.out(torch.tanh(self.readout(torch.cat([state, context, embedded], -1)))))
        return torch.stack(logits, 1)


class AttentionPooling(nn.Module):
    """attngraph's AttentionPooling: Σ_t α_t h_t, α = softmax(u_wᵀ tanh(W h_t + b)) over the real t."""

    def __init__(self, dim: int, attention_dim: int):
        super().__init__()
        self.w_s1, self.w_s2 = nn.Linear(dim, attention_dim), nn.Linear(attention_dim, 1, bias=False)

    def forward(self, hidden, mask):
        return attend(self.w_s2(torch.tanh(self.w_s1(hidden)))[..., 0], hidden, mask)


class HAN(nn.Module):
    """attngraph's HAN: logits (B, classes) for documents (B, S, W); words, then sentences, each read by a
    bidirectional GRU and pooled by attention, both levels masked (a sentence is padding when its first
    word is)."""

    def __init__(self, vocab: int, embed_dim: int, word_hidden: int, sentence_hidden: int, attention_dim: int,
                 classes: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed_dim)
        self.word_encoder = GRU(embed_dim, word_hidden)
        self.word_attention = AttentionPooling(2 * word_hidden, attention_dim)
        self.sentence_encoder = GRU(2 * word_hidden, sentence_hidden)
        self.sentence_attention = AttentionPooling(2 * sentence_hidden, attention_dim)
        self.classifier = nn.Linear(2 * sentence_hidden, classes)

    def forward(self, documents):
        batch, sentences, words = documents.shape
        tokens = documents.reshape(-1, words)
        word_mask = tokens != PAD
        word_states, _ = self.word_encoder(self.embed(tokens), word_mask)
        vectors = self.word_attention(word_states, word_mask).reshape(batch, sentences, -1)
        sentence_mask = documents[:, :, 0] != PAD
        sentence_states, _ = self.sentence_encoder(vectors, sentence_mask)
        return self.classifier(self.sentence_attention(sentence_states, sentence_mask))


GRU_CELL_NAMES = {"weight_ih": "input.weight", "bias_ih": "input.bias", "weight_hh": "hidden.weight",
                  "bias_hh": "hidden.bias"}


def attngraph_parameters(model: nn.Module):
    """(attngraph's name, parameter, transposed) for each parameter of a model above: transposed when
    attngraph stores it as (in, out) where PyTorch has (out, in) (Linear and GRUCell weights)."""
    for prefix, module in model.named_modules():
        for name, parameter in module.named_parameters(recurse=False):
            transposed = isinstance(module, (nn.Linear, nn.GRUCell)) and parameter.ndim == 2
            yield f"{prefix}.{GRU_CELL_NAMES.get(name, name)}", parameter, transposed


def load(model: nn.Module, state: dict[str, np.ndarray]) -> nn.Module:
    """``model`` holding the parameters of attngraph's ``state_dict()`` (copies)."""
    with torch.no_grad():
        for name, parameter, transposed in attngraph_parameters(model):
            parameter.copy_(torch.from_numpy(state[name].T if transposed else state[name]))
    return model


def seq2seq_loss(model, src, tgt_in, tgt_out):
    """Teacher forcing: mean cross-entropy of the non-PAD target tokens (attngraph's ``reversal_loss``)."""
    return F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)


def han_loss(model, documents, labels):
    return F.cross_entropy(model(documents), labels)


REFERENCES = {"seq2seq": (Seq2Seq, seq2seq_loss), "han": (HAN, han_loss)}


def reference(name: str, sizes: dict, state: dict[str, np.ndarray]):
    """The PyTorch twin of attngraph's model ``name`` ("seq2seq", "han") of ``sizes``, holding the parameters
    of its ``state_dict()``, and the twin's loss, ``loss(model, *batch)``."""
    model, loss = REFERENCES[name]
    return load(model(**sizes), state), loss


def training_step(model: nn.Module, loss, *arrays: np.ndarray, compiled: bool = False):
    """One AdamW training step of ``loss(model, *arrays)``, as a function of nothing."""
    tensors = [torch.from_numpy(a) for a in arrays]
    return adamw_step(model, compiled, lambda model: loss(model, *tensors))


def loss_and_grads(f, *arrays: np.ndarray, wrt: int):
    """A function computing Σ f(*arrays) ∘ g (g, the last array, a fixed output gradient) and its gradients
    with respect to the first ``wrt`` arrays."""
    tensors = [torch.from_numpy(a) for a in arrays]
    leaves, g = tensors[:wrt], tensors[-1]

    def run():
        for t in leaves:
            t.requires_grad_(True)
            t.grad = None
        (f(*tensors[:-1]) * g).sum().backward()
    return run


def matmul(a: np.ndarray, b: np.ndarray):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return lambda: ta @ tb


def cross_entropy(logits: np.ndarray, targets: np.ndarray):
    x, t = torch.from_numpy(logits), torch.from_numpy(targets)

    def run():
        x.requires_grad_(True)
        x.grad = None
        F.cross_entropy(x, t).backward()
    return run


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def softmax(x):
    return torch.softmax(x, -1)
