"""The benchmarks' PyTorch and JAX models compute the function of the attngraph model they are timed against:
loaded with its parameters, the same loss and the same gradients of every parameter, padding included; GPT's
four programs (attngraph's module and functional forms, nanoGPT in PyTorch, eager and through torch.func, and in
JAX) from the same weights. Skipped where PyTorch or JAX is not installed (the ``bench`` extra)."""
import os
from functools import partial
from types import MethodType

import numpy as np
import pytest

import attngraph as ag
from attngraph.models import tasks
from attngraph.models import captions
from attngraph.models.elmo import ELMo, bidirectional_loss
from attngraph.models.han import HAN
from attngraph.models.lstmn import LSTMNClassifier
from attngraph.models.pointer import PointerNetwork
from attngraph.models.pointer import pointer_loss as attngraph_pointer_loss
from attngraph.models.seq2seq import BahdanauSeq2Seq, LuongSeq2Seq
from attngraph.models.show_attend_tell import ShowAttendTell, objective
from attngraph.models.tokens import PAD

# XLA's backend optimizations take half of the seconds JAX's side needs here (compiling) and change results
# only by rounding; this takes effect only where no other test has loaded JAX before.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

SEQ2SEQ = dict(vocab=10, embed_dim=8, hidden=12)
HAN_SIZES = dict(vocab=10, embed_dim=8, word_hidden=6, sentence_hidden=8, attention_dim=8, classes=3)


def seq2seq(rng):
    model = BahdanauSeq2Seq(SEQ2SEQ["vocab"], SEQ2SEQ["vocab"], SEQ2SEQ["embed_dim"], SEQ2SEQ["hidden"], rng=rng)
    batch = tasks.reversal(rng, 6, 5, SEQ2SEQ["vocab"])
    assert (batch["src"] == PAD).any() and (batch["tgt_out"] == PAD).any()      # padding is exercised
    return model, SEQ2SEQ, partial(tasks.reversal_loss, model), batch


def han(rng):
    model = HAN(**HAN_SIZES, rng=rng)
    documents, _ = tasks.keyword_documents(rng, 6, 3, 4, HAN_SIZES["vocab"])
    labels = rng.integers(0, HAN_SIZES["classes"], len(documents))
    assert (documents[:, :, 0] == PAD).any() and (documents[:, :, -1] == PAD).any()  # empty sentences, short ones
    return (model, HAN_SIZES, lambda documents, labels: ag.cross_entropy(model(documents), labels),
            dict(documents=documents, labels=labels))


LSTMN_SIZES = dict(vocab=10, embed_dim=8, hidden=6, attention_dim=5, classes=3)
ELMO_SIZES = dict(vocab=12, dim=8, layers=2)
SHOW_ATTEND_TELL = dict(vocab=captions.VOCAB, image_size=24, channels=(4, 8), embed_dim=8, hidden=6, attention_dim=5)
POINTER = dict(embed_dim=8, hidden=6, attention_dim=5)


def seq2seq_luong(rng):
    model = LuongSeq2Seq(SEQ2SEQ["vocab"], SEQ2SEQ["vocab"], SEQ2SEQ["embed_dim"], SEQ2SEQ["hidden"],
                         score="general", rng=rng)
    return model, SEQ2SEQ, partial(tasks.reversal_loss, model), tasks.reversal(rng, 6, 5, SEQ2SEQ["vocab"])


def lstmn(rng):
    model = LSTMNClassifier(**LSTMN_SIZES, rng=rng)
    tokens, _ = tasks.keyword_sequences(rng, 6, 5, LSTMN_SIZES["vocab"])
    assert (tokens == PAD).any()
    return (model, LSTMN_SIZES, lambda tokens, labels: ag.cross_entropy(model(tokens), labels),
            dict(tokens=tokens, labels=rng.integers(0, LSTMN_SIZES["classes"], len(tokens))))


def elmo(rng):
    model = ELMo(**ELMO_SIZES, rng=rng)
    tokens = tasks.counting(rng, 6, 6, ELMO_SIZES["vocab"])
    tokens[1, 4:], tokens[3, 2:] = PAD, PAD                                 # rows of 4 and 2 tokens
    return model, ELMO_SIZES, partial(bidirectional_loss, model), dict(tokens=tokens)


def show_attend_tell(rng):
    model = ShowAttendTell(**SHOW_ATTEND_TELL, rng=rng)
    batch = captions.batch(rng, 4, SHOW_ATTEND_TELL["image_size"])
    assert (batch["captions_out"] == PAD).any()
    return model, SHOW_ATTEND_TELL, MethodType(soft_loss, model), batch    # bound: parameters named from the model


def soft_loss(model, images, captions_in, captions_out):
    return objective(model, images, captions_in, captions_out)["loss"]


def pointer(rng):
    model = PointerNetwork(**POINTER, rng=rng)
    return model, POINTER, partial(attngraph_pointer_loss, model), tasks.sorting(rng, 6, 5)


def attngraph_loss_and_grads(loss, batch):
    graph = ag.trace(loss, **batch)
    params = [node for node in graph.parameters.values() if not node.stop_gradient]
    value, *grads = graph.grad(wrt=params).compile()(**batch)
    return value, {node.name: grad for node, grad in zip(params, grads)}


