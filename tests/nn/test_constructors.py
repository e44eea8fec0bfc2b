"""Every public layer, attention module and model refuses a bad argument when it is built: TypeError for a
value of the wrong type, ValueError for one out of range (DTypeError for a dtype), with a message naming the
argument and the value; and refusing leaves the default random generator untouched."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.attention import (AdditiveScore, AlignmentAttention, AlignmentBiasedScore, Attention,
                                 AttentionPooling, ConcatScore, CosineScore, DotScore, GeneralScore,
                                 HardAttention, LearnedPositions, LocalAttention, LocationScore,
                                 MovingAverageBaseline, MultiHeadAttention, PredictiveLocalAttention,
                                 RelativeMultiHeadAttention, RelativePositions, SinusoidalPositions,
                                 StructuredSelfAttention)
from attngraph.models import BERT, GPT, HAN, BahdanauSeq2Seq, LuongSeq2Seq, StructuredClassifier, Transformer, ViT
from attngraph.models import tasks
from attngraph.models.blocks import DecoderLayer, Encoder, EncoderLayer
from attngraph.nn import (GRU, LSTM, MLP, Activation, Dropout, Embedding, GRUCell, LayerNorm, Linear, LSTMCell,
                          ModuleList, Recurrent, Sequential, init)

NAN, INF = float("nan"), float("inf")
SMALL = dict(d_model=8, heads=2, layers=1, d_ff=16)      # a small transformer, fast to build

# id: (build it, the error, a pattern its message must match)
CASES = {
    # nn layers
    "linear in 0": (lambda: Linear(0, 3), ValueError, r"in_features must be an int >= 1, got 0"),
    "linear in -1": (lambda: Linear(-1, 3), ValueError, r"in_features must be an int >= 1, got -1"),
    "linear in 8.0": (lambda: Linear(8.0, 3), TypeError, r"in_features must be an int, got 8\.0 \(float\)"),
    "linear in True": (lambda: Linear(True, 3), TypeError, r"in_features must be an int, got True"),
    "linear in '4'": (lambda: Linear("4", 3), TypeError, r"in_features must be an int, got '4' \(str\)"),
    "linear out 0": (lambda: Linear(4, 0), ValueError, r"out_features must be an int >= 1, got 0"),
    "linear bias 'no'": (lambda: Linear(4, 3, bias="no"), TypeError, r"bias must be True or False, got 'no'"),
    "linear bias 1": (lambda: Linear(4, 3, bias=1), TypeError, r"bias must be True or False, got 1"),
    "linear float16": (lambda: Linear(4, 3, dtype="float16"), ag.DTypeError, r"dtype must be float32 or float64"),
    "linear int32": (lambda: Linear(4, 3, dtype=np.int32), ag.DTypeError, r"dtype must be float32 or float64"),
    "linear dtype nonsense": (lambda: Linear(4, 3, dtype="floaty"), ag.DTypeError, r"got 'floaty'"),
    "linear rng seed": (lambda: Linear(4, 3, rng=0), TypeError, r"rng must be a numpy.random.Generator"),
    "embedding 0 rows": (lambda: Embedding(0, 4), ValueError, r"num_embeddings must be an int >= 1, got 0"),
    "embedding dim -1": (lambda: Embedding(10, -1), ValueError, r"dim must be an int >= 1, got -1"),
    "embedding 10.5": (lambda: Embedding(10.5, 4), TypeError, r"num_embeddings must be an int, got 10\.5"),
    "embedding std -1": (lambda: Embedding(10, 4, std=-1.0), ValueError, r"std must be a finite number >= 0"),
    "embedding std nan": (lambda: Embedding(10, 4, std=NAN), ValueError, r"std must be a finite number >= 0, got nan"),
    "layernorm 0": (lambda: LayerNorm(0), ValueError, r"dim must be an int >= 1, got 0"),
    "layernorm eps 0": (lambda: LayerNorm(4, eps=0), ValueError, r"eps must be a finite number > 0, got 0"),
    "layernorm eps -1e-5": (lambda: LayerNorm(4, eps=-1e-5), ValueError, r"eps must be a finite number > 0"),
    "layernorm eps inf": (lambda: LayerNorm(4, eps=INF), ValueError, r"eps must be a finite number > 0, got inf"),
    "layernorm eps str": (lambda: LayerNorm(4, eps="1e-5"), TypeError, r"eps must be a number, got '1e-5'"),
    "layernorm bias None": (lambda: LayerNorm(4, bias=None), TypeError, r"bias must be True or False, got None"),
    "dropout -0.1": (lambda: Dropout(-0.1), ValueError, r"p must be a probability in \[0, 1\), got -0\.1"),
    "dropout 1": (lambda: Dropout(1.0), ValueError, r"p must be a probability in \[0, 1\), got 1\.0"),
    "dropout 1.5": (lambda: Dropout(1.5), ValueError, r"got 1\.5"),
    "dropout nan": (lambda: Dropout(NAN), ValueError, r"p must be a probability in \[0, 1\), got nan"),
    "dropout str": (lambda: Dropout("0.1"), TypeError, r"p must be a number, got '0\.1'"),
    "dropout True": (lambda: Dropout(True), TypeError, r"p must be a number, got True"),
    "modulelist str": (lambda: ModuleList([Linear(2, 2), "x"]), TypeError, r"item 1 must be an attngraph Module"),
    "sequential function": (lambda: Sequential(Linear(2, 2), ag.relu), TypeError, r"item 1 must be an attngraph"),
    "modulelist class": (lambda: ModuleList([Linear]), TypeError, r"item 0 must be an attngraph Module instance"),
    "activation str": (lambda: Activation("relu"), TypeError, r"fn must be a function such as ag\.relu, got 'relu'"),
    "mlp one size": (lambda: MLP([4]), ValueError, r"sizes must be a list of at least two sizes"),
    "mlp int": (lambda: MLP(4), ValueError, r"sizes must be a list of at least two sizes .*, got 4"),
    "mlp size 0": (lambda: MLP([4, 0, 2]), ValueError, r"sizes\[1\] must be an int >= 1, got 0"),
    "mlp dropout 1": (lambda: MLP([4, 8, 2], dropout=1.0), ValueError, r"dropout must be a probability"),
    "mlp activation None": (lambda: MLP([4, 8, 2], activation=None), TypeError, r"activation must be a function"),
    "gru input 0": (lambda: GRU(0, 4), ValueError, r"input_size must be an int >= 1, got 0"),
    "gru hidden 0": (lambda: GRU(4, 0), ValueError, r"hidden_size must be an int >= 1, got 0"),
    "gru hidden -1": (lambda: GRU(4, -1), ValueError, r"hidden_size must be an int >= 1, got -1"),
    "gru input 3.0": (lambda: GRU(3.0, 4), TypeError, r"input_size must be an int, got 3\.0"),
    "gru bidirectional str": (lambda: GRU(4, 4, bidirectional="yes"), TypeError, r"bidirectional must be True or"),
    "lstm hidden 4.5": (lambda: LSTM(4, 4.5), TypeError, r"hidden_size must be an int, got 4\.5"),
    "lstm bidirectional 0": (lambda: LSTM(4, 4, bidirectional=0), TypeError, r"bidirectional must be True or"),
    "grucell hidden 0": (lambda: GRUCell(4, 0), ValueError, r"hidden_size must be an int >= 1, got 0"),
    "lstmcell input 0": (lambda: LSTMCell(0, 4), ValueError, r"input_size must be an int >= 1, got 0"),
    "recurrent str cell": (lambda: Recurrent("gru"), TypeError, r"cell must be an attngraph Module instance"),
    "recurrent int backward": (lambda: Recurrent(GRUCell(2, 2), 3), TypeError, r"backward_cell must be an"),
    "recurrent cell without step": (lambda: Recurrent(Linear(2, 2)), TypeError,
                                    r"cell must be a recurrent cell .* Linear lacks initial_state, project, step"),
    # attention
    "mha heads 0": (lambda: MultiHeadAttention(8, 0), ValueError, r"heads must be an int >= 1, got 0"),
    "mha heads -2": (lambda: MultiHeadAttention(8, -2), ValueError, r"heads must be an int >= 1, got -2"),
    "mha d_model 0": (lambda: MultiHeadAttention(0, 1), ValueError, r"d_model must be an int >= 1, got 0"),
    "mha 8 by 3": (lambda: MultiHeadAttention(8, 3), ValueError, r"d_model \(8\) must be divisible by heads \(3\)"),
    "mha d_model 8.0": (lambda: MultiHeadAttention(8.0, 2), TypeError, r"d_model must be an int, got 8\.0"),
    "mha dropout 1": (lambda: MultiHeadAttention(8, 2, dropout=1.0), ValueError, r"dropout must be a probability"),
    "mha bias None": (lambda: MultiHeadAttention(8, 2, bias=None), TypeError, r"bias must be True or False"),
    "relative mha distance 0": (lambda: RelativeMultiHeadAttention(8, 2, 0), ValueError,
                                r"max_distance must be an int >= 1, got 0"),
    "relative mha 8 by 3": (lambda: RelativeMultiHeadAttention(8, 3, 2), ValueError, r"divisible by heads \(3\)"),
    "general query 0": (lambda: GeneralScore(0, 3), ValueError, r"query_dim must be an int >= 1, got 0"),
    "general key 2.5": (lambda: GeneralScore(4, 2.5), TypeError, r"key_dim must be an int, got 2\.5"),
    "additive hidden 0": (lambda: AdditiveScore(4, 3, 0), ValueError, r"hidden must be an int >= 1, got 0"),
    "concat key 0": (lambda: ConcatScore(4, 0, 5), ValueError, r"key_dim must be an int >= 1, got 0"),
    "location length 0": (lambda: LocationScore(4, 0), ValueError, r"max_length must be an int >= 1, got 0"),
    "cosine eps 0": (lambda: CosineScore(eps=0), ValueError, r"eps must be a finite number > 0, got 0"),
    "cosine eps -1": (lambda: CosineScore(eps=-1.0), ValueError, r"eps must be a finite number > 0, got -1\.0"),
    "cosine eps underflows": (lambda: CosineScore(eps=1e-30), ValueError, r"eps must be at least 1\.1e-19"),
    "cosine beta 0": (lambda: CosineScore(beta=0.0), ValueError, r"beta must be a finite number > 0, got 0\.0"),
    "cosine beta inf": (lambda: CosineScore(beta=INF), ValueError, r"beta must be a finite number > 0, got inf"),
    "cosine learn_beta str": (lambda: CosineScore(learn_beta="yes"), TypeError, r"learn_beta must be True or"),
    "attention score class": (lambda: Attention(DotScore), TypeError, r"score must be an attngraph Module instance"),
    "attention score str": (lambda: Attention("dot"), TypeError, r"score must be an attngraph Module .*, got 'dot'"),
    "hard attention None": (lambda: HardAttention(None), TypeError, r"score must be an attngraph Module"),
    "local window 0": (lambda: LocalAttention(DotScore(), 0), ValueError, r"window must be an int >= 1, got 0"),
    "local window 1.5": (lambda: LocalAttention(DotScore(), 1.5), TypeError, r"window must be an int, got 1\.5"),
    "local score function": (lambda: LocalAttention(ag.matmul, 1), TypeError, r"score must be an attngraph"),
    "local-p query 0": (lambda: PredictiveLocalAttention(DotScore(), 1, 0, 4), ValueError,
                        r"query_dim must be an int >= 1, got 0"),
    "local-p hidden -3": (lambda: PredictiveLocalAttention(DotScore(), 1, 3, -3), ValueError,
                          r"hidden must be an int >= 1, got -3"),
    "alignment markov -1": (lambda: AlignmentBiasedScore(4, 3, 5, markov_width=-1), ValueError,
                            r"markov_width must be an int >= 0, got -1"),
    "alignment hidden 0": (lambda: AlignmentAttention(4, 3, 0), ValueError, r"hidden must be an int >= 1, got 0"),
    "structured hops 0": (lambda: StructuredSelfAttention(8, 4, 0), ValueError, r"hops must be an int >= 1, got 0"),
    "structured bias str": (lambda: StructuredSelfAttention(8, 4, 2, bias="no"), TypeError, r"bias must be True"),
    "pooling dim 0": (lambda: AttentionPooling(0, 4), ValueError, r"dim must be an int >= 1, got 0"),
    "sinusoidal dim 0": (lambda: SinusoidalPositions(0), ValueError, r"dim must be an int >= 1, got 0"),
    "sinusoidal length 0": (lambda: SinusoidalPositions(8, max_length=0), ValueError,
                            r"max_length must be an int >= 1, got 0"),
    "learned length -1": (lambda: LearnedPositions(-1, 8), ValueError, r"max_length must be an int >= 1, got -1"),
    "relative distance 0": (lambda: RelativePositions(0, 4), ValueError, r"max_distance must be an int >= 1"),
    "baseline momentum 1": (lambda: MovingAverageBaseline(momentum=1.0), ValueError,
                            r"momentum must be a probability in \[0, 1\), got 1\.0"),
    # transformer blocks
    "encoder layer d_ff 0": (lambda: EncoderLayer(8, 2, 0), ValueError, r"d_ff must be an int >= 1, got 0"),
    "encoder layer activation": (lambda: EncoderLayer(8, 2, 16, activation="relu"), TypeError,
                                 r"activation must be a function such as ag\.relu, got 'relu'"),
    "encoder layer pre_norm": (lambda: EncoderLayer(8, 2, 16, pre_norm="yes"), TypeError, r"pre_norm must be True"),
    "decoder layer 8 by 3": (lambda: DecoderLayer(8, 3, 16), ValueError, r"d_model \(8\) must be divisible"),
    "encoder layers 0": (lambda: Encoder(0, 8, 2, 16), ValueError, r"layers must be an int >= 1, got 0"),
    "encoder layers 2.0": (lambda: Encoder(2.0, 8, 2, 16), TypeError, r"layers must be an int, got 2\.0"),
    # models
    "gpt vocab 0": (lambda: GPT(0, **SMALL), ValueError, r"vocab must be an int >= 1, got 0"),
    "gpt d_model 0": (lambda: GPT(12, d_model=0), ValueError, r"d_model must be an int >= 1, got 0"),
    "gpt d_model -5": (lambda: GPT(12, d_model=-5), ValueError, r"d_model must be an int >= 1, got -5"),
    "gpt 16 by 3": (lambda: GPT(12, d_model=16, heads=3), ValueError, r"d_model \(16\) must be divisible by heads"),
    "gpt layers 0": (lambda: GPT(12, **{**SMALL, "layers": 0}), ValueError, r"layers must be an int >= 1, got 0"),
    "gpt d_ff -1": (lambda: GPT(12, **{**SMALL, "d_ff": -1}), ValueError, r"d_ff must be an int >= 1, got -1"),
    "gpt max_length 0": (lambda: GPT(12, max_length=0, **SMALL), ValueError, r"max_length must be an int >= 1"),
    "gpt dropout 1": (lambda: GPT(12, dropout=1.0, **SMALL), ValueError, r"dropout must be a probability"),
    "gpt tie_weights maybe": (lambda: GPT(12, tie_weights="maybe", **SMALL), TypeError,
                              r"tie_weights must be True or False, got 'maybe'"),
    "bert vocab 4": (lambda: BERT(4, **SMALL), ValueError, r"vocab must be an int >= 5, got 4"),
    "bert heads 0": (lambda: BERT(12, **{**SMALL, "heads": 0}), ValueError, r"heads must be an int >= 1, got 0"),
    "bert dropout -0.1": (lambda: BERT(12, dropout=-0.1, **SMALL), ValueError, r"dropout must be a probability"),
    "transformer src_vocab 0": (lambda: Transformer(0, 12, **SMALL), ValueError, r"src_vocab must be an int >= 5"),
    "transformer tgt_vocab 3": (lambda: Transformer(12, 3, **SMALL), ValueError, r"tgt_vocab must be an int >= 5"),
    "transformer pre_norm 1": (lambda: Transformer(12, 12, pre_norm=1, **SMALL), TypeError, r"pre_norm must be"),
    "transformer max_length 0": (lambda: Transformer(12, 12, max_length=0, **SMALL), ValueError,
                                 r"max_length must be an int >= 1, got 0"),
    "vit 10 by 4": (lambda: ViT(image_size=10, patch_size=4, **SMALL), ValueError,
                    r"image_size \(10\) must be divisible by patch_size \(4\)"),
    "vit patch 0": (lambda: ViT(patch_size=0, **SMALL), ValueError, r"patch_size must be an int >= 1, got 0"),
    "vit channels 0": (lambda: ViT(channels=0, **SMALL), ValueError, r"channels must be an int >= 1, got 0"),
    "vit classes 1": (lambda: ViT(classes=1, **SMALL), ValueError, r"classes must be an int >= 2, got 1"),
    "han vocab 0": (lambda: HAN(0), ValueError, r"vocab must be an int >= 5, got 0"),
    "han classes 1": (lambda: HAN(12, classes=1), ValueError, r"classes must be an int >= 2, got 1"),
    "han word_hidden 0": (lambda: HAN(12, word_hidden=0), ValueError, r"word_hidden must be an int >= 1, got 0"),
    "bahdanau tgt_vocab 0": (lambda: BahdanauSeq2Seq(12, 0), ValueError, r"tgt_vocab must be an int >= 5, got 0"),
    "bahdanau hidden 8.0": (lambda: BahdanauSeq2Seq(12, 12, hidden=8.0), TypeError, r"hidden must be an int"),
    "luong score cosine": (lambda: LuongSeq2Seq(12, 12, score="cosine"), ValueError,
                           r"score must be one of 'general', 'dot', got 'cosine'"),
    "luong score None": (lambda: LuongSeq2Seq(12, 12, score=None), ValueError, r"score must be one of .*got None"),
    "luong embed_dim 0": (lambda: LuongSeq2Seq(12, 12, embed_dim=0), ValueError, r"embed_dim must be an int >= 1"),
    "structured classifier hops 0": (lambda: StructuredClassifier(12, hops=0), ValueError,
                                     r"hops must be an int >= 1, got 0"),
    "structured classifier penalty -1": (lambda: StructuredClassifier(12, penalty=-1.0), ValueError,
                                         r"penalty must be a finite number >= 0, got -1\.0"),
    "structured classifier penalty nan": (lambda: StructuredClassifier(12, penalty=NAN), ValueError,
                                          r"penalty must be a finite number >= 0, got nan"),
    # the registry's configurations, and the tasks that feed them
    "registry gpt d_model 0": (lambda: models.get("gpt", tiny=True, d_model=0), ValueError,
                               r"d_model must be an int >= 1, got 0"),
    "registry vit dropout 1": (lambda: models.get("vit", tiny=True, dropout=1.0), ValueError,
                               r"dropout must be a probability"),
    "counting vocab 4": (lambda: tasks.counting(np.random.default_rng(0), 2, 5, 4), ValueError,
                         r"vocab must be an int >= 5, got 4"),
    "keywords vocab 5": (lambda: tasks.keyword_sequences(np.random.default_rng(0), 2, 4, 5), ValueError,
                         r"vocab must be an int >= 6, got 5"),
    "manual_seed -1": (lambda: init.manual_seed(-1), ValueError, r"seed must be an int >= 0, got -1"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_argument_is_refused_naming_it(case):
    build, error, message = CASES[case]
    with pytest.raises(error, match=message):
        build()


# models whose refusal comes late in their list of arguments, after arguments that draw parameters
LATE_REFUSALS = ["gpt 16 by 3", "gpt layers 0", "gpt tie_weights maybe", "bert heads 0", "transformer pre_norm 1",
                 "vit classes 1", "luong score cosine", "relative mha distance 0", "mha dropout 1",
                 "alignment markov -1", "gru bidirectional str", "linear bias 'no'"]


@pytest.mark.parametrize("case", LATE_REFUSALS)
def test_a_refused_argument_draws_no_random_number(case, monkeypatch):
    monkeypatch.setattr(init, "_default", [np.random.default_rng(7)])
    with pytest.raises((TypeError, ValueError)):
        CASES[case][0]()
    assert init.generator().random() == np.random.default_rng(7).random()


@pytest.mark.parametrize("build, check", [
    (lambda: Linear(np.int64(4), np.int32(3)), lambda m: type(m.in_features) is int and m.weight.shape == (4, 3)),
    (lambda: Linear(4, 3, bias=np.bool_(False), dtype=np.float64), lambda m: m.bias is None),
    (lambda: Dropout(0.0), lambda m: m.p == 0.0),
    (lambda: Dropout(np.float32(0.5)), lambda m: m.p == 0.5),
    (lambda: LayerNorm(1, eps=1e-12), lambda m: m.eps == 1e-12),
    (lambda: Embedding(3, 2, std=0), lambda m: not m.weight.data.any()),
    (lambda: AlignmentBiasedScore(4, 3, 5, markov_width=0), lambda m: m.w_markov.shape == (1, 5)),
    (lambda: MultiHeadAttention(8, 8), lambda m: m.heads == 8),
    (lambda: CosineScore(eps=1.1e-19), lambda m: m.eps == 1.1e-19),
    (lambda: GPT(np.int64(12), **SMALL), lambda m: m.token_embed.num_embeddings == 12),
    (lambda: BERT(5, **SMALL), lambda m: m.out_bias.shape == (5,)),
    (lambda: ViT(image_size=4, patch_size=4, **SMALL), lambda m: m.positions.max_length == 2),
], ids=["numpy ints", "numpy bool", "dropout 0", "dropout numpy float", "layernorm 1", "embedding std 0",
        "markov width 0", "one dim per head", "cosine smallest eps", "gpt numpy vocab", "bert smallest vocab",
        "vit one patch"])
def test_the_edge_of_what_is_allowed_is_accepted(build, check):
    assert check(build())
