"""The attention zoo: score functions, attention modules and positional encodings."""
from .alignment import AlignmentAttention, AlignmentBiasedScore
from .aoa import AttentionOverAttention
from .attention import Attention, attend, key_mask
from .coattention import Coattention
from .content import ContentAddressing, ContentReadHead, sharpen
from .hard import HardAttention, MovingAverageBaseline, reinforce_loss, sample
from .hierarchical import AttentionPooling
from .local import LocalAttention, PredictiveLocalAttention
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .positional import (LearnedPositions, RelativeMultiHeadAttention, RelativePositions,
                         SinusoidalPositions)
from .ring import Ring, ring_attention
from .scores import (AdditiveScore, ConcatScore, CosineScore, DotScore, GeneralScore, LocationScore,
                     ScaledDotScore)
from .structured import StructuredSelfAttention, redundancy_penalty