def torch_loss_and_grads(name, model, sizes, arrays):
    torch = pytest.importorskip("torch")
    from benchmarks import torch_reference as tr
    reference, loss = tr.reference(name, sizes, model.state_dict())
    value = loss(reference, *map(torch.from_numpy, arrays))
    value.backward()
    return value.item(), {key: (p.grad.T if transposed else p.grad).numpy()
                          for key, p, transposed in tr.attngraph_parameters(reference)}


def jax_loss_and_grads(name, model, sizes, arrays):
    jax = pytest.importorskip("jax")
    from benchmarks import jax_reference as jr
    value, grads = jax.jit(jax.value_and_grad(getattr(jr, f"{name}_loss")))(jr.tree(model.state_dict()), *arrays)
    return float(value), {".".join(key.key for key in path): np.asarray(grad)
                          for path, grad in jax.tree_util.tree_flatten_with_path(grads)[0]}


@pytest.mark.parametrize("reference", [torch_loss_and_grads, jax_loss_and_grads], ids=["torch", "jax"])
@pytest.mark.parametrize("build", [seq2seq, han, seq2seq_luong, lstmn, elmo, show_attend_tell, pointer],
                         ids=lambda build: build.__name__)
def test_reference_matches_attngraph(build, reference):
    model, sizes, loss, batch = build(np.random.default_rng(0))
    expected_value, expected = attngraph_loss_and_grads(loss, batch)
    value, grads = reference(build.__name__, model, sizes, list(batch.values()))
    np.testing.assert_allclose(value, expected_value, rtol=1e-5)
    assert grads.keys() == expected.keys()
    for key, grad in expected.items():
        assert np.abs(grad).max() > 0, key                                  # every parameter is exercised
        np.testing.assert_allclose(grads[key], grad, rtol=1e-4, atol=1e-5, err_msg=key)


GPT_SIZES = dict(width=8, heads=2, layers=2, length=6, batch=3)


@pytest.fixture(scope="module")
def gpt_case():
    """benchmarks.gpt's weights (float64, every bias and gain drawn) and batch, and attngraph's functional loss and
    gradients of them, by nanoGPT's parameter names."""
    from benchmarks import gpt
    rng = np.random.default_rng(0)
    params = {name: value + rng.standard_normal(value.shape) * (0.1 if value.ndim == 1 else 0)
              for name, value in gpt.init(rng, GPT_SIZES["width"], GPT_SIZES["layers"], GPT_SIZES["length"],
                                          np.float64).items()}
    tokens, targets = (rng.integers(0, gpt.VOCAB, (GPT_SIZES["batch"], GPT_SIZES["length"])) for _ in range(2))
    value, grads = gpt.functional(params, GPT_SIZES["heads"])(*params.values(), tokens, targets)
    return params, tokens, targets, value, dict(zip(params, grads))


def assert_same_loss_and_gradients(value, grads, expected_value, expected):
    """float64 all through; XLA's tanh and exp are approximations good to ~1e-9 (JAX's wte gradient: 3.5e-10)."""
    np.testing.assert_allclose(value, expected_value, rtol=1e-10)
    assert grads.keys() == expected.keys()
    for key, grad in expected.items():
        assert np.abs(grad).max() > 0, key                                  # every parameter is exercised
        np.testing.assert_allclose(grads[key], grad, rtol=1e-6, atol=1e-9, err_msg=key)


def test_gpt_module_matches_the_functional_form(gpt_case):
    """attngraph's GPT holding nanoGPT's weights (c_attn split into w_q, w_k, w_v) computes the functional loss."""
    from benchmarks import gpt
    params, tokens, targets, expected_value, expected = gpt_case
    model = gpt.module(params, GPT_SIZES["heads"], GPT_SIZES["length"])
    value, grads = attngraph_loss_and_grads(lambda tokens, targets: ag.cross_entropy(model(tokens), targets),
                                            dict(tokens=tokens, targets=targets))
    assert_same_loss_and_gradients(value, grads, expected_value, gpt.module_state(expected))


@pytest.mark.parametrize("form", ["module", "torch.func"])
def test_nanogpt_in_pytorch_matches_attngraph(gpt_case, form):
    torch = pytest.importorskip("torch")
    from benchmarks import torch_reference as tr
    params, tokens, targets, expected_value, expected = gpt_case
    if form == "module":
        model = tr.nanogpt(params, GPT_SIZES["heads"])
        value = tr.nanogpt_loss(model(torch.from_numpy(tokens)), torch.from_numpy(targets))
        value.backward()
        grads = {name: p.grad for name, p in model.named_parameters()}
    else:
        grads, value = tr.nanogpt_func_step(params, GPT_SIZES["heads"], tokens, targets)()
    assert_same_loss_and_gradients(value.item(), {name: tr.linear_weight(name, g.numpy()) for name, g in grads.items()},
                                   expected_value, expected)


def test_nanogpt_in_jax_matches_attngraph(gpt_case):
    jax = pytest.importorskip("jax")
    from benchmarks import jax_reference as jr
    params, tokens, targets, expected_value, expected = gpt_case
    with jax.enable_x64():
        value, grads = jr.nanogpt_value_and_grad(GPT_SIZES["heads"])(params, tokens, targets)
    assert_same_loss_and_gradients(float(value), {name: np.asarray(g) for name, g in grads.items()},
                                   expected_value, expected)
