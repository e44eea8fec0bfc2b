"""The PyTorch side of the benchmarks: the same computations as attngraph's, written as a PyTorch user would
(nanoGPT's ``model.py`` for GPT, ``scaled_dot_product_attention``, ``F.layer_norm``, ``nn.GRU``/``nn.LSTM`` where
a model's recurrence allows one sequence call, ``nn.GRUCell``/``nn.LSTMCell`` where a step needs attention first,
``torch.optim.AdamW``). The recurrent models (``REFERENCES``) bear attngraph's module names and take its parameters
(``load``). Imported only when PyTorch is installed."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attngraph.models.show_attend_tell import PENALTY
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


def last_real(states, mask):
    """Each row's state at its last real step (padding only at the end of a row): (B, T, H), (B, T) → (B, H)."""
    return states[torch.arange(len(states)), mask.sum(1) - 1]


class GeneralScore(nn.Module):
    """attngraph's GeneralScore: score(q, k) = qᵀ W k, W (query_dim, key_dim)."""

    def __init__(self, query_dim: int, key_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))


class LuongSeq2Seq(nn.Module):
    """attngraph's LuongSeq2Seq (score "general"): the encoder an ``nn.GRU`` over the packed sources (padding
    only at the end), the decoder, fed only the target embeddings (no input feeding), one ``nn.GRU`` over all
    steps from the encoder's final state; then attention for every step at once: α = softmax(h_t W_a h̄ᵀ) over
    the real source tokens, logits = W_s tanh(W_c [c_t; h_t])."""

    def __init__(self, vocab: int, embed_dim: int, hidden: int):
        super().__init__()
        self.src_embed, self.tgt_embed = nn.Embedding(vocab, embed_dim), nn.Embedding(vocab, embed_dim)
        self.encoder = nn.GRU(embed_dim, hidden, batch_first=True)
        self.cell = cells(nn.GRU(embed_dim, hidden, batch_first=True), "")
        self.attention = Attention(GeneralScore(hidden, hidden))
        self.attentional = nn.Linear(2 * hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src, tgt_in):
        mask = src != PAD
        packed = nn.utils.rnn.pack_padded_sequence(self.src_embed(src), mask.sum(1), batch_first=True,
                                                   enforce_sorted=False)
        memory, final = self.encoder(packed)
        memory, _ = nn.utils.rnn.pad_packed_sequence(memory, batch_first=True, total_length=src.shape[1])
        states, _ = self.cell(self.tgt_embed(tgt_in), final)
        scores = states @ self.attention.score.weight @ memory.transpose(1, 2)
        weights = torch.softmax(scores.masked_fill(~mask[:, None], torch.finfo(scores.dtype).min), -1)
        return self.out(torch.tanh(self.attentional(torch.cat([weights @ memory, states], -1))))


class LSTMN(nn.Module):
    """attngraph's LSTMN, an ``nn.LSTMCell`` run on the attention's summaries (h̃_t, c̃_t): at step t ≥ 1,
    s = softmax(vᵀ tanh(W_h h_i + b + W_x x_t + W_h̃ h̃_{t−1})) over i < t, [h̃_t; c̃_t] = Σ_i s_i [h_i; c_i];
    at t = 0 the summaries are zero. With padding only at the end of a row, a real step attends only to real
    ones, so the steps run over the whole batch unmasked and the output is each row's h at its last real step."""

    def __init__(self, input_size: int, hidden_size: int, attention_size: int):
        super().__init__()
        self.w_h = nn.Linear(hidden_size, attention_size)
        self.w_x = nn.Linear(input_size, attention_size, bias=False)
        self.w_summary = nn.Linear(hidden_size, attention_size, bias=False)
        self.v = nn.Parameter(torch.empty(attention_size))
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, x, mask):
        scores_x = self.w_x(x)
        h, c = self.cell(x[:, 0])
        summary, keys, tape, states = torch.zeros_like(h), [], [], [h]
        for t in range(1, x.shape[1]):
            keys.append(self.w_h(h))
            tape.append(torch.cat([h, c], -1))
            query = scores_x[:, t] + self.w_summary(summary)
            weights = torch.softmax(torch.tanh(torch.stack(keys, 1) + query[:, None]) @ self.v, -1)
            summary, c_summary = torch.einsum("bi,bih->bh", weights, torch.stack(tape, 1)).split(
                self.cell.hidden_size, -1)
            h, c = self.cell(x[:, t], (summary, c_summary))
            states.append(h)
        return last_real(torch.stack(states, 1), mask)


class LSTMNClassifier(nn.Module):
    """attngraph's LSTMNClassifier: logits (B, classes) = W h of the LSTMN's last real step."""

    def __init__(self, vocab: int, embed_dim: int, hidden: int, attention_dim: int, classes: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed_dim)
        self.lstmn = LSTMN(embed_dim, hidden, attention_dim)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, tokens):
        return self.classifier(self.lstmn(self.embed(tokens), tokens != PAD))


