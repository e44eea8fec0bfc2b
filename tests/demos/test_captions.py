"""The captions demo's measures (its smoke run is in test_demos.py; its pictures' helpers, in
tests/render/test_overlay.py): the metrics of known decodings."""
import numpy as np
import pytest

from attngraph.models.captions import evaluate


def test_metrics_count_exact_captions_words_in_place_and_attention_on_the_shape():
    """Two pictures: the first captioned exactly, every word looking at its shape's cell but one; the second
    with one wrong word and stopped early."""
    targets = np.array([[5, 9, 12, 4, 8, 20, 2, 0, 0, 0],              # green circle top-left, red square bottom-right
                        [6, 10, 16, 2, 0, 0, 0, 0, 0, 0]])
    tokens = np.array([[5, 9, 12, 4, 8, 20, 2], [6, 11, 16, 0, 0, 0, 0]])
    alpha = np.zeros((2, 7, 9))
    alpha[0, :3, 0] = alpha[0, 3:5, 8] = alpha[0, 5, 4] = alpha[0, 6, 1] = 1      # the last place word looks away
    alpha[1, :, 4] = 1
    metrics = evaluate(tokens, alpha, targets)
    assert metrics["heldout_exact_match"] == 0.5
    assert metrics["heldout_token_accuracy"] == pytest.approx((7 + 2) / (7 + 4))
    assert metrics["heldout_attention_on_shape"] == pytest.approx(5 / 6)
