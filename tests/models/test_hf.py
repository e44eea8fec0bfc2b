"""Hugging Face checkpoints in: tiny random GPT-2, BERT and ViT models built with transformers (no download), saved
with save_pretrained, imported, and run on the same inputs give the same logits; configs, files and weights that
do not fit are refused with CheckpointError."""
import json

import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import CheckpointError
from attngraph.models import BERT, GPT, ViT, hf

safetensors_numpy = pytest.importorskip("safetensors.numpy")


@pytest.fixture(scope="module")
def transformers():
    pytest.importorskip("torch")
    return pytest.importorskip("transformers")


def saved(model, folder, **options):
    """``model`` with every parameter drawn at random (biases and LayerNorms too, so that a weight mapped to the
    wrong place shows), saved to ``folder`` as safetensors."""
    import torch
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    model.eval().save_pretrained(folder, **options)
    return model


def logits_of(model, **inputs):
    return ag.trace(model, **inputs).compile()(**inputs)


def reference(model, **inputs):
    import torch
    with torch.no_grad():
        return model(**{name: torch.from_numpy(x) for name, x in inputs.items()}).logits.numpy()


@pytest.mark.parametrize("settings", [
    {},
    dict(activation_function="gelu", layer_norm_epsilon=0.3, n_inner=48, tie_word_embeddings=False),
], ids=["gpt2", "untied-exact-gelu"])
def test_gpt2_language_model_logits_match(transformers, tmp_path, rng, settings):
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=50, n_positions=16, **settings)
    theirs = saved(transformers.GPT2LMHeadModel(config), tmp_path)
    ours = hf.load(tmp_path)
    assert isinstance(ours, GPT) and not ours.training and (ours.out is None) == config.tie_word_embeddings
    tokens = rng.integers(0, 50, (2, 16))
    np.testing.assert_allclose(logits_of(ours, tokens=tokens), reference(theirs, input_ids=tokens),
                               rtol=1e-4, atol=1e-4)


def test_bert_masked_lm_logits_match_with_padding_and_token_types(transformers, tmp_path, rng):
    config = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                     vocab_size=50, max_position_embeddings=16, type_vocab_size=3, layer_norm_eps=0.3)
    theirs = saved(transformers.BertForMaskedLM(config), tmp_path)
    ours = hf.load(tmp_path)
    assert isinstance(ours, BERT) and ours.segment_embed.num_embeddings == 3
    tokens = rng.integers(1, 50, (2, 7))
    tokens[1, 4:] = config.pad_token_id
    segment_ids = rng.integers(0, 3, (2, 7))
    attention_mask = (tokens != config.pad_token_id).astype(np.int64)
    np.testing.assert_allclose(logits_of(ours, tokens=tokens, segment_ids=segment_ids),
                               reference(theirs, input_ids=tokens, token_type_ids=segment_ids,
                                         attention_mask=attention_mask), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(logits_of(ours, tokens=tokens),             # token type 0 everywhere, as HF
                               reference(theirs, input_ids=tokens, attention_mask=attention_mask), rtol=1e-4, atol=1e-4)


def test_vit_classification_logits_match(transformers, tmp_path, rng):
    config = transformers.ViTConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                    image_size=8, patch_size=4, num_channels=3, num_labels=5, layer_norm_eps=0.3)
    theirs = saved(transformers.ViTForImageClassification(config), tmp_path)
    ours = hf.load(tmp_path)
    assert isinstance(ours, ViT) and ours.head.out_features == 5
    images = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(logits_of(ours, images=images), reference(theirs, pixel_values=images),
                               rtol=1e-4, atol=1e-4)


