"""Losses with torch.nn.functional's names, arguments and numbers, composed from the functional API (the fused
softmax cross-entropy kernel where it applies). Each takes ``reduction``: "none" (one loss per element), "sum"
or "mean".

The classes of ``cross_entropy`` and ``nll_loss`` are on the last axis of their input, (..., C), as everywhere in
attngraph (torch has them on axis 1: ``moveaxis`` them last). A mean over targets that are all ignored, or of
weight 0, is 0, where torch gives 0/0 = NaN (a batch without a target would poison training).
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from . import tensor as F
from .dims import broadcast, format_shape
from .tracing import user_source

__all__ = [
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cosine_similarity", "pairwise_distance",
]

REDUCTIONS = ("mean", "sum", "none")
BCE_EPS = float(np.float32(1e-12))        # torch's floor of x(1 − x) in binary_cross_entropy's gradient, a float


def _reduction(op: str, reduction, allowed=REDUCTIONS) -> str:
    if reduction not in allowed:
        raise ShapeError(f"{op}: reduction must be {', '.join(map(repr, allowed))}, not {reduction!r} "
                         f"(at {user_source()})")
    return reduction


def _reduce(op: str, losses, reduction: str):
    """The elementwise ``losses`` as ``reduction`` asks: themselves, their sum or their mean."""
    reduction = _reduction(op, reduction)
    return losses if reduction == "none" else F.sum(losses) if reduction == "sum" else F.mean(losses)


def _pair(op: str, input, target):
    """``input`` and ``target`` of one floating-point dtype and one shape, as torch requires of the
    elementwise losses (broadcasting a target is the classic silent bug torch warns about)."""
    a, b = F.as_node(input), F.as_node(target)
    if a.dtype.kind != "f" or b.dtype != a.dtype:
        raise DTypeError(f"{op} takes floating-point input and target of one dtype, got {a.dtype} and {b.dtype} "
                         f"(at {user_source()})")
    if a.shape != b.shape:
        raise ShapeError(f"{op} takes a target of the input's shape, got {format_shape(a.shape)} and "
                         f"{format_shape(b.shape)} (at {user_source()})")
    return input, target


def _broadcast(op: str, name: str, value, like):
    """``value`` (a weight) broadcast to the shape of the tensor ``like``, or a ShapeError naming ``op`` and
    ``name``. Arrays and lists take ``like``'s dtype; a tensor must have it."""
    shape = F.as_node(like).shape
    value = value if isinstance(value, F.Tensor) else np.asarray(value, F.as_node(like).dtype)
    try:
        return F.broadcast_to(value, shape)
    except ShapeError:
        raise ShapeError(f"{op}: {name} {format_shape(F.as_node(value).shape)} does not broadcast to the input "
                         f"{format_shape(shape)} (at {user_source()})") from None


def _weighted(op: str, losses, weight):
    """``losses`` times ``weight``, which broadcasts to their shape (torch's rescaling weight)."""
    return losses if weight is None else losses * _broadcast(op, "weight", weight, losses)


def _with_slope(value, x, slope):
    """``value`` whose gradient with respect to ``x`` is ``slope`` (first order): value + (x − x̄)·s̄, the bars
    stopping the gradient. For a derivative that the composition would give as 0·∞ = NaN."""
    return value + (x - F.stop_gradient(x)) * F.stop_gradient(slope)


