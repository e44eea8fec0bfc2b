"""Hugging Face checkpoints in: GPT-2, BERT and ViT weights as attngraph's ``GPT``, ``BERT`` and ``ViT``.

``load(folder)`` reads what transformers' ``save_pretrained`` writes — ``config.json`` and ``model.safetensors``
(or the shards that ``model.safetensors.index.json`` lists) — through safetensors' NumPy API, so PyTorch is not
needed; builds the model that the config describes (sizes, layers, heads, vocabulary, positions, LayerNorm ε,
GELU variant) and maps every weight onto it:

    GPT-2  GPT2LMHeadModel, GPT2Model          → GPT. Its Conv1D weights are (in, out), attngraph's layout;
                                                  c_attn's (d, 3d) splits into w_q, w_k, w_v.
    BERT   BertForMaskedLM, BertForPreTraining → BERT with segments = type_vocab_size (token types). The
                                                  pooler and the next-sentence head have no counterpart and
                                                  are skipped.
    ViT    ViTForImageClassification           → ViT. The patch-embedding convolution (d, C, p, p), stride p,
                                                  is a product with the flattened patches: its kernel becomes
                                                  the (C·p², d) matrix of ``patch_embed``.

``load`` also takes a model id ("gpt2", "google/vit-base-patch16-224") that is already in the standard Hugging Face
cache, as ``from_pretrained`` left it: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``, whose ``models--org--name/snapshots/<revision>/`` holds the files of the revision
that ``refs/main`` names. Nothing is downloaded: an id in neither place raises ``CheckpointError`` naming where
it looked.

torch.nn.Linear weights (out, in) are transposed to attngraph's (in, out); float16 and float64 become float32.
Two tensors that name one weight (BERT's legacy ``LayerNorm.gamma`` beside ``LayerNorm.weight``) are refused.
The model comes back in eval mode, with the config's residual dropout rate (GPT-2's resid_pdrop, BERT's and
ViT's hidden_dropout_prob) as its one dropout rate. A missing or unreadable file, a setting attngraph's model
does not have (named with its value), and a weight that is missing, unknown or of the wrong shape raise
``CheckpointError``; nothing is half-loaded.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import CheckpointError
from ..nn import Module
from .bert import BERT
from .gpt import GPT
from .vit import ViT

GELU_OF = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}  # HF → approximate

LEGACY = {"gamma": "weight", "beta": "bias"}           # BERT's LayerNorm parameters in older checkpoints

# attngraph name → (checkpoint name, conversion or None)
Mapping = dict[str, tuple[str, Callable[[np.ndarray], np.ndarray] | None]]


class Config:
    """config.json's settings with the architecture's defaults for those it may leave out."""

    def __init__(self, values: dict, defaults: dict):
        self.values, self.defaults = values, defaults

    def __getitem__(self, field: str):
        if field in self.values:
            return self.values[field]
        if field in self.defaults:
            return self.defaults[field]
        raise CheckpointError(f"config.json has no {field!r}: save the model again with save_pretrained")

    def require(self, **supported) -> None:
        """Refuse a setting that attngraph's model does not have: each field's value must be the one given."""
        for field, value in supported.items():
            if self.values.get(field, value) != value:
                raise CheckpointError(f"config.json sets {field}={self.values[field]!r}, which attngraph's "
                                      f"{self.values['model_type']} import does not support (only {value!r})")

    def gelu(self, field: str) -> str:
        """The ``approximate`` of the GELU that ``field`` names."""
        if self[field] not in GELU_OF:
            raise CheckpointError(f"config.json sets {field}={self[field]!r}; attngraph's models use GELU: "
                                  f"one of {', '.join(map(repr, GELU_OF))}")
        return GELU_OF[self[field]]


def built(model: type[Module], **settings) -> Module:
    """``model(**settings)``, a setting it refuses raised as ``CheckpointError``."""
    try:
        return model(**settings)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"config.json does not fit attngraph's {model.__name__}: {e}") from None


def pair(ours: str, theirs: str, weight: Callable | None = None, bias: Callable | None = None) -> Mapping:
    """``ours``.weight ← weight(``theirs``.weight), ``ours``.bias ← bias(``theirs``.bias)."""
    return {f"{ours}.weight": (f"{theirs}.weight", weight), f"{ours}.bias": (f"{theirs}.bias", bias)}


def third(j: int) -> Callable[[np.ndarray], np.ndarray]:
    """The j-th third of an array's last axis: GPT-2's c_attn holds the q, k and v projections side by side."""
    return lambda a: np.split(a, 3, axis=-1)[j]


def encoder_layers(encoder, ours: str, theirs: str, sublayers: dict[str, str], weight: Callable | None) -> Mapping:
    """Every layer i of ``encoder`` (scope ``ours``.layers.i) from ``theirs``.i: each sub-module (self_attn.w_q,
    ..., self_attn_norm, ffn.first, ffn.last, ffn_norm) from the one that ``sublayers`` names, the weights of
    the linear maps converted by ``weight``."""
    ffn = {"ffn.first": "ffn.0", "ffn.last": f"ffn.{len(encoder.layers[0].ffn) - 1}"}
    mapping = {}
    for i in range(len(encoder.layers)):
        for name, their_name in sublayers.items():
            mapping |= pair(f"{ours}.layers.{i}.{ffn.get(name, name)}", f"{theirs}.{i}.{their_name}",
                            None if name.endswith("norm") else weight)
    return mapping


def gpt2(config: Config) -> tuple[GPT, Mapping, str]:
    """GPT-2: pre-norm, causal, tanh GELU ("gelu_new"), the output map tied to the token embedding unless
    tie_word_embeddings is false (then lm_head)."""
    config.require(scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False, add_cross_attention=False)
    d = config["n_embd"]
    model = built(GPT, vocab=config["vocab_size"], d_model=d, heads=config["n_head"], layers=config["n_layer"],
                  d_ff=config["n_inner"] or 4 * d, max_length=config["n_positions"], dropout=config["resid_pdrop"],
                  tie_weights=config["tie_word_embeddings"], gelu=config.gelu("activation_function"),
                  layer_norm_eps=config["layer_norm_epsilon"])
    mapping = {"token_embed.weight": ("wte.weight", None), "positions.weight": ("wpe.weight", None),
               **pair("transformer.norm", "ln_f"),
               **encoder_layers(model.transformer, "transformer", "h", {
                   "self_attn.w_o": "attn.c_proj", "self_attn_norm": "ln_1", "ffn.first": "mlp.c_fc",
                   "ffn.last": "mlp.c_proj", "ffn_norm": "ln_2"}, weight=None)}
    for i in range(len(model.transformer.layers)):
        for j, projection in enumerate(("w_q", "w_k", "w_v")):
            mapping |= pair(f"transformer.layers.{i}.self_attn.{projection}", f"h.{i}.attn.c_attn", third(j), third(j))
    skipped = r"h\.\d+\.attn\.(masked_)?bias"                # the causal-mask buffers of older checkpoints
    if model.out is None:
        return model, mapping, skipped + r"|lm_head\.weight"     # a copy of the tied token embedding
    return model, mapping | {"out.weight": ("lm_head.weight", np.transpose)}, skipped


def bert(config: Config) -> tuple[BERT, Mapping, str]:
    """BERT with its masked-LM head; the mask comes from the tokens (``PAD`` = 0, BERT's pad_token_id)."""
    config.require(pad_token_id=0, position_embedding_type="absolute", is_decoder=False, add_cross_attention=False,
                   tie_word_embeddings=True)
    model = built(BERT, vocab=config["vocab_size"], d_model=config["hidden_size"], heads=config["num_attention_heads"],
                  layers=config["num_hidden_layers"], d_ff=config["intermediate_size"],
                  max_length=config["max_position_embeddings"], dropout=config["hidden_dropout_prob"],
                  segments=config["type_vocab_size"], gelu=config.gelu("hidden_act"),
                  layer_norm_eps=config["layer_norm_eps"])
    mapping = {"token_embed.weight": ("embeddings.word_embeddings.weight", None),
               "segment_embed.weight": ("embeddings.token_type_embeddings.weight", None),
               "positions.weight": ("embeddings.position_embeddings.weight", None),
               **pair("embed_norm", "embeddings.LayerNorm"),
               **encoder_layers(model.encoder, "encoder", "encoder.layer", {
                   "self_attn.w_q": "attention.self.query", "self_attn.w_k": "attention.self.key",
                   "self_attn.w_v": "attention.self.value", "self_attn.w_o": "attention.output.dense",
                   "self_attn_norm": "attention.output.LayerNorm", "ffn.first": "intermediate.dense",
                   "ffn.last": "output.dense", "ffn_norm": "output.LayerNorm"}, weight=np.transpose),
               **pair("transform", "cls.predictions.transform.dense", np.transpose),
               **pair("transform_norm", "cls.predictions.transform.LayerNorm"),
               "out_bias": ("cls.predictions.bias", None)}
    return model, mapping, (r"embeddings\.position_ids|pooler\..*|cls\.seq_relationship\..*"   # a buffer, unused heads
                            r"|cls\.predictions\.decoder\..*")                                # tied copies


def vit(config: Config) -> tuple[ViT, Mapping, str]:
    """ViT for image classification: square images, one class per entry of id2label."""
    config.require(qkv_bias=True)
    d = config["hidden_size"]
    model = built(ViT, image_size=config["image_size"], patch_size=config["patch_size"],
                  channels=config["num_channels"], classes=len(config["id2label"]), d_model=d,
                  heads=config["num_attention_heads"], layers=config["num_hidden_layers"],
                  d_ff=config["intermediate_size"], dropout=config["hidden_dropout_prob"],
                  gelu=config.gelu("hidden_act"), layer_norm_eps=config["layer_norm_eps"])
    mapping = {"class_token": ("embeddings.cls_token", None),
               "positions.weight": ("embeddings.position_embeddings", lambda a: a[0]),
               **pair("patch_embed", "embeddings.patch_embeddings.projection", lambda a: a.reshape(d, -1).T),
               **encoder_layers(model.encoder, "encoder", "encoder.layer", {
                   "self_attn.w_q": "attention.attention.query", "self_attn.w_k": "attention.attention.key",
                   "self_attn.w_v": "attention.attention.value", "self_attn.w_o": "attention.output.dense",
                   "self_attn_norm": "layernorm_before", "ffn.first": "intermediate.dense",
                   "ffn.last": "output.dense", "ffn_norm": "layernorm_after"}, weight=np.transpose),
               **pair("encoder.norm", "layernorm"), **pair("head", "classifier", np.transpose)}
    return model, mapping, r"pooler\..*"


# model_type → (the base model's prefix in the checkpoint, config defaults as transformers', the import)
ARCHITECTURES = {
    "gpt2": ("transformer.", dict(n_inner=None, resid_pdrop=0.1, tie_word_embeddings=True,
                                  activation_function="gelu_new", layer_norm_epsilon=1e-5), gpt2),
    "bert": ("bert.", dict(hidden_dropout_prob=0.1, type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12), bert),
    "vit": ("vit.", dict(hidden_dropout_prob=0.0, hidden_act="gelu", layer_norm_eps=1e-12,
                         id2label={0: "LABEL_0", 1: "LABEL_1"}), vit),
}


def load(folder) -> GPT | BERT | ViT:
    """The attngraph model of the Hugging Face checkpoint in ``folder`` (``save_pretrained``'s output, or a model
    id in the Hugging Face cache), in eval mode, its weights mapped as the module docstring says."""
    folder = located(folder)
    values = read_config(folder)
    if values.get("model_type") not in ARCHITECTURES:
        raise CheckpointError(f"{folder / 'config.json'} has model_type {values.get('model_type')!r}; attngraph "
                              f"imports {', '.join(map(repr, ARCHITECTURES))}")
    prefix, defaults, architecture = ARCHITECTURES[values["model_type"]]
    model, mapping, skipped = architecture(Config(values, defaults))
    tensors, sources = {}, {}
    for name, array in read_tensors(folder).items():
        ours = renamed(name, prefix)
        if ours in sources:
            raise CheckpointError(f"the checkpoint holds both {sources[ours]} and {name}, two values of one weight: "
                                  "keep one of them")
        tensors[ours], sources[ours] = array, name
    model.load_state_dict(mapped(tensors, mapping, skipped))
    return model.eval()


def located(folder) -> Path:
    """``folder`` if it is one, else the snapshot of model id ``folder`` in the Hugging Face cache (module
    docstring); ``CheckpointError`` naming both places when neither holds it."""
    path = Path(folder)
    if path.is_dir():
        return path
    model_id = str(folder)
    hub = hub_cache()
    repository = hub / f"models--{model_id.replace('/', '--')}"
    snapshots = repository / "snapshots"
    ref = repository / "refs" / "main"
    revision = ref.read_text().strip() if ref.is_file() else None
    found = sorted(snapshots.iterdir()) if snapshots.is_dir() else []
    if revision is not None and (snapshots / revision).is_dir():
        return snapshots / revision
    if revision is None and len(found) == 1:
        return found[0]
    raise CheckpointError(
        f"no folder {path} and no model {model_id!r} in the Hugging Face cache (looked in {repository}"
        + (f": refs/main names {revision}, which snapshots/ lacks" if revision else
           f": {len(found)} snapshots and no refs/main" if found else "") + "); attngraph does not download: "
        "give the folder that save_pretrained wrote, or fetch the model once with transformers or huggingface-cli")


def hub_cache() -> Path:
    """The Hugging Face hub cache, as huggingface_hub finds it: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub`` or ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return Path(home).expanduser() / "hub"


def renamed(name: str, prefix: str) -> str:
    """A checkpoint's tensor name without the base model's ``prefix``, BERT's old LayerNorm names as today's."""
    return re.sub(r"LayerNorm\.(gamma|beta)$", lambda m: "LayerNorm." + LEGACY[m[1]], name.removeprefix(prefix))


def mapped(tensors: dict[str, np.ndarray], mapping: Mapping, skipped: str) -> dict[str, np.ndarray]:
    """attngraph's state dict from the checkpoint's ``tensors``: every name ``mapping`` needs must be there, and
    every tensor used or matched by the pattern ``skipped`` (buffers, tied copies, heads without counterpart)."""
    used = {theirs for theirs, _ in mapping.values()}
    if missing := sorted(used - tensors.keys()):
        raise CheckpointError(f"the checkpoint lacks {listed(missing)}: save the model with its head "
                              "(GPT2LMHeadModel, BertForMaskedLM, ViTForImageClassification)")
    if unknown := sorted(name for name in tensors.keys() - used if not re.fullmatch(skipped, name)):
        raise CheckpointError(f"the checkpoint holds {listed(unknown)}, which attngraph's model has no place for: "
                              "is it the architecture that config.json names?")
    return {ours: converted(tensors[theirs], convert, f"{theirs} (for {ours})")
            for ours, (theirs, convert) in mapping.items()}


def converted(array: np.ndarray, convert: Callable | None, what: str) -> np.ndarray:
    """``convert(array)`` as a contiguous float32 array; a shape it cannot take raises ``CheckpointError``."""
    try:
        return np.ascontiguousarray(array if convert is None else convert(array), np.float32)
    except (ValueError, IndexError) as e:
        raise CheckpointError(f"the checkpoint's {what} has shape {array.shape}, which does not fit: {e}") from None


def listed(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def read_config(folder: Path) -> dict:
    """config.json of ``folder``, a JSON object."""
    try:
        values = json.loads((folder / "config.json").read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{folder} holds no config.json: give the folder that save_pretrained wrote") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"cannot read {folder / 'config.json'}: {e}") from None
    if not isinstance(values, dict):
        raise CheckpointError(f"{folder / 'config.json'} is not a JSON object of settings")
    return values


def read_tensors(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of ``folder``'s model.safetensors, or of the shards its model.safetensors.index.json lists."""
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
    except ImportError:
        raise CheckpointError("importing Hugging Face weights needs safetensors: pip install 'attngraph[hf]'") from None
    index = folder / "model.safetensors.index.json"
    try:
        files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else [
            "model.safetensors"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, AttributeError, TypeError) as e:
        raise CheckpointError(f"cannot read {index}: {e}") from None
    tensors = {}
    for name in files:
        path = folder / name
        if not path.is_file():
            hint = " (pytorch_model.bin is not read: save with safe_serialization=True)" if (
                folder / "pytorch_model.bin").exists() else ""
            raise CheckpointError(f"{folder} holds no {name}{hint}")
        try:
            tensors |= load_file(path)
        except TypeError as e:              # NumPy has no bfloat16
            raise CheckpointError(f"cannot read {path} with NumPy ({e}): save the model in float32") from None
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"cannot read {path}: {e}") from None
    return tensors
