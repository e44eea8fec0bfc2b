"""Show, Attend and Tell (Xu et al. 2015) and its synthetic captioning task: the decoder against a NumPy
reference of the paper's equations (soft and hard), the doubly stochastic penalty, the gating scalar, the
sign of the REINFORCE gradient, greedy decoding, and learning."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DataError, ShapeError
from attngraph.models import captions
from attngraph.models import show_attend_tell as sat
from attngraph.models.tokens import EOS, PAD
from attngraph.train import Adam

TINY = dict(channels=(4, 8), embed_dim=8, hidden=8, attention_dim=8)
BATCH = 4


def model_and_batch(hard=False, seed=0):
    model = sat.ShowAttendTell(hard=hard, rng=np.random.default_rng(seed), **TINY)
    return model, sat.batch(model, np.random.default_rng(seed), BATCH)


def run(fn, **inputs):
    return ag.trace(fn, **inputs).compile()(**inputs)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference(model, annotations, captions_in, noise=None):
    """The decoder's equations (module docstring) in NumPy: logits, α, β and the hard model's locations."""
    p = {name: value.data.astype(np.float64) for name, value in model.named_parameters()}
    a = annotations.astype(np.float64)
    mean = a.mean(1)
    h, c = np.tanh(mean @ p["init_h.weight"] + p["init_h.bias"]), np.tanh(mean @ p["init_c.weight"] + p["init_c.bias"])
    projected = a @ p["score.w_key.weight"] + p["score.w_key.bias"]                    # W_a a_i + b
    logits, alphas, betas, locations = [], [], [], []
    for t in range(captions_in.shape[1]):
        e = np.tanh(projected + (h @ p["score.w_query.weight"])[:, None]) @ p["score.v"]    # (B, L)
        alpha = softmax(e)
        beta = sigmoid(h @ p["gate.weight"] + p["gate.bias"])                        # (B, 1)
        if noise is None:
            read = alpha
        else:
            chosen = np.argmax(e + noise[:, t], -1)
            read = np.eye(a.shape[1])[chosen]
            locations.append(chosen)
        z = beta * np.einsum("bl,bld->bd", read, a)
        y = p["embed.weight"][captions_in[:, t]]
        gates = np.concatenate([y, z], -1) @ p["cell.input.weight"] + p["cell.input.bias"] + h @ p["cell.hidden.weight"]
        i, f, g, o = np.split(gates, 4, -1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        deep = np.tanh(y + h @ p["out_h.weight"] + p["out_h.bias"] + z @ p["out_z.weight"])
        logits.append(deep @ p["out.weight"] + p["out.bias"])
        alphas.append(alpha)
        betas.append(beta[:, 0])
    return (np.stack(logits, 1), np.stack(alphas, 1), np.stack(betas, 1),
            np.stack(locations, 1) if locations else None)


def decoding(model, batch):
    noise = {"noise": batch["noise"]} if model.hard else {}
    return run(lambda images, captions_in, **n: tuple(x for x in model.decode(images, captions_in, **n) if x is not None),
               images=batch["images"], captions_in=batch["captions_in"], **noise)


# the task

def test_pictures_and_captions_are_deterministic_and_name_each_shape_in_reading_order():
    images, tokens = captions.sample(np.random.default_rng(3), 16)
    again, same = captions.sample(np.random.default_rng(3), 16)
    assert np.array_equal(images, again) and np.array_equal(tokens, same)
    assert images.shape == (16, 3, 24, 24) and images.dtype == np.float32 and tokens.shape == (16, 10)
    for image, caption in zip(images, tokens):
        words = captions.decode(caption).split()
        assert words[-1] == "</s>" and len(words) % 3 == 1
        cells = [captions.PLACES.index(w) for w in words[2::3]]
        assert cells == sorted(set(cells))                              # reading order, distinct cells
        blocks = image.reshape(3, 3, 8, 3, 8).transpose(1, 3, 0, 2, 4).reshape(9, 3, 64)     # cell, RGB, pixel
        assert [cell for cell in range(9) if blocks[cell].any()] == cells
        for colour, cell in zip(words[0::3], cells):
            lit = blocks[cell][:, blocks[cell].any(0)]
            assert np.allclose(lit, np.array(captions.COLOURS[colour], np.float32)[:, None])


def test_teacher_forcing_shifts_the_caption_behind_bos():
    batch = captions.batch(np.random.default_rng(0), 5)
    assert np.array_equal(batch["captions_in"][:, 1:], batch["captions_out"][:, :-1])
    assert (batch["captions_in"][:, 0] == 1).all()
    assert ((batch["captions_out"] == EOS).sum(1) == 1).all()


@pytest.mark.parametrize("options", [dict(grid=4), dict(image_size=25), dict(image_size=12)])
def test_a_board_the_captions_cannot_name_is_refused(options):
    with pytest.raises(DataError, match="grid|image_size"):
        captions.sample(np.random.default_rng(0), 2, **options)


# the model

@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
def test_the_decoder_follows_the_papers_equations(hard):
    """Logits, α (summing to 1 over the locations), β and, for the hard model, the locations argmax(e + g)
    drawn by the Gumbel-max trick, as a float64 NumPy transcription of the equations computes them."""
    model, batch = model_and_batch(hard)
    annotations = run(model.encode, images=batch["images"])
    assert annotations.shape == (BATCH, model.locations, 8) and model.locations == 9
    logits, alpha, beta, *locations = decoding(model, batch)
    want = reference(model, annotations, batch["captions_in"], batch.get("noise"))
    np.testing.assert_allclose(alpha.sum(-1), 1, atol=1e-6)
    for got, expected in zip([logits, alpha, beta, *locations], want):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert ((0 < beta) & (beta < 1)).all()


@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
def test_teacher_forcing_is_one_scan_for_any_caption_length(hard):
    """The decoder traces one scan with T symbolic, and gives what a concrete T gives."""
    model, batch = model_and_batch(hard)
    noise = {"noise": ag.Input(("B", "T", model.locations))} if hard else {}
    graph = ag.trace(lambda images, captions_in, **n: tuple(x for x in model.decode(images, captions_in, **n)
                                                            if x is not None),
                     images=ag.Input(("B", 3, 24, 24)), captions_in=ag.Input(("B", "T"), "int64"), **noise)
    assert sum(node.op == "scan" for node in graph.nodes) == 1
    for length in (batch["captions_in"].shape[1], 3):
        short = {"images": batch["images"], "captions_in": batch["captions_in"][:, :length],
                 **({"noise": batch["noise"][:, :length]} if hard else {})}
        for got, expected in zip(graph.compile()(**short), decoding(model, short)):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_the_gating_scalar_scales_the_context():
    """β = σ(f_β(h)): with f_β's weights at 0, β = σ(bias) at every step; a closed gate (β → 0) leaves the
    words blind to the attended picture, while the initial state still sees it."""
    model, batch = model_and_batch()
    model.gate.weight.data[:] = 0
    model.gate.bias.data[:] = 0.7
    assert np.allclose(decoding(model, batch)[2], sigmoid(0.7))
    model.gate.bias.data[:] = -80
    model.init_h.weight.data[:] = model.init_c.weight.data[:] = 0
    other = {**batch, "images": batch["images"][::-1].copy()}
    assert np.allclose(decoding(model, batch)[0], decoding(model, other)[0], atol=1e-6)
    model.gate.bias.data[:] = 0
    assert not np.allclose(decoding(model, batch)[0], decoding(model, other)[0], atol=1e-3)


def test_the_doubly_stochastic_penalty_is_its_formula():
    """mean over the batch of Σ_i (1 − Σ_t α_ti)², over the real words only."""
    rng = np.random.default_rng(1)
    alpha = softmax(rng.standard_normal((3, 5, 9)))
    real = np.arange(5) < np.array([[5], [2], [4]])
    got = run(sat.doubly_stochastic_penalty, alpha=alpha, real=real)
    want = np.mean(np.sum((1 - np.sum(alpha * real[..., None], 1)) ** 2, -1))
    assert got == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
def test_the_loss_is_the_caption_cross_entropy_plus_the_penalty(hard):
    """For both models the value is CE + λ·penalty: the hard model's REINFORCE surrogate adds 0 to it, and its
    reward is the mean log-likelihood of the captions."""
    model, batch = model_and_batch(hard)
    result = run(lambda **b: sat.objective(model, **b, penalty=0.5), **batch)
    loss, *reward = result if hard else (result,)
    logits, alpha = decoding(model, batch)[:2]
    real = batch["captions_out"] != PAD
    log_p = np.log(softmax(logits.astype(np.float64)))
    picked = np.take_along_axis(log_p, batch["captions_out"][..., None], -1)[..., 0]
    penalty = np.mean(np.sum((1 - np.sum(alpha * real[..., None], 1)) ** 2, -1))
    assert loss == pytest.approx(-picked[real].mean() + 0.5 * penalty, rel=1e-5)
    if hard:
        assert reward[0] == pytest.approx(np.mean(np.sum(picked * real, 1)), rel=1e-5)


@pytest.mark.parametrize("baseline, sign", [(-1e3, 1), (1e3, -1)], ids=["reward-above-baseline",
                                                                     "reward-below-baseline"])
def test_reinforce_makes_the_sampled_locations_likelier_when_the_reward_beats_the_baseline(baseline, sign):
    """A small step down the hard model's gradient raises log α of the sampled locations when R > b and
    lowers it when R < b (the samples, drawn from the same noise, are kept)."""
    model, batch = model_and_batch(hard=True)
    batch["baseline"] = np.float32(baseline)
    loss = ag.trace(lambda **b: sat.objective(model, **b, entropy=0.0)["loss"], **batch)
    step = loss.grad().compile()

    def sampled_log_alpha():
        _, alpha, _, locations = decoding(model, batch)
        return np.log(np.take_along_axis(alpha, locations[..., None], -1)).mean(), locations

    before, locations = sampled_log_alpha()
    _, *grads = step(**batch)
    for node, grad in zip(loss.parameters.values(), grads):
        node.value.data -= 1e-6 * grad
    after, same = sampled_log_alpha()
    assert np.array_equal(locations, same)
    assert sign * (after - before) > 0


def test_the_registered_hard_loss_has_the_gradient_finite_differences_see():
    """Without REINFORCE's estimate (no derivative of the loss's value), the hard model's registered loss is
    checkable: the gradient of the attention's v (reached through the penalty) matches central differences."""
    model = sat.ShowAttendTell(hard=True, rng=np.random.default_rng(0), **TINY).astype(np.float64)
    batch = {k: v.astype(np.float64) if v.dtype.kind == "f" else v
             for k, v in sat.batch(model, np.random.default_rng(0), 2).items()}
    loss = ag.trace(lambda **b: ag.models.spec("show-attend-tell-hard").loss(model, **b), **batch)
    step, value = loss.grad().compile(), loss.compile()
    v = model.score.v.data
    _, *grads = step(**batch)
    grad = next(g for node, g in zip(loss.parameters.values(), grads) if node.value is model.score.v)
    numeric = np.zeros_like(v)
    for i in range(len(v)):
        v[i] += 1e-6
        up = float(value(**batch))
        v[i] -= 2e-6
        numeric[i] = (up - float(value(**batch))) / 2e-6
        v[i] += 1e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-8)
    assert np.abs(grad).max() > 1e-6