def reverse_real(x, mask):
    """Each row's real steps in reverse order, its padding (at the end) left in place: (B, T, ...) → (B, T, ...);
    its own inverse."""
    steps, lengths = torch.arange(x.shape[1]), mask.sum(1, keepdim=True)
    order = torch.where(steps < lengths, lengths - 1 - steps, steps)
    return x[torch.arange(len(x))[:, None], order]


class ELMo(nn.Module):
    """attngraph's ELMo biLM: each direction one two-layer ``nn.LSTM``, the backward one over each row's real
    tokens reversed (padding only at the end); the states zero at padding, as attngraph's; one softmax layer."""

    def __init__(self, vocab: int, dim: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.forward_lm = nn.LSTM(dim, dim, layers, batch_first=True)
        self.backward_lm = nn.LSTM(dim, dim, layers, batch_first=True)
        self.softmax = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x, mask = self.embed(tokens), (tokens != PAD)[..., None]
        forward, _ = self.forward_lm(x)
        backward, _ = self.backward_lm(reverse_real(x, mask[..., 0]))
        return self.softmax(forward * mask), self.softmax(reverse_real(backward, mask[..., 0]) * mask)


class ShowAttendTell(nn.Module):
    """attngraph's soft ShowAttendTell: a = CNN(image) + P, (h_0, c_0) = tanh(f(ā)); each step, an
    ``nn.LSTMCell`` fed [E y_{t−1}; z_t], z_t = σ(f_β(h_{t−1})) Σ_i α_ti a_i, α_t = softmax(vᵀ tanh(W_a a_i + b +
    W_h h_{t−1})); the deep output L_o tanh(E y_{t−1} + L_h h_t + L_z z_t) of all steps at once after the loop.
    Returns the logits (B, T, V) and α (B, T, L)."""

    def __init__(self, vocab: int, image_size: int, channels: tuple, embed_dim: int, hidden: int,
                 attention_dim: int):
        super().__init__()
        first, features = channels
        locations = (image_size // 8) ** 2
        self.encoder = nn.Sequential(nn.Conv2d(3, first, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Conv2d(first, features, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.MaxPool2d(2))
        self.positions = nn.Embedding(locations, features)
        self.init_h, self.init_c = nn.Linear(features, hidden), nn.Linear(features, hidden)
        self.embed = nn.Embedding(vocab, embed_dim)
        self.score = AdditiveScore(hidden, features, attention_dim)
        self.gate = nn.Linear(hidden, 1)
        self.cell = nn.LSTMCell(embed_dim + features, hidden)
        self.out_h = nn.Linear(hidden, embed_dim)
        self.out_z = nn.Linear(features, embed_dim, bias=False)
        self.out = nn.Linear(embed_dim, vocab)

    def forward(self, images, captions_in):
        annotations = self.encoder(images).flatten(2).transpose(1, 2) + self.positions.weight
        mean = annotations.mean(1)
        state = torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))
        keys, embedded = self.score.w_key(annotations), self.embed(captions_in)
        hs, zs, alphas = [], [], []
        for t in range(captions_in.shape[1]):
            alpha = torch.softmax(self.score(state[0], keys), -1)
            z = torch.sigmoid(self.gate(state[0])) * torch.einsum("bl,bld->bd", alpha, annotations)
            state = self.cell(torch.cat([embedded[:, t], z], -1), state)
            hs.append(state[0])
            zs.append(z)
            alphas.append(alpha)
        logits = self.out(torch.tanh(embedded + self.out_h(torch.stack(hs, 1)) + self.out_z(torch.stack(zs, 1))))
        return logits, torch.stack(alphas, 1)


class PointerNetwork(nn.Module):
    """attngraph's PointerNetwork under teacher forcing: the decoder's inputs (start, then the embedded inputs
    in the target order) are known beforehand, so encoder and decoder are each one ``nn.LSTM``, and every
    step's pointer u_ij = vᵀ tanh(W1 e_j + b + W2 d_i) one (B, n, n) tensor; log p over the positions not yet
    pointed at."""

    def __init__(self, embed_dim: int, hidden: int, attention_dim: int):
        super().__init__()
        self.embed = nn.Linear(1, embed_dim)
        self.start = nn.Parameter(torch.empty(embed_dim))
        self.encoder = nn.LSTM(embed_dim, hidden, batch_first=True)
        self.decoder = cells(nn.LSTM(embed_dim, hidden, batch_first=True), "")
        self.pointer = AdditiveScore(hidden, hidden, attention_dim)

    def forward(self, numbers, order):
        z = self.embed(numbers[..., None])
        states, final = self.encoder(z)
        rows = torch.arange(len(z))[:, None]
        inputs = torch.cat([self.start.expand(len(z), 1, -1), z[rows, order[:, :-1]]], 1)
        decoded, _ = self.decoder(inputs, final)
        scores = torch.tanh(self.pointer.w_query(decoded)[:, :, None] + self.pointer.w_key(states)[:, None]) \
            @ self.pointer.v
        chosen = F.one_hot(order, numbers.shape[1])
        pointed = (chosen.cumsum(1) - chosen).bool()
        return torch.log_softmax(scores.masked_fill(pointed, float("-inf")), -1)


def cells(module: nn.RNNBase, *names: str) -> nn.RNNBase:
    """``module`` (an ``nn.GRU`` or ``nn.LSTM``) standing for attngraph's cells ``names``, one per layer (by
    default "cell" for one layer, "cells.0", "cells.1", … for a stack; "" for the cell the module itself is)."""
    module.attngraph_cells = names
    return module


CELL_NAMES = {"weight_ih": "input.weight", "bias_ih": "input.bias", "weight_hh": "hidden.weight",
              "bias_hh": "hidden.bias"}
RECURRENT = (nn.GRUCell, nn.LSTMCell, nn.GRU, nn.LSTM)


def attngraph_name(module: nn.Module, prefix: str, name: str) -> str | None:
    """attngraph's name of ``module``'s parameter ``name`` (``prefix`` the module's path), or None for the
    hidden bias of an LSTM, which attngraph's LSTMCell lacks (its one bias is the input's)."""
    if isinstance(module, (nn.LSTMCell, nn.LSTM)) and name.startswith("bias_hh"):
        return None
    if isinstance(module, nn.RNNBase):
        name, layer = name.rsplit("_l", 1)
        default = ("cell",) if module.num_layers == 1 else tuple(f"cells.{k}" for k in range(module.num_layers))
        prefix = ".".join(part for part in (prefix, getattr(module, "attngraph_cells", default)[int(layer)]) if part)
    return ".".join(part for part in (prefix, CELL_NAMES.get(name, name) if isinstance(module, RECURRENT) else name)
                    if part)


def attngraph_parameters(model: nn.Module):
    """(attngraph's name, parameter, transposed) for each parameter of a model above with a counterpart in
    attngraph's: transposed when attngraph stores it as (in, out) where PyTorch has (out, in) (Linear and
    recurrent weights)."""
    for prefix, module in model.named_modules():
        for name, parameter in module.named_parameters(recurse=False):
            if parameter.requires_grad:
                transposed = isinstance(module, (nn.Linear, *RECURRENT)) and parameter.ndim == 2
                yield attngraph_name(module, prefix, name), parameter, transposed


def load(model: nn.Module, state: dict[str, np.ndarray]) -> nn.Module:
    """``model`` holding the parameters of attngraph's ``state_dict()`` (copies); an LSTM's hidden bias,
    which attngraph's cell lacks, zero and frozen."""
    with torch.no_grad():
        for prefix, module in model.named_modules():
            for name, parameter in module.named_parameters(recurse=False):
                if attngraph_name(module, prefix, name) is None:
                    parameter.zero_().requires_grad_(False)
        for name, parameter, transposed in attngraph_parameters(model):
            parameter.copy_(torch.from_numpy(state[name].T if transposed else state[name]))
    return model


def seq2seq_loss(model, src, tgt_in, tgt_out):
    """Teacher forcing: mean cross-entropy of the non-PAD target tokens (attngraph's ``reversal_loss``)."""
    return F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)


def classification_loss(model, inputs, labels):
    return F.cross_entropy(model(inputs), labels)


def language_model_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD)


