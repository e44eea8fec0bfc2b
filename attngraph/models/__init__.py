"""Whole architectures built from ``nn`` and ``attention``, and their registry.

Importing this package registers every model: ``attngraph.models.names()`` lists them.
"""
from . import (bert, elmo, gpt, han, lstmn, memory, pointer, seq2seq, show_attend_tell, snail, structured,
               transformer, vit)
from .bert import BERT, mask_tokens
from .elmo import ELMo
from .gpt import GPT
from .han import HAN
from .lstmn import LSTMN, LSTMNClassifier
from .memory import MemN2N, NTMReader
from .pointer import PointerNetwork
from .recall import AdditiveRecall
from .registry import ModelSpec, get, names, register, spec
from .seq2seq import BahdanauSeq2Seq, LuongSeq2Seq, Seq2Seq
from .show_attend_tell import ShowAttendTell
from .snail import SNAIL
from .structured import StructuredClassifier
from .transformer import Transformer
from .vit import ViT