def test_sharded_checkpoints_and_old_layer_norm_names_load_the_same_weights(transformers, tmp_path):
    config = transformers.BertConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                     vocab_size=50, max_position_embeddings=16)
    saved(transformers.BertForMaskedLM(config), tmp_path / "whole")
    saved(transformers.BertForMaskedLM(config), tmp_path / "sharded", max_shard_size="20KB")
    assert len(list((tmp_path / "sharded").glob("*.safetensors"))) > 1
    whole = hf.load(tmp_path / "whole").state_dict()
    for name, value in hf.load(tmp_path / "sharded").state_dict().items():
        np.testing.assert_array_equal(value, whole[name])
    tensors = safetensors_numpy.load_file(tmp_path / "whole" / "model.safetensors")
    safetensors_numpy.save_file({name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                                            "LayerNorm.beta"): value
                                 for name, value in tensors.items()}, tmp_path / "whole" / "model.safetensors")
    np.testing.assert_array_equal(hf.load(tmp_path / "whole").embed_norm.weight.data, whole["embed_norm.weight"])


def test_gpt2_checkpoints_without_the_lm_head_prefix_with_mask_buffers_or_in_float16_load(transformers, tmp_path):
    """The layout of the original GPT-2 checkpoints: GPT2Model's names, the causal masks saved as buffers."""
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=50, n_positions=16)
    saved(transformers.GPT2LMHeadModel(config), tmp_path)
    expected = hf.load(tmp_path).state_dict()
    tensors = safetensors_numpy.load_file(tmp_path / "model.safetensors")
    mask = np.tril(np.ones((1, 1, 16, 16), np.float32))
    safetensors_numpy.save_file({name.removeprefix("transformer."): value.astype(np.float16)
                                 for name, value in tensors.items()} | {"h.0.attn.bias": mask,
                                                                        "h.0.attn.masked_bias": np.float32(-1e4)[None]},
                                tmp_path / "model.safetensors")
    for name, value in hf.load(tmp_path).state_dict().items():
        assert value.dtype == np.float32
        np.testing.assert_array_equal(value, expected[name].astype(np.float16).astype(np.float32))


def test_a_checkpoint_without_the_head_with_extra_weights_or_in_bfloat16_is_refused(transformers, tmp_path):
    config = transformers.BertConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                     vocab_size=50, max_position_embeddings=16)
    saved(transformers.BertModel(config), tmp_path)
    with pytest.raises(CheckpointError, match="lacks cls.predictions"):
        hf.load(tmp_path)
    saved(transformers.BertForMaskedLM(config), tmp_path)
    tensors = safetensors_numpy.load_file(tmp_path / "model.safetensors")
    safetensors_numpy.save_file(tensors | {"bert.encoder.layer.1.output.dense.bias": np.zeros(32, np.float32)},
                                tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="holds encoder.layer.1.output.dense.bias, which"):
        hf.load(tmp_path)
    import torch
    from safetensors.torch import save_file
    save_file({"bert.embeddings.word_embeddings.weight": torch.zeros(50, 32, dtype=torch.bfloat16)},
              tmp_path / "model.safetensors")
    # NumPy reads bfloat16 once ml_dtypes (JAX's) is imported: the file is read then, and found incomplete
    refusal = "lacks" if _numpy_knows("bfloat16") else "cannot read .* with NumPy .*: save the model in float32"
    with pytest.raises(CheckpointError, match=refusal):
        hf.load(tmp_path)


def _numpy_knows(dtype: str) -> bool:
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True


def write_checkpoint(folder, config: dict, tensors: dict | None = None):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if tensors is not None:
        safetensors_numpy.save_file(tensors, folder / "model.safetensors")
    return folder


GPT2 = dict(model_type="gpt2", n_layer=1, n_head=2, n_embd=8, vocab_size=10, n_positions=4)


