"""Coattention (Xiong, Zhong & Socher 2016, "Dynamic Coattention Networks for Question Answering", §2.2).

The document D (..., m, d) and the question Q (..., n, d) attend to each other through one affinity matrix.
The paper keeps positions in columns (D is d × m); here they are rows, so every formula is its transpose:

    L   = D Qᵀ                  (..., m, n)   the paper's L = DᵀQ: affinity of document word i, question word j
    A^Q = softmax of L over the document, for each question word     (..., n, m)
    A^D = softmax of L over the question, for each document word     (..., m, n)
    C^Q = A^Q D                 (..., n, d)    the paper's D A^Q: the document summarized for each question word
    C^D = A^D [Q; C^Q]          (..., m, 2d)   the paper's [Q; C^Q] A^D, the coattention context

The paper also appends a learned sentinel vector to D and Q (so that a word can attend to nothing) and
passes Q through tanh(W Q + b); both belong to the encoder that produces D and Q.
"""
from __future__ import annotations

from ..core import functional as F
from ..nn import Module
from .attention import attend


class Coattention(Module):
    """document_context, question_context = Coattention()(document, question, document_mask=None,
    question_mask=None).

    document (..., m, d), question (..., n, d); the masks (..., m) and (..., n) are True at real words.
    Padded document words get no weight in A^Q and padded question words none in A^D; the rows of C^Q that
    belong to padded question words are computed but never reach C^D. Returns C^D (..., m, 2d) and
    C^Q (..., n, d). A^D is recorded as "attention" and A^Q as "question_attention" under this module's
    scope."""

    def forward(self, document, question, document_mask=None, question_mask=None):
        affinity = document @ F.swapaxes(question, -1, -2)
        question_context, question_weights = attend(F.swapaxes(affinity, -1, -2), document,
                                                    document_mask)
        F.name(question_weights, "question_attention")
        document_context, _ = attend(affinity, F.concat([question, question_context], -1),
                                     question_mask)
        return document_context, question_context