def binary_cross_entropy(input, target, weight=None, reduction: str = "mean"):
    """−w·(y·max(log x, −100) + (1 − y)·max(log(1 − x), −100)) for probabilities x in [0, 1], the logs clamped at
    −100 as torch, so that x = 0 or 1 gives 100, not inf. The gradient is torch's w·(x − y)/max(x(1 − x), 10⁻¹²)
    (finite at 0 and 1; 10⁻¹² as a float32) for x, and w·(log(1 − x) − log x) for y, its logs clamped too (torch
    does not clamp these: inf at x = 0). An x outside [0, 1] gives NaN (torch raises)."""
    x, y = _pair("binary_cross_entropy", input, target)
    fixed = F.stop_gradient(x)
    log_x, log_not_x = F.maximum(F.log(fixed), -100.0), F.maximum(F.log1p(-fixed), -100.0)
    slope = (fixed - y) / F.maximum(fixed * (1.0 - fixed), BCE_EPS)
    losses = _with_slope((y - 1.0) * log_not_x - y * log_x, x, slope)
    return _reduce("binary_cross_entropy", _weighted("binary_cross_entropy", losses, weight), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction: str = "mean", pos_weight=None):
    """−w·(p·y·log σ(x) + (1 − y)·log(1 − σ(x))) for logits x, with ``pos_weight`` p broadcast along the last
    (class) axis, as torch: (1 − y)·x − (1 + (p − 1)·y)·log σ(x), log σ computed as min(x, 0) − log(1 + e^−|x|),
    exact for large |x|."""
    x, y = _pair("binary_cross_entropy_with_logits", input, target)
    positive = 1.0 if pos_weight is None else 1.0 + (_broadcast(
        "binary_cross_entropy_with_logits", "pos_weight", pos_weight, x) - 1.0) * y
    losses = (1.0 - y) * x - positive * F.logsigmoid(x)
    return _reduce("binary_cross_entropy_with_logits",
                   _weighted("binary_cross_entropy_with_logits", losses, weight), reduction)


def mse_loss(input, target, reduction: str = "mean"):
    """(x − y)²."""
    x, y = _pair("mse_loss", input, target)
    return _reduce("mse_loss", (x - y) * (x - y), reduction)


def l1_loss(input, target, reduction: str = "mean"):
    """|x − y|; gradient sign(x − y), 0 where x = y (as torch)."""
    x, y = _pair("l1_loss", input, target)
    return _reduce("l1_loss", F.abs(x - y), reduction)


def _quadratic_near_zero(op: str, input, target, reduction: str, width: float, scale: float):
    """½d²·scale/width where |d| < width, else scale·(|d| − ½width), d = x − y; width 0 gives scale·|d|."""
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not width >= 0:
        raise ShapeError(f"{op}: {'beta' if op == 'smooth_l1_loss' else 'delta'} must be a number >= 0, got "
                         f"{width!r} (at {user_source()})")
    x, y = _pair(op, input, target)
    d = x - y
    size = F.abs(d)
    if not width:
        return _reduce(op, size * scale, reduction)
    near = F.less(size, float(width))
    inside = F.where(near, d, 0.0)
    return _reduce(op, F.where(near, inside * inside * (0.5 * scale / width), (size - 0.5 * width) * scale),
                   reduction)


def smooth_l1_loss(input, target, reduction: str = "mean", beta: float = 1.0):
    """½d²/β where |d| < β, else |d| − ½β, d = x − y (Girshick 2015, Fast R-CNN); β = 0 is the L1 loss."""
    return _quadratic_near_zero("smooth_l1_loss", input, target, reduction, beta, 1.0)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0):
    """½d² where |d| < δ, else δ(|d| − ½δ), d = x − y (Huber 1964): δ·smooth_l1_loss with β = δ."""
    if isinstance(delta, (int, float)) and not isinstance(delta, bool) and delta == 0:
        raise ShapeError(f"huber_loss: delta must be > 0, got {delta!r} (at {user_source()})")
    return _quadratic_near_zero("huber_loss", input, target, reduction, delta, delta)


def kl_div(input, target, reduction: str = "mean", log_target: bool = False):
    """Σ y·(log y − x) for log-probabilities x and probabilities y (0 where y = 0), or e^y·(y − x) for
    log-probabilities y with ``log_target``: KL(target ‖ input) as torch.nn.functional.kl_div. "batchmean"
    divides the sum by the first axis's length (the true KL divergence per example); "mean" by the number of
    elements, torch's default."""
    reduction = _reduction("kl_div", reduction, REDUCTIONS + ("batchmean",))
    x, y = _pair("kl_div", input, target)
    if log_target:
        losses = F.exp(y) * (y - x)
    else:
        positive = F.greater(y, 0.0)
        losses = F.where(positive, y * F.log(F.where(positive, y, 1.0)), 0.0) - y * x
    if reduction != "batchmean":
        return _reduce("kl_div", losses, reduction)
    shape = F.as_node(x).shape
    return F.sum(losses) / (F.emit("size", x, axes=(0,), dtype=F.as_node(x).dtype) if shape else 1.0)


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """Σ x̂₁x̂₂ along ``dim`` with x̂ = x / max(‖x‖, ε), each vector normalized on its own (torch's formula since
    1.12; the old one divided by max(‖x₁‖‖x₂‖, ε)). As torch, the clamp stops no gradient: ‖x‖'s derivative
    x/‖x‖ (0 at x = 0) passes even below ε. The operands broadcast; ``dim`` is an axis of their broadcast shape."""
    try:
        shape = broadcast(F.as_node(x1).shape, F.as_node(x2).shape)
    except ValueError as e:
        raise ShapeError(f"cosine_similarity: {e} (at {user_source()})") from None
    x1, x2 = F.broadcast_to(x1, shape), F.broadcast_to(x2, shape)
    return F.sum(_unit(x1, dim, eps) * _unit(x2, dim, eps), dim)