def test_greedy_decoding_attends_as_teacher_forcing_does_on_its_own_words():
    model, batch = model_and_batch()
    tokens, alpha = model.greedy_decode(batch["images"], 10)
    assert tokens.shape[0] == BATCH and alpha.shape == (BATCH, tokens.shape[1], 9)
    fed = np.concatenate([np.full((BATCH, 1), 1), tokens[:, :-1]], 1)
    logits, forced = decoding(model, {**batch, "captions_in": fed})[:2]
    np.testing.assert_allclose(forced, alpha, atol=1e-5)
    assert np.array_equal(logits.argmax(-1)[:, 0], tokens[:, 0])


@pytest.mark.parametrize("shape", [(2, 3, 16, 16), (2, 1, 24, 24), (3, 24, 24)])
def test_pictures_of_the_wrong_shape_are_refused(shape):
    model = sat.ShowAttendTell(**TINY)
    with pytest.raises(ShapeError, match="images must be"):
        ag.trace(model.encode, images=ag.Input(shape))


def test_an_image_size_the_poolings_cannot_divide_is_refused():
    with pytest.raises(ValueError, match="image_size"):
        sat.ShowAttendTell(image_size=20, **TINY)


def test_the_soft_model_learns_to_caption_a_batch():
    """80 Adam steps on 8 pictures: the loss falls below a fifth, and greedy decoding puts most of the batch's
    words in place."""
    model = sat.ShowAttendTell(rng=np.random.default_rng(0), **{**TINY, "channels": (8, 16), "hidden": 32})
    batch = captions.batch(np.random.default_rng(0), 8)
    loss = ag.trace(lambda **b: sat.objective(model, **b)["loss"], **batch)
    step = loss.grad().compile()
    optimizer = Adam([node.value for node in loss.parameters.values()], lr=2e-2)
    losses = []
    for _ in range(80):
        value, *grads = step(**batch)
        optimizer.step(grads)
        losses.append(float(value))
    assert losses[-1] < 0.2 * losses[0]
    tokens, _ = model.greedy_decode(batch["images"], 10)
    real = batch["captions_out"][:, :tokens.shape[1]] != PAD
    assert np.mean((tokens == batch["captions_out"][:, :tokens.shape[1]])[real]) > 0.75
