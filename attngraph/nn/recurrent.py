"""Recurrent layers: GRU and LSTM cells, and encoders that run them over time in the graph.

A cell maps one step's input x (B, in) and its state to the next state; the GRU's state is h (B, H), the
LSTM's the pair (h, c). ``Recurrent`` runs a cell over a sequence (B, T, in) as one ``scan`` node
(core/loops.py) whose body is the cell's step, so T may stay symbolic, as the batch. A padding mask (B, T), True at real steps, makes padded steps keep the previous
state, so any sequence ends in the state of its last real step.

A cell is ``step(project(x), state)``: the input's projection depends on no state, so ``Recurrent`` computes
it for the whole sequence in one product, (B·T, in) @ (in, 3H), as cuDNN and PyTorch's ``nn.GRU`` do, and the
T steps only multiply the state. On the benchmarks' HAN step that is T times fewer, larger products for
every input projection and its gradients.
"""
from __future__ import annotations

import numpy as np

from ..core import functional as F
from .checks import flag, module, sizes
from .layers import Linear
from .module import Module


def zeros(x, size: int):
    """Zeros (B, size) for the batch of ``x`` (B, ...), which may be symbolic."""
    return F.broadcast_to(np.zeros((), x.dtype), (x.shape[0], size))


class GRUCell(Module):
    """Gated recurrent unit (Cho et al. 2014), in the form of cuDNN and PyTorch (the reset gate applied
    after the hidden projection):

        r  = σ(W_r x + b_r + U_r h + c_r)               reset gate
        z  = σ(W_z x + b_z + U_z h + c_z)               update gate
        n  = tanh(W_n x + b_n + r ∘ (U_n h + c_n))      candidate
        h' = (1 − z) ∘ n + z ∘ h

    W = [W_r; W_z; W_n] is ``input`` (in, 3H) and U = [U_r; U_z; U_n] is ``hidden`` (H, 3H), each a
    ``Linear`` with its default initialization. ``cell(x, h) -> h'``.
    """

    def __init__(self, input_size: int, hidden_size: int, rng=None):
        super().__init__()
        self.input_size, self.hidden_size = sizes(input_size=input_size, hidden_size=hidden_size)
        self.input = Linear(self.input_size, 3 * self.hidden_size, rng=rng)
        self.hidden = Linear(self.hidden_size, 3 * self.hidden_size, rng=rng)

    def initial_state(self, x):
        return zeros(x, self.hidden_size)

    def forward(self, x, h):
        return self.step(self.project(x), h)

    def project(self, x):
        """W x + b for the three gates: (..., in) -> (..., 3H)."""
        return self.input(x)

    def step(self, projected, h):
        """h' from the projected input (B, 3H) and h."""
        x_r, x_z, x_n = F.split(projected, self.hidden_size, axis=-1)
        h_r, h_z, h_n = F.split(self.hidden(h), self.hidden_size, axis=-1)
        r, z = F.sigmoid(x_r + h_r), F.sigmoid(x_z + h_z)
        n = F.tanh(x_n + r * h_n)
        return (1 - z) * n + z * h

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class LSTMCell(Module):
    """Long short-term memory (Hochreiter & Schmidhuber 1997) with a forget gate (Gers et al. 2000):

        i  = σ(W_i x + U_i h + b_i)      input gate
        f  = σ(W_f x + U_f h + b_f)      forget gate
        g  = tanh(W_g x + U_g h + b_g)   candidate cell
        o  = σ(W_o x + U_o h + b_o)      output gate
        c' = f ∘ c + i ∘ g
        h' = o ∘ tanh(c')

    W = [W_i; W_f; W_g; W_o] is ``input`` (in, 4H) with the bias b, U is ``hidden`` (H, 4H) without one
    (a second bias would be redundant). ``cell(x, (h, c)) -> (h', c')``.
    """

    def __init__(self, input_size: int, hidden_size: int, rng=None):
        super().__init__()
        self.input_size, self.hidden_size = sizes(input_size=input_size, hidden_size=hidden_size)
        self.input = Linear(self.input_size, 4 * self.hidden_size, rng=rng)
        self.hidden = Linear(self.hidden_size, 4 * self.hidden_size, bias=False, rng=rng)

    def initial_state(self, x):
        return zeros(x, self.hidden_size), zeros(x, self.hidden_size)

    def forward(self, x, state):
        return self.step(self.project(x), state)

    def project(self, x):
        """W x + b for the four gates: (..., in) -> (..., 4H)."""
        return self.input(x)

    def step(self, projected, state):
        """(h', c') from the projected input (B, 4H) and (h, c)."""
        h, c = state
        i, f, g, o = F.split(projected + self.hidden(h), self.hidden_size, axis=-1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        return F.sigmoid(o) * F.tanh(c), c

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


def hidden(state):
    """The output h of a cell state: h itself (GRU) or the first of (h, c) (LSTM)."""
    return state[0] if isinstance(state, tuple) else state


def map_state(f, *states):
    """Apply ``f`` to corresponding tensors of cell states (tensors, or tuples such as (h, c))."""
    if isinstance(states[0], tuple):
        return tuple(f(*parts) for parts in zip(*states))
    return f(*states)


def join_features(a, b):
    return F.concat([a, b], axis=-1)


class Recurrent(Module):
    """states, final = Recurrent(cell, backward_cell=None)(x, mask=None).

    Runs ``cell`` (a module with ``initial_state(x)``, ``project(x)`` and ``step(projected, state)``, as
    ``GRUCell`` and ``LSTMCell``) over x (B, T, in) from t = 0 to T − 1 and, when a ``backward_cell`` is given
    (bidirectional, Schuster & Paliwal 1997), that cell from t = T − 1 down to 0; both start from zeros.
    ``mask`` (B, T) is True at real steps; at a padded step the state is carried over unchanged, so with
    padding at the end the backward direction starts at each sequence's true end and the forward final
    state is that of its last real step.

    ``states`` (B, T, H), or (B, T, 2H) = [h→_t; h←_t] when bidirectional, is zero at padded steps.
    ``final`` is the cell's state after the last step, h (GRU) or (h, c) (LSTM); when bidirectional each
    part is [forward; backward], the backward direction's last step being t = 0. T must be concrete
    (see the module docstring).
    """

    def __init__(self, cell: Module, backward_cell: Module | None = None):
        super().__init__()
        self.cell = _cell("cell", cell)
        self.backward_cell = None if backward_cell is None else _cell("backward_cell", backward_cell)

    @property
    def bidirectional(self) -> bool:
        return self.backward_cell is not None

    def forward(self, x, mask=None):
        states, final = self.unroll(self.cell, x, mask, reverse=False)
        if self.backward_cell is None:
            return states, final
        backward_states, backward_final = self.unroll(self.backward_cell, x, mask, reverse=True)
        return join_features(states, backward_states), map_state(join_features, final, backward_final)

    @staticmethod
    def unroll(cell: Module, x, mask, reverse: bool, state=None) -> tuple:
        """Apply ``cell`` at each time step, from the last to the first when ``reverse``, its input projected for
        all steps at once; one ``scan`` node whose body is the cell's step, the outputs stacked in time order.
        ``state`` is the state before the first step (a decoder's, from its encoder); default zeros."""
        def step(state, inputs):
            projected, real = inputs if mask is not None else (inputs, None)
            new = cell.step(projected, state)
            if real is None:
                return new, hidden(new)
            real = F.expand_dims(real, -1)
            state = map_state(lambda n, old: F.where(real, n, old), new, state)
            return state, F.where(real, hidden(state), 0.0)

        projected = cell.project(x)
        final, states = F.scan(step, cell.initial_state(x) if state is None else state,
                               projected if mask is None else (projected, mask), reverse=reverse)
        return states, final

    def extra_repr(self) -> str:
        return f"bidirectional={self.bidirectional}"


def _cell(name: str, value) -> Module:
    """A module with the cell protocol that ``Recurrent`` calls: ``initial_state``, ``project`` and ``step``."""
    missing = [method for method in ("initial_state", "project", "step")
               if not callable(getattr(module(name, value), method, None))]
    if missing:
        raise TypeError(f"{name} must be a recurrent cell with initial_state, project and step (as GRUCell); "
                        f"{type(value).__name__} lacks {', '.join(missing)}")
    return value


class GRU(Recurrent):
    """A (bidirectional) GRU encoder: ``Recurrent`` over ``GRUCell``s, one per direction."""

    def __init__(self, input_size: int, hidden_size: int, bidirectional: bool = False, rng=None):
        bidirectional = flag("bidirectional", bidirectional)
        super().__init__(GRUCell(input_size, hidden_size, rng),
                         GRUCell(input_size, hidden_size, rng) if bidirectional else None)


class LSTM(Recurrent):
    """A (bidirectional) LSTM encoder: ``Recurrent`` over ``LSTMCell``s, one per direction."""

    def __init__(self, input_size: int, hidden_size: int, bidirectional: bool = False, rng=None):
        bidirectional = flag("bidirectional", bidirectional)
        super().__init__(LSTMCell(input_size, hidden_size, rng),
                         LSTMCell(input_size, hidden_size, rng) if bidirectional else None)