def elmo_loss(model, tokens):
    """attngraph's ``bidirectional_loss``: each direction's mean cross-entropy of its next (previous) token."""
    forward_logits, backward_logits = model(tokens)
    return (language_model_loss(forward_logits[:, :-1], tokens[:, 1:])
            + language_model_loss(backward_logits[:, 1:], tokens[:, :-1]))


def show_attend_tell_loss(model, images, captions_in, captions_out):
    """attngraph's soft ``objective``: the words' mean cross-entropy + λ mean_b Σ_i (1 − Σ_t α_ti)² over the
    real words."""
    logits, alpha = model(images, captions_in)
    attended = (alpha * (captions_out != PAD)[..., None]).sum(1)
    return language_model_loss(logits, captions_out) + PENALTY * ((1 - attended) ** 2).sum(-1).mean()


def pointer_loss(model, numbers, order):
    """Teacher forcing: the mean over steps and rows of −log p(C_i = order_i)."""
    return -model(numbers, order).gather(-1, order[..., None]).mean()


REFERENCES = {"seq2seq": (Seq2Seq, seq2seq_loss), "han": (HAN, classification_loss),
              "seq2seq_luong": (LuongSeq2Seq, seq2seq_loss), "lstmn": (LSTMNClassifier, classification_loss),
              "elmo": (ELMo, elmo_loss), "show_attend_tell": (ShowAttendTell, show_attend_tell_loss),
              "pointer": (PointerNetwork, pointer_loss)}


def reference(name: str, sizes: dict, state: dict[str, np.ndarray]):
    """The PyTorch twin of attngraph's model ``name`` (a key of ``REFERENCES``) of ``sizes``, holding the
    parameters of its ``state_dict()``, and the twin's loss, ``loss(model, *batch)``."""
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
