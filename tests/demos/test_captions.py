"""The captions demo's measures and pictures (its smoke run is in test_demos.py): the metrics of known decodings,
the bilinear upsampling of an attention map, and the per-word panels."""
import base64
import re
import struct
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest

from attngraph.demos.captions import attention_panels, evaluate, png, upsample
from attngraph.models import captions


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


def test_upsampling_is_bilinear_with_pixel_centres_aligned():
    grid = np.array([[0.0, 1.0], [2.0, 3.0]])
    up = upsample(grid, 4)
    np.testing.assert_allclose(up[0], [0, 0.25, 0.75, 1])                  # torch's align_corners=False
    np.testing.assert_allclose(up[:, 0], [0, 0.5, 1.5, 2])
    assert upsample(np.full((3, 3), 0.2), 24) == pytest.approx(np.full((24, 24), 0.2))


def test_png_holds_the_pixels():
    rgb = np.random.default_rng(0).random((5, 7, 3))
    data = png(rgb)
    width, height = struct.unpack(">II", data[16:24])
    raw = zlib.decompress(data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8])
    rows = np.frombuffer(raw, np.uint8).reshape(5, 1 + 7 * 3)
    assert (width, height) == (7, 5) and (rows[:, 0] == 0).all()
    assert np.array_equal(rows[:, 1:].reshape(5, 7, 3), np.round(rgb * 255).astype(np.uint8))


def test_one_panel_per_word_lit_where_the_word_looked():
    images, tokens = captions.sample(np.random.default_rng(0), 1)
    words = captions.decode(tokens[0]).split()
    alpha = np.zeros((len(words), 9))
    alpha[:, 4] = 1                                                       # every word looks at the centre
    root = ET.fromstring(attention_panels(images[0], alpha, words))
    svg = "{http://www.w3.org/2000/svg}"
    panels = root.findall(f"{svg}image")
    assert len(panels) == len(words) + 1
    assert [t.text for t in root.findall(f"{svg}text")] == [" ".join(words), "picture", *words]
    raw = base64.b64decode(re.sub("^data:image/png;base64,", "", panels[1].get("href")))
    lit = np.frombuffer(zlib.decompress(raw[raw.index(b"IDAT") + 4:raw.index(b"IEND") - 8]), np.uint8)
    lit = lit.reshape(24, 1 + 24 * 3)[:, 1:].reshape(24, 24, 3).astype(float)
    assert lit[11:13, 11:13].min() >= 0.55 * 255 and lit[:2, :2].max() <= 0.3 * 255 + 1    # lit centre, dim corner
