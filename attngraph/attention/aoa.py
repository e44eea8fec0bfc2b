"""Attention-over-attention (Cui et al. 2017, "Attention-over-Attention Neural Networks for Reading
Comprehension", ACL; arXiv 2016).

Document states D (..., |D|, d) and query states Q (..., |Q|, d):

    M = D Qᵀ                       (..., |D|, |Q|)   pair-wise matching scores
    α = softmax of M over the document, for each query word (column-wise)
    β = softmax of M over the query, for each document word (row-wise)
    β̄ = (1/|D|) Σ_t β(t)           (..., |Q|)        the query-level attention averaged over document words
    s = α β̄                        (..., |D|)        the attended document-level attention

α and β are coattention's A^Q and A^D (Xiong et al. 2016); α is computed transposed, (..., |Q|, |D|), so
that both softmaxes run over the last axis. Padded document words get α = 0 and are left out of the
average; padded query words get β = 0.
"""
from __future__ import annotations

from ..core import functional as F
from ..nn import Module
from .attention import key_mask


class AttentionOverAttention(Module):
    """s = AttentionOverAttention()(document, query, document_mask=None, query_mask=None).

    document (..., |D|, d), query (..., |Q|, d); the masks (..., |D|) and (..., |Q|) are True at real words.
    Returns s (..., |D|), which sums to 1 over the document; it is recorded under this module's scope."""

    def forward(self, document, query, document_mask=None, query_mask=None):
        matching = document @ F.swapaxes(query, -1, -2)
        by_query = F.swapaxes(matching, -1, -2)
        alpha_t = F.softmax(by_query, mask=key_mask(document_mask, by_query))
        beta = F.softmax(matching, mask=key_mask(query_mask, matching))
        beta_mean = _mean_over_document(beta, document_mask)
        return F.name((F.expand_dims(beta_mean, -2) @ alpha_t)[..., 0, :], "attention")


def _mean_over_document(beta, document_mask):
    """β̄: the mean of the rows of β (..., |D|, |Q|) that belong to real document words."""
    if document_mask is None:
        return F.mean(beta, -2)
    real = F.expand_dims(F.astype(document_mask, beta.dtype), -1)
    return F.sum(beta * real, -2) / F.maximum(F.sum(real, -2), 1.0)
