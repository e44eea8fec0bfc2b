"""Modules and layers."""
from . import init
from .layers import MLP, Activation, Dropout, Embedding, LayerNorm, Linear, ModuleList, RMSNorm, Sequential
from .module import Module
from ..core.parameter import Parameter
from .recurrent import GRU, LSTM, GRUCell, LSTMCell, Recurrent
