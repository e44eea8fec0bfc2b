"""The losses of torch.nn.functional in one table: each one's value under every reduction against its float64 NumPy
formula (float32 and float64, on every device), its gradient against central differences of that formula (every
device) and gradcheck (CPU); PyTorch 2.13's values and gradients where it makes a choice (BCE at 0 and 1, logits of
±1000, weighted means, label smoothing, probability targets, a zero vector's cosine); 0-d and empty inputs; the
arguments refused while tracing; and the losses exported to ONNX, run by onnxruntime."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DTypeError, ShapeError
from attngraph.inspect.gradcheck import gradcheck
from tests.conftest import run, value_and_grad_on

WEIGHT = np.array([0.5, 2.0, 1.0, 3.0])
POS_WEIGHT = np.array([2.0, 0.5, 3.0, 1.0])


def log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def reduce(losses, reduction, weights=None):
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.mean() if weights is None else losses.sum() / weights.sum()


def class_losses(logits, targets, weight=None):
    """(−w[t]·log softmax[t], w[t]) per row; targets of -100 give (0, 0)."""
    w = np.ones(logits.shape[-1]) if weight is None else weight
    kept = targets != -100
    safe = np.where(kept, targets, 0)
    picked = np.take_along_axis(log_softmax(logits), safe[..., None], -1)[..., 0]
    return np.where(kept, -w[safe] * picked, 0.0), np.where(kept, w[safe], 0.0)


def probabilities(rng, shape):
    return rng.uniform(0.05, 0.95, shape)


def classes(rng, shape):
    return np.where(rng.random(shape[:-1]) < 0.25, -100, rng.integers(0, shape[-1], shape[:-1]))


def smooth_l1(d, beta):
    return np.where(np.abs(d) < beta, 0.5 * d * d / beta, np.abs(d) - 0.5 * beta)


# name: (attngraph's loss of (x, y, reduction), the float64 reference of (x, y, reduction), a target of x's shape)
LOSSES = {
    "binary_cross_entropy": (
        lambda x, y, r: ag.binary_cross_entropy(ag.sigmoid(x), y, WEIGHT, r),
        lambda x, y, r: reduce(-WEIGHT * (y * np.log(sigmoid(x)) + (1 - y) * np.log(1 - sigmoid(x))), r),
        probabilities),
    "binary_cross_entropy_with_logits": (
        lambda x, y, r: ag.binary_cross_entropy_with_logits(x, y, WEIGHT, r, pos_weight=POS_WEIGHT),
        lambda x, y, r: reduce(-WEIGHT * (POS_WEIGHT * y * np.log(sigmoid(x)) + (1 - y) * np.log(sigmoid(-x))), r),
        probabilities),
    "cross_entropy": (
        lambda x, y, r: ag.cross_entropy(x, y, -100, 0.2, weight=WEIGHT, reduction=r),
        lambda x, y, r: reduce(0.8 * class_losses(x, y, WEIGHT)[0] + 0.05 * np.where(
            y != -100, -(WEIGHT * log_softmax(x)).sum(-1), 0), r, class_losses(x, y, WEIGHT)[1]),
        classes),
    "nll_loss": (
        lambda x, y, r: ag.nll_loss(ag.log_softmax(x), y, reduction=r, weight=WEIGHT),
        lambda x, y, r: reduce(*class_losses(x, y, WEIGHT)[:1], r, class_losses(x, y, WEIGHT)[1]),
        classes),
    "kl_div": (
        lambda x, y, r: ag.kl_div(ag.log_softmax(x), y, r),
        lambda x, y, r: reduce(y * (np.log(y) - log_softmax(x)), r),
        probabilities),
    "mse_loss": (ag.mse_loss, lambda x, y, r: reduce((x - y) ** 2, r), probabilities),
    "l1_loss": (ag.l1_loss, lambda x, y, r: reduce(np.abs(x - y), r), probabilities),
    "smooth_l1_loss": (lambda x, y, r: ag.smooth_l1_loss(x, y, r, beta=0.5),
                       lambda x, y, r: reduce(smooth_l1(x - y, 0.5), r), probabilities),
    "huber_loss": (lambda x, y, r: ag.huber_loss(x, y, r, delta=1.5),
                   lambda x, y, r: reduce(1.5 * smooth_l1(x - y, 1.5), r), probabilities),
}
# name: (attngraph's function of (x, y), its float64 reference)
DISTANCES = {
    "cosine_similarity": (lambda x, y: ag.cosine_similarity(x, y, -1),
                          lambda x, y: (x * y).sum(-1) / np.linalg.norm(x, axis=-1) / np.linalg.norm(y, axis=-1)),
    "pairwise_distance": (lambda x, y: ag.pairwise_distance(x, y, 3.0),
                          lambda x, y: (np.abs(x - y + 1e-6) ** 3).sum(-1) ** (1 / 3)),
}
COVERS = set(LOSSES) | set(DISTANCES)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def inputs(name, dtype, shape=(2, 3, 4)):
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(shape)
    target = LOSSES[name][2](rng, shape) if name in LOSSES else rng.standard_normal(shape)
    return x.astype(dtype), (target.astype(dtype) if target.dtype.kind == "f" else target)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", LOSSES)
def test_loss_values_are_the_formula(name, reduction, dtype, device):
    fn, ref, _ = LOSSES[name]
    x, y = inputs(name, dtype)
    got = run(lambda x, y: fn(x, y, reduction), x, y, device=device)
    want = ref(x.astype(np.float64), y.astype(np.float64) if y.dtype.kind == "f" else y, reduction)
    assert got.dtype == dtype and got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 2e-5, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", DISTANCES)
def test_distances_are_the_formula(name, dtype, device):
    fn, ref = DISTANCES[name]
    x, y = inputs(name, dtype)
    got = run(fn, x, y[:1], device=device)          # broadcast over the first axis
    assert got.dtype == dtype and got.shape == (2, 3)
    np.testing.assert_allclose(got, ref(x.astype(np.float64), y[:1].astype(np.float64)),
                               rtol=1e-12 if dtype == np.float64 else 2e-5)


def with_reduction(name):
    if name in DISTANCES:
        fn, ref = DISTANCES[name]
        return (lambda x, y: ag.sum(fn(x, y))), (lambda x, y: ref(x, y).sum())
    fn, ref, _ = LOSSES[name]
    return (lambda x, y: fn(x, y, "mean")), (lambda x, y: ref(x, y, "mean"))


@pytest.mark.parametrize("name", [*LOSSES, *DISTANCES])
def test_gradients_are_the_formula_s_slope(name, device, numeric_grad):
    fn, ref = with_reduction(name)
    x, y = inputs(name, np.float64, (2, 4))
    _, (grad, *_) = value_and_grad_on(device, fn, x, y)
    np.testing.assert_allclose(grad, numeric_grad(lambda x: ref(x, y), x), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", [*LOSSES, *DISTANCES])
def test_gradcheck_in_float64(name):
    fn, _ = with_reduction(name)
    gradcheck(fn, *inputs(name, np.float64, (2, 4))).raise_if_failed()


P, Y = np.array([0.0, 1.0, 0.3, 1e-45, 0.9]), np.array([0.0, 0.5, 1.0, 1.0, 0.2])
LOGITS, BITS = np.array([[-1000.0, 1000.0, 0.0], [3.0, -2.0, 0.5]]), np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 1.0]])
X = np.array([[0.5, -1.0, 2.0, 0.0], [1.5, 0.2, -0.3, 0.8], [-2.0, 1.0, 0.0, 3.0]])
C = np.array([2, 0, -100])
PROBS = np.array([[0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 1.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
LOG_P, LOG_Q = np.log([[0.3, 0.3, 0.4], [0.1, 0.6, 0.3]]), np.log([[0.2, 0.1, 0.7], [0.5, 0.25, 0.25]])
U, V = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [1e-10, 0.0, 0.0]]), np.array([[-1.0, 0.5, 2.0], [1.0, 1.0, 1.0],
                                                                               [1.0, 0.0, 0.0]])
# PyTorch 2.13 in float64: (loss, its inputs, the value, the gradient of its sum with respect to the first input)
PYTORCH = {
    "bce at 0 and 1: log clamped at -100, gradient (x - y)/max(x(1 - x), 1e-12)": (
        lambda p, y: ag.binary_cross_entropy(p, y, reduction="none"), (P, Y),
        [0.0, 50.0, 1.2039728043259361, 100.0, 1.8631401775268022],
        [0.0, 500000001997.9014, -3.333333333333333, -1000000003995.8029, 7.777777777777779]),
    "bce weighted mean": (
        lambda p, y: ag.binary_cross_entropy(p, y, np.array([1.0, 2, 3, 4, 5])), (P, Y), 102.58552386012236,
        [0.0, 200000000799.16058, -2.0, -800000003196.6423, 7.777777777777779]),
    "bce with logits of ±1000 and pos_weight": (
        lambda x, y: ag.binary_cross_entropy_with_logits(x, y, reduction="none", pos_weight=np.array([2.0, 0.5, 3])),
        (LOGITS, BITS), [[2000.0, 1000.0, 1.3862943611198906], [3.048587351573742, 1.0634640055214863,
                                                                1.42223095254032]],
        [[-2.0, 1.0, -0.5], [0.9525741268224334, -0.4403985389889412, -1.132622006394436]]),
    "bce with logits weighted sum": (
        lambda x, y: ag.binary_cross_entropy_with_logits(x, y, np.array([1.0, 2.0, 0.5]), "sum"), (LOGITS, BITS),
        3007.8860554560297, [[-1.0, 2.0, 0.0], [0.9525741268224334, -1.7615941559557649, -0.1887703343990727]]),
    "cross_entropy weighted mean: Σ w[t]·loss / Σ w[t]": (
        lambda x, t: ag.cross_entropy(x, t, -100, weight=WEIGHT), (X, C), 0.448168209730815,
        [[0.10562980634331982, 0.02356919560583258, -0.1932667180758838, 0.06406771612673147],
         [-0.16101603658331037, 0.04696194185405778, 0.028483857574128, 0.0855702371551246], [0.0] * 4]),
    "cross_entropy weighted sum, label smoothing": (
        lambda x, t: ag.cross_entropy(x, t, -100, 0.2, weight=WEIGHT, reduction="sum"), (X, C), 1.8260022418878306,
        [[0.1532502982043522, -0.060226982415157525, -0.05113758675305401, -0.041885729036140656],
         [-0.0502098795687001, 0.0021422235325756897, 0.011952390223728408, 0.036115265812396026], [0.0] * 4]),
    "cross_entropy weighted mean, label smoothing": (
        lambda x, t: ag.cross_entropy(x, t, -100, 0.2, weight=WEIGHT), (X, C), 1.2173348279252203,
        [[0.10216686546956814, -0.04015132161010501, -0.03409172450203593, -0.027923819357427097],
         [-0.03347325304580009, 0.0014281490217171156, 0.007968260149152265, 0.024076843874930667], [0.0] * 4]),
    "cross_entropy none, label smoothing": (
        lambda x, t: ag.cross_entropy(x, t, -100, 0.2, reduction="none"), (X, C),
        [0.6673495823898221, 0.8498054644128008, 0.0],
        [[0.10844470951497974, -0.014646206591251133, -0.1399000771138258, 0.04610157419009721],
         [-0.33304810974993115, 0.09088582556217338, 0.03545157272238402, 0.2067107114653739], [0.0] * 4]),
    "cross_entropy with probability targets": (
        ag.cross_entropy, (X, PROBS), 2.342556803139779,
        [[0.019481569838326586, -0.054882068863750376, 0.13669997429539146, -0.10129947526996759],
         [0.17231729675002294, 0.04696194185405778, -0.3048494757592053, 0.0855702371551246],
         [-0.08144889911259455, -0.045483460213366245, -0.06940914316154985, 0.19634150248751064]]),
    "cross_entropy with probability targets, weight, smoothing": (
        lambda x, p: ag.cross_entropy(x, p, None, 0.1, weight=WEIGHT, reduction="none"), (X, PROBS),
        [4.282705324232484, 2.4835433059386007, 2.6602124642521607],
        [[0.2463177304949737, -0.34220910113872405, 1.0666166021342394, -0.9707252314904888],
         [0.5367613833906981, 0.09969118965980919, -0.834207703982467, 0.19775513093195968],
         [-0.11581338317389846, -0.31548186854016047, -0.1821195729125555, 0.6134148246266145]]),
    "nll_loss weighted mean": (
        lambda x, t: ag.nll_loss(x, t, weight=WEIGHT), (log_softmax(X), C), 0.448168209730815,
        [[0.0, 0.0, -2 / 3, 0.0], [-1 / 3, 0.0, 0.0, 0.0], [0.0] * 4]),
    "nll_loss weighted none": (
        lambda x, t: ag.nll_loss(x, t, reduction="none", weight=WEIGHT), (log_softmax(X), C),
        [0.342349582389822, 0.32990273220640043, 0.0], [[0.0, 0.0, -1.0, 0.0], [-0.5, 0.0, 0.0, 0.0], [0.0] * 4]),
    "kl_div batchmean, a zero target": (
        lambda x, q: ag.kl_div(x, q, "batchmean"), (LOG_P, np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25]])),
        0.506848052753205, [[-0.1, -0.0, -0.4], [-0.25, -0.125, -0.125]]),
    "kl_div mean of log targets": (
        lambda x, q: ag.kl_div(x, q, log_target=True), (LOG_P, LOG_Q), 0.1235080306244064,
        [[-0.03333333333333333, -0.01666666666666667, -0.11666666666666665],
         [-0.08333333333333333, -0.041666666666666664, -0.041666666666666664]]),
    "l1 sum: gradient 0 where equal": (
        lambda a, b: ag.l1_loss(a, b, "sum"), (np.array([0.0, 0.5, -2.0, 3.0, 1.0]), np.array([0.0, 0, 0, 1, 0])),
        5.5, [0.0, 1.0, -1.0, 1.0, 1.0]),
    "smooth_l1 beta 2": (
        lambda a, b: ag.smooth_l1_loss(a, b, "none", beta=2.0),
        (np.array([0.0, 0.5, -2.0, 3.0, 1.0]), np.array([0.0, 0, 0, 1, 0])), [0.0, 0.0625, 1.0, 1.0, 0.25],
        [0.0, 0.25, -1.0, 1.0, 0.5]),
    "smooth_l1 beta 0 is l1": (
        lambda a, b: ag.smooth_l1_loss(a, b, "none", beta=0.0),
        (np.array([0.0, 0.5, -2.0, 3.0, 1.0]), np.array([0.0, 0, 0, 1, 0])), [0.0, 0.5, 2.0, 2.0, 1.0],
        [0.0, 1.0, -1.0, 1.0, 1.0]),
    "huber delta 2": (
        lambda a, b: ag.huber_loss(a, b, "none", delta=2.0),
        (np.array([0.0, 0.5, -2.0, 3.0, 1.0]), np.array([0.0, 0, 0, 1, 0])), [0.0, 0.125, 2.0, 2.0, 0.5],
        [0.0, 0.5, -2.0, 2.0, 1.0]),
    "cosine of a zero and a tiny vector: the clamp passes the norm's gradient": (
        lambda u, v: ag.cosine_similarity(u, v), (U, V), [0.6998542122237652, 0.0, 0.01],
        [[-0.16663195529137267, -0.04165798882284317, 0.08331597764568632],
         [57735026.91896258, 57735026.91896258, 57735026.91896258], [99000000.0, 0.0, 0.0]]),
    "cosine along axis 0, eps 0.5": (
        lambda u, v: ag.cosine_similarity(u, v, 0, 0.5), (U, V),
        [-0.5773502691318908, 0.4472135954999579, 0.8944271909999159],
        [[-5.773503897188448e-11, 0.0, 5.551115123125783e-17], [0.5773502691896258, 0.4472135954999579,
                                                                0.14907119849998599],
         [0.5773502692473609, 0.0, 0.0]]),
    "pairwise_distance p 2": (
        ag.pairwise_distance, (U, V), [2.692584074825334, 1.7320490755180697, 0.9999989999009999],
        [[0.7427812630622272, 0.5570860401442818, 0.3713908172263365], [-0.5773502691896257] * 3,
         [-0.999999999999, 1.0000010001000003e-06, 1.0000010001000003e-06]]),
    "pairwise_distance p 1 keepdim": (
        lambda u, v: ag.pairwise_distance(u, v, 1.0, keepdim=True), (U, V), [[4.500003], [2.999997], [1.0000009999]],
        [[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [-1.0, 1.0, 1.0]]),
    "pairwise_distance p inf: ties share": (
        lambda u, v: ag.pairwise_distance(u, v, np.inf), (U, V), [2.000001, 0.999999, 0.9999989999],
        [[1.0, 0.0, 0.0], [-1 / 3] * 3, [-1.0, 0.0, 0.0]]),
    "pairwise_distance p 3 eps 0": (
        lambda u, v: ag.pairwise_distance(u, v, 3.0, eps=0.0), (U, V),
        [2.3130325045913707, 1.4422495703074083, 0.9999999999],
        [[0.7476468701709483, 0.42055136447115843, 0.18691171754273708], [-0.4807498567691361] * 3,
         [-1.0, 0.0, 0.0]]),
}


@pytest.mark.parametrize("case", PYTORCH)
def test_pytorch_s_values_and_gradients(case, device):
    fn, arrays, value, grad = PYTORCH[case]
    got, (got_grad, *_) = value_and_grad_on(device, lambda *xs: ag.sum(fn(*xs)), *arrays)
    np.testing.assert_allclose(run(fn, *arrays, device=device), value, rtol=1e-9)
    np.testing.assert_allclose(got_grad, grad, rtol=1e-9, atol=1e-15)


def test_cross_entropy_s_plain_case_stays_one_fused_kernel():
    graph = ag.trace(lambda x, t: ag.cross_entropy(x, t), x=ag.Input((4, 5)), t=ag.Input((4,), "int64"))
    assert {n.op for n in graph.nodes if n.kind == "call"} == {"cross_entropy"}


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_0_d_and_empty_inputs_as_torch(name):
    fn, ref, _ = LOSSES[name]
    assert run(lambda x, y: fn(x, y, "none"), np.array(0.5), np.array(2.0)).shape == ()
    np.testing.assert_allclose(run(lambda x, y: fn(x, y, "mean"), np.array(0.5), np.array(2.0)),
                               ref(np.array(0.5), np.array(2.0), "mean"))
    empty = np.zeros((0, 3))
    assert np.isnan(run(lambda x, y: fn(x, y, "mean"), empty, empty))       # torch: nan, 0/0
    assert run(lambda x, y: fn(x, y, "sum"), empty, empty) == 0
    assert run(lambda x, y: fn(x, y, "none"), empty, empty).shape == (0, 3)


def test_a_mean_over_targets_all_ignored_or_of_weight_0_is_0_not_torch_s_nan():
    ignored = np.full(3, -100)
    assert run(lambda x, t: ag.cross_entropy(x, t, -100, weight=WEIGHT), X, ignored) == 0
    assert run(lambda x, t: ag.nll_loss(x, t, weight=np.zeros(4)), X, C) == 0


@pytest.mark.parametrize("build, error, message", [
    (lambda x, t, p: ag.mse_loss(x, p[0]), ShapeError, "target of the input's shape"),
    (lambda x, t, p: ag.l1_loss(x, x.astype("float64")), DTypeError, "one dtype"),
    (lambda x, t, p: ag.mse_loss(x, p, "avg"), ShapeError, "reduction must be"),
    (lambda x, t, p: ag.kl_div(x, p, "batchmean "), ShapeError, "'batchmean'"),
    (lambda x, t, p: ag.smooth_l1_loss(x, p, beta=-1.0), ShapeError, "beta must be a number >= 0"),
    (lambda x, t, p: ag.huber_loss(x, p, delta=0), ShapeError, "delta must be > 0"),
    (lambda x, t, p: ag.binary_cross_entropy(x, p, np.ones(5)), ShapeError, "weight \\(5,\\) does not broadcast"),
    (lambda x, t, p: ag.binary_cross_entropy_with_logits(x, p, pos_weight=np.ones(3)), ShapeError, "pos_weight"),
    (lambda x, t, p: ag.cross_entropy(x, t, weight=np.ones(3)), ShapeError, "one value per class"),
    (lambda x, t, p: ag.cross_entropy(x, p[:, :2]), ShapeError, "probability targets take the logits' shape"),
    (lambda x, t, p: ag.cross_entropy(x, p, -100), ShapeError, "ignore_index applies to class targets"),
    (lambda x, t, p: ag.cross_entropy(x, t, reduction="mean "), ShapeError, "reduction must be"),
    (lambda x, t, p: ag.nll_loss(x, t, np.ones(4)), ShapeError, "pass weight="),
    (lambda x, t, p: ag.nll_loss(x, t.astype("float32")), DTypeError, "class targets must be integers"),
    (lambda x, t, p: ag.pairwise_distance(x, p, p=0), ShapeError, "p must be a number > 0"),
    (lambda x, t, p: ag.pairwise_distance(x[0, 0], p[0, 0]), ShapeError, "not 0-d"),
    (lambda x, t, p: ag.cosine_similarity(x, p[:, :3]), ShapeError, "do not broadcast"),
    (lambda x, t, p: ag.cosine_similarity(x, p, 2), ShapeError, "out of range"),
])
def test_bad_arguments_raise_the_project_s_errors_while_tracing(build, error, message):
    with pytest.raises(error, match=message):
        ag.trace(build, x=ag.Input((3, 4)), t=ag.Input((3,), "int64"), p=ag.Input((3, 4)))


def test_the_losses_export_to_onnx_and_match_in_onnxruntime():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from attngraph.export import to_onnx

    def losses(x, y, t):
        return (*(LOSSES[name][0](x, t if LOSSES[name][2] is classes else y, "none") for name in LOSSES),
                *(fn(x, y) for fn, _ in DISTANCES.values()), ag.cross_entropy(x, y, reduction="sum"),
                ag.kl_div(ag.log_softmax(x), y, "batchmean"))
    x, y = inputs("mse_loss", np.float32, (3, 4))
    t = np.array([1, -100, 3])
    graph = ag.trace(losses, x=x, y=y, t=t)
    session = ort.InferenceSession(to_onnx(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, dict(x=x, y=y, t=t)), graph.compile()(x=x, y=y, t=t)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
