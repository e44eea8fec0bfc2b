"""Modules and layers."""
from . import init
from .conv import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d,
                   Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, MaxPool1d, MaxPool2d)
from .layers import (MLP, Activation, BatchNorm1d, BatchNorm2d, Dropout, Embedding, GroupNorm, LayerNorm, Linear,
                     ModuleList, RMSNorm, Sequential, SwiGLU)
from .mix import ScalarMix
from .module import Module
from ..core.parameter import Parameter
from .recurrent import GRU, LSTM, GRUCell, LSTMCell, Recurrent
