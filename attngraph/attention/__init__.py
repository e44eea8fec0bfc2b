"""The attention zoo: score functions, attention modules and positional encodings."""
from .attention import Attention, attend, check_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .positional import (LearnedPositions, RelativeMultiHeadAttention, RelativePositions,
                         SinusoidalPositions)
from .scores import (AdditiveScore, ConcatScore, CosineScore, DotScore, GeneralScore, LocationScore,
                     ScaledDotScore)
