"""The classifiers: HAN and the structured self-attention classifier ignore padding at every level, the
latter's loss holds its penalty; ViT's patches are the image's blocks."""
import numpy as np

import attngraph as ag
from attngraph import models
from attngraph.inspect.attention import attention_maps
from attngraph.models.structured import loss
from attngraph.models.tokens import PAD
from attngraph.models.vit import patches


def logits_of(model, **inputs):
    out = ag.trace(model, **inputs).compile()(**inputs)
    return out[0] if isinstance(out, tuple) else out


def test_han_gives_a_padded_document_the_logits_of_the_unpadded_one():
    han = models.get("han", tiny=True)
    document = np.array([[[5, 6, 7], [8, 9, 0]]])                        # 2 sentences of 3 and 2 words
    padded = np.zeros((1, 3, 5), np.int64)
    padded[0, :2, :3] = document[0]
    np.testing.assert_allclose(logits_of(han, documents=padded), logits_of(han, documents=document), rtol=1e-5)
    maps = attention_maps(ag.trace(han, documents=padded), documents=padded)
    np.testing.assert_array_equal(maps["word_attention"].reshape(3, 5)[padded[0] == PAD], 0)
    np.testing.assert_allclose(maps["word_attention"].sum(-1).ravel(), [1, 1, 0], rtol=1e-6)
    np.testing.assert_array_equal(maps["sentence_attention"][0, 0, 2], 0)
    symbolic = ag.trace(han, documents=ag.Input(("B", "S", "W"), "int64")).compile()
    np.testing.assert_allclose(symbolic(documents=document), logits_of(han, documents=document), rtol=1e-5)
    np.testing.assert_allclose(symbolic(documents=padded), logits_of(han, documents=padded), rtol=1e-5)


def test_structured_classifier_ignores_padding_and_adds_the_penalty_to_its_loss():
    model = models.get("structured", tiny=True, penalty=0.3)
    tokens, labels = np.array([[5, 6, 4, 0, 0, 0], [7, 8, 9, 5, 6, 7]]), np.array([1, 0])
    logits, weights = ag.trace(model, tokens=tokens).compile()(tokens=tokens)
    short_logits = logits_of(model, tokens=tokens[:1, :3])
    np.testing.assert_allclose(logits[:1], short_logits, rtol=1e-5)
    symbolic = ag.trace(model, tokens=ag.Input(("B", "n"), "int64")).compile()
    np.testing.assert_allclose(symbolic(tokens=tokens[:1, :3])[0], short_logits, rtol=1e-5)
    np.testing.assert_array_equal(weights[0, :, 3:], 0)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    cross_entropy = -np.mean(np.log(p[[0, 1], labels] / p.sum(-1)))
    excess = weights @ weights.swapaxes(-1, -2) - np.eye(weights.shape[1])
    expected = cross_entropy + 0.3 * np.mean(np.sum(excess ** 2, axis=(-2, -1)))
    got = ag.trace(lambda tokens, labels: loss(model, tokens, labels), tokens=tokens, labels=labels) \
        .compile()(tokens=tokens, labels=labels)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_vit_patches_are_the_image_blocks_row_by_row(rng):
    images = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    got = ag.trace(lambda images: patches(images, 2), images=ag.Input(("B", 3, 4, 6))).compile()(images=images)
    assert got.shape == (2, 6, 12)
    for k in range(6):
        row, column = divmod(k, 3)
        np.testing.assert_array_equal(got[:, k], images[:, :, 2 * row:2 * row + 2, 2 * column:2 * column + 2]
                                      .reshape(2, 12))
