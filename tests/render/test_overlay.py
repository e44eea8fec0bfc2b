"""Attention over a picture: bilinear upsampling of a coarse map (as torch's interpolate), the PNG writer, the
lit picture, and the per-word panels."""
import base64
import re
import struct
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest

from attngraph.errors import RenderError
from attngraph.render import attention_panels
from attngraph.render.overlay import lit, png, upsample


def pixels(data: bytes) -> np.ndarray:
    """The (H, W, 3) uint8 pixels of an RGB PNG written by ``png``, its filter bytes checked to be 0."""
    width, height = struct.unpack(">II", data[16:24])
    rows = np.frombuffer(zlib.decompress(data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8]), np.uint8)
    rows = rows.reshape(height, 1 + width * 3)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(height, width, 3)


def test_upsampling_is_bilinear_with_pixel_centres_aligned():
    grid = np.array([[0.0, 1.0], [2.0, 3.0]])
    up = upsample(grid, 4, 4)
    np.testing.assert_allclose(up[0], [0, 0.25, 0.75, 1])                  # torch's align_corners=False
    np.testing.assert_allclose(up[:, 0], [0, 0.5, 1.5, 2])
    assert upsample(np.full((3, 3), 0.2), 24, 24) == pytest.approx(np.full((24, 24), 0.2))


def test_upsampling_to_a_rectangle_matches_torch():
    """Values of torch.nn.functional.interpolate(grid, (3, 5), mode="bilinear", align_corners=False)."""
    grid = np.array([[0.0, 1.0, 4.0], [2.0, 3.0, 8.0]])
    np.testing.assert_allclose(upsample(grid, 3, 5), [[0.0, 0.4, 1.0, 2.8, 4.0],
                                                      [1.0, 1.4, 2.0, 4.4, 6.0],
                                                      [2.0, 2.4, 3.0, 6.0, 8.0]], atol=1e-6)


def test_png_holds_the_pixels():
    rgb = np.random.default_rng(0).random((5, 7, 3))
    data = png(rgb)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and struct.unpack(">II", data[16:24]) == (7, 5)
    assert np.array_equal(pixels(data), np.round(rgb * 255).astype(np.uint8))


def test_the_picture_is_lit_where_the_map_is_high_and_dimmed_elsewhere():
    picture = np.full((3, 6, 6), 0.5)
    weights = np.zeros((3, 3))
    weights[0, 0] = 0.2                                                  # scaled to a maximum of 1
    rgb = lit(picture, weights)
    assert rgb.shape == (6, 6, 3)
    assert rgb[0, 0] == pytest.approx([1.0] * 3)                             # 0.5 · 1 + 0.55, clipped
    assert rgb[5, 5] == pytest.approx([0.15] * 3)                            # 0.5 · 0.3


def test_one_panel_per_word_lit_where_the_word_looked():
    picture = np.zeros((3, 24, 24))
    picture[:, 8:16, 8:16] = 0.4                                          # a grey square in the centre cell
    words = ["grey", "square", "center", "</s>"]
    maps = np.zeros((len(words), 3, 3))
    maps[:, 1, 1] = 1                                                     # every word looks at the centre
    root = ET.fromstring(attention_panels(picture, maps, words))
    svg = "{http://www.w3.org/2000/svg}"
    panels = root.findall(f"{svg}image")
    assert len(panels) == len(words) + 1
    assert [float(panels[0].get(k)) for k in ("width", "height")] == [24 * 4, 24 * 4]
    assert [t.text for t in root.findall(f"{svg}text")] == [" ".join(words), "picture", *words]
    shown = pixels(base64.b64decode(re.sub("^data:image/png;base64,", "", panels[1].get("href")))).astype(float)
    assert (shown[11:13, 11:13] == round(0.95 * 255)).all() and shown[:2, :2].max() == 0    # 0.4 · 1 + 0.55; dark


@pytest.mark.parametrize("call, message", [
    (lambda: upsample(np.zeros(9), 24, 24), "(h, w)"),
    (lambda: png(np.zeros((4, 4))), "(H, W, 3)"),
    (lambda: png(np.full((4, 4, 3), 1.5)), "[0, 1]"),
    (lambda: lit(np.zeros((24, 24, 3)), np.zeros((3, 3))), "channels first"),
    (lambda: attention_panels(np.zeros((3, 24, 24)), np.zeros((2, 3, 3)), ["one"]), "one (h, w) map per word"),
])
def test_bad_pictures_and_maps_are_refused(call, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        call()