def _unit(x, dim: int, eps: float):
    """x / max(‖x‖, ε) along ``dim``, the max taken without its gradient (torch clamps under no_grad)."""
    norm = _root(F.sum(x * x, dim, keepdims=True), 2.0)
    return x / (norm + F.stop_gradient(F.maximum(norm, float(eps)) - norm))


def _root(total, p: float):
    """total^(1/p) for total ≥ 0, of gradient 0 (not ∞·0) at total = 0, as torch's norms."""
    positive = F.greater(total, 0.0)
    return F.where(positive, F.pow(F.where(positive, total, 1.0), 1.0 / p), 0.0)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """‖x₁ − x₂ + ε‖_p along the last axis (torch.nn.functional.pairwise_distance): (Σ|d|^p)^(1/p) for p > 0,
    the largest |d| for p = inf (its gradient shared among ties). The operands broadcast, and are at least 1-D."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not p > 0:
        raise ShapeError(f"pairwise_distance: p must be a number > 0 (or inf), got {p!r} (at {user_source()})")
    size = F.abs(x1 - x2 + float(eps))
    if not F.as_node(size).shape:
        raise ShapeError(f"pairwise_distance takes vectors (..., D), not 0-d tensors (at {user_source()})")
    if p == np.inf:
        return F.max(size, -1, keepdim)
    return _root(F.sum(size if p == 1 else F.pow(size, float(p)), -1, keepdim), float(p))


def cross_entropy(logits, targets, ignore_index: int | None = None, label_smoothing: float = 0.0, *,
                  weight=None, reduction: str = "mean"):
    """The cross-entropy between softmax(logits) and the targets, logits (..., C). Integer ``targets`` (...) are
    classes: −w[t]·log p[t] each, ``ignore_index`` ones left out (0 under "none"), the mean being Σ w[t]·loss /
    Σ w[t] over the kept targets (torch's weighted mean). Floating ``targets`` (..., C) are probabilities:
    −Σ_c w[c]·y[c]·log p[c] each, the mean over the elements. ``label_smoothing`` ε mixes ε/C of every class into
    the target (Szegedy et al. 2016), as torch: (1 − ε)·(−log p[t]) + ε·mean_c(−w[c]·log p[c]). The plain case
    (class targets, mean, no weight) is one fused kernel."""
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0 <= label_smoothing <= 1:
        raise ShapeError(f"label_smoothing must be a number in [0, 1], got {label_smoothing!r} (at {user_source()})")
    reduction, eps = _reduction("cross_entropy", reduction), float(label_smoothing)
    shape = F.as_node(logits).shape
    if F.as_node(targets).dtype.kind == "f":
        return _cross_entropy_with_probabilities(logits, targets, ignore_index, eps, weight, reduction)
    if weight is None and reduction == "mean":
        loss = F.emit("cross_entropy", logits, targets, ignore_index=ignore_index)
        if not eps:
            return loss
        kept = None if ignore_index is None else F.not_equal(targets, ignore_index)
        return (1 - eps) * loss + eps * _mean_kept(-F.mean(F.log_softmax(logits), -1), kept)
    log_probs = F.log_softmax(logits)
    losses, weights, kept = _class_losses("cross_entropy", log_probs, targets, weight, ignore_index)
    if eps:
        every = -F.sum(_weighted("cross_entropy", log_probs, weight), -1)
        losses = (1 - eps) * losses + (eps / shape[-1]) * (every if kept is None else F.where(kept, every, 0.0))
    return _reduce_weighted(losses, weights, reduction)


def _cross_entropy_with_probabilities(logits, targets, ignore_index, eps, weight, reduction):
    shape = F.as_node(logits).shape
    if F.as_node(targets).shape != shape or F.as_node(targets).dtype != F.as_node(logits).dtype:
        raise ShapeError(f"cross_entropy: probability targets take the logits' shape and dtype, got "
                         f"{format_shape(F.as_node(targets).shape)} {F.as_node(targets).dtype} for "
                         f"{format_shape(shape)} {F.as_node(logits).dtype} (at {user_source()})")
    if ignore_index is not None:
        raise ShapeError(f"cross_entropy: ignore_index applies to class targets, not to probabilities "
                         f"(at {user_source()})")
    if eps:
        targets = targets * (1 - eps) + eps / shape[-1]
    losses = -F.sum(_weighted("cross_entropy", F.log_softmax(logits) * targets, weight), -1)
    return _reduce("cross_entropy", losses, reduction)


def nll_loss(log_probs, targets, ignore_index: int = -100, reduction: str = "mean", *, weight=None):
    """−w[t]·log_probs[..., t] for each target t that is not ``ignore_index`` (0 for those that are), with the
    classes on the last axis of ``log_probs`` (..., C). ``reduction`` "none" gives these losses, "sum" their
    sum, and "mean" Σ w[t]·loss / Σ w[t] over the targets kept (torch's weighted mean; without ``weight`` the
    mean over the kept targets), 0 when none is kept. A target outside [0, C) that is not ignored raises
    BindingError when the graph runs, as torch raises."""
    reduction = _reduction("nll_loss", reduction)
    losses, weights, _ = _class_losses("nll_loss", log_probs, targets, weight, ignore_index)
    return _reduce_weighted(losses, weights, reduction)


def _class_losses(op: str, log_probs, targets, weight, ignore_index):
    """(−w[t]·log_probs[..., t], w[t], kept) per target t, the first two 0 where t is ``ignore_index``; ``kept``
    is None when there is no ``ignore_index``."""
    shape, target_shape = F.as_node(log_probs).shape, F.as_node(targets).shape
    if not shape or target_shape != shape[:-1] or isinstance(shape[-1], str):
        raise ShapeError(f"{op} takes log-probabilities (..., C), C concrete, and targets of their shape without "
                         f"C, got {format_shape(shape)} and {format_shape(target_shape)} (at {user_source()})")
    if F.as_node(targets).dtype.kind not in "iu":
        raise DTypeError(f"{op}: class targets must be integers, not {F.as_node(targets).dtype} (at {user_source()})")
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer))):
        raise ShapeError(f"{op}: ignore_index must be an int, got {ignore_index!r} (torch's third argument is the "
                         f"weight: pass weight=...) (at {user_source()})")
    if weight is not None and F.as_node(weight).shape != shape[-1:]:
        raise ShapeError(f"{op}: weight must have one value per class, shape ({shape[-1]},), got "
                         f"{format_shape(F.as_node(weight).shape)} (at {user_source()})")
    kept = None if ignore_index is None else F.not_equal(targets, ignore_index)
    chosen = F._one_hot(targets if kept is None else F.where(kept, targets, 0), shape[-1], bool)
    if kept is not None:
        chosen = F.logical_and(chosen, F.expand_dims(kept, -1))
    per_class = np.ones(shape[-1], F.as_node(log_probs).dtype) if weight is None else weight
    weights = F.sum(F.where(chosen, _broadcast(op, "weight", per_class, log_probs), 0.0), -1)
    return F.sum(F.where(chosen, -_weighted(op, log_probs, weight), 0.0), -1), weights, kept


def _reduce_weighted(losses, weights, reduction: str):
    """Σ losses / Σ weights for "mean" (0 when the weights add up to 0), else as ``_reduce``."""
    if reduction != "mean":
        return _reduce("nll_loss", losses, reduction)
    total = F.sum(weights)
    return F.sum(losses) / F.where(F.equal(total, 0.0), 1.0, total)


def _mean_kept(values, kept):
    """The mean of ``values`` where ``kept`` is True (everywhere when None); 0 when nothing is kept."""
    if kept is None:
        return F.mean(values)
    dtype = F.as_node(values).dtype
    return F.sum(F.where(kept, values, F.zeros_like(values))) / F.maximum(F.sum(kept.astype(dtype)), 1.0)