@pytest.mark.parametrize("config, message", [
    (dict(model_type="llama"), "model_type 'llama'; attngraph imports 'gpt2', 'bert', 'vit'"),
    (GPT2 | dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx=True"),
    (GPT2 | dict(activation_function="relu"), "activation_function='relu'"),
    (GPT2 | dict(n_head=3), "does not fit attngraph's GPT: d_model"),
    ({k: v for k, v in GPT2.items() if k != "n_embd"}, "no 'n_embd'"),
    (dict(model_type="bert", pad_token_id=1), "pad_token_id=1"),
    (dict(model_type="vit", qkv_bias=False), "qkv_bias=False"),
])
def test_configs_attngraph_cannot_represent_are_refused_naming_the_field(tmp_path, config, message):
    with pytest.raises(CheckpointError, match=message):
        hf.load(write_checkpoint(tmp_path, config))


def test_missing_or_unreadable_files_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="holds no config.json"):
        hf.load(tmp_path)
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(CheckpointError, match="cannot read"):
        hf.load(tmp_path)
    write_checkpoint(tmp_path, GPT2)
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(CheckpointError, match="holds no model.safetensors .pytorch_model.bin is not read"):
        hf.load(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="cannot read .*model.safetensors"):
        hf.load(tmp_path)


def test_weights_of_the_wrong_shape_are_refused_naming_the_parameter(transformers, tmp_path):
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=50, n_positions=16)
    saved(transformers.GPT2LMHeadModel(config), tmp_path)
    tensors = safetensors_numpy.load_file(tmp_path / "model.safetensors")
    tensors["transformer.wpe.weight"] = tensors["transformer.wpe.weight"][:8]
    safetensors_numpy.save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"positions.weight: expected \(16, 32\) float32, got \(8, 32\)"):
        hf.load(tmp_path)
    tensors["transformer.h.0.attn.c_attn.bias"] = tensors["transformer.h.0.attn.c_attn.bias"][:-1]
    safetensors_numpy.save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"h.0.attn.c_attn.bias \(for transformer.layers.0.self_attn.w_q.bias\) "
                                              r"has shape \(95,\), which does not fit"):
        hf.load(tmp_path)


def test_a_model_id_in_the_hugging_face_cache(tmp_path, monkeypatch, rng):
    """A model id is read from the hub cache's snapshot that refs/main names (HF_HUB_CACHE, else HF_HOME/hub),
    as the folder it is; nothing is downloaded, and an id not there names where it was looked for."""
    from tests.models.hf_folders import gpt2_folder
    repository = tmp_path / "home" / "hub" / "models--org--tiny-gpt2"
    gpt2_folder(repository / "snapshots" / "0123abc")
    gpt2_folder(repository / "snapshots" / "old", d=4)              # another revision, not main's
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text("0123abc")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    tokens = rng.integers(0, 50, (2, 5))
    expected = logits_of(hf.load(repository / "snapshots" / "0123abc"), tokens=tokens)
    np.testing.assert_array_equal(logits_of(hf.load("org/tiny-gpt2"), tokens=tokens), expected)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "home" / "hub"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    assert hf.load("org/tiny-gpt2").token_embed.weight.shape == (50, 8)
    with pytest.raises(CheckpointError, match=r"no model 'org/other'.*models--org--other.*does not download"):
        hf.load("org/other")
    (repository / "refs" / "main").write_text("fedcba9")
    with pytest.raises(CheckpointError, match="refs/main names fedcba9, which snapshots/ lacks"):
        hf.load("org/tiny-gpt2")


def test_two_values_of_one_weight_are_refused(tmp_path):
    from tests.models.hf_folders import gpt2_folder
    folder = gpt2_folder(tmp_path / "bert-like")
    tensors = safetensors_numpy.load_file(folder / "model.safetensors")
    tensors["transformer.ln_f.LayerNorm.gamma"] = tensors["transformer.ln_f.LayerNorm.weight"] = np.ones(8, np.float32)
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"both transformer\.ln_f\.LayerNorm\.(gamma|weight) and "
                                              r"transformer\.ln_f\.LayerNorm\.(weight|gamma), two values of one"):
        hf.load(folder)
