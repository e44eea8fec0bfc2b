"""The ``attngraph`` command (also ``python -m attngraph``).

    attngraph models                                   the registry
    attngraph summary MODEL [--depth N] [--dim T=128]  module tree, parameters, FLOPs, memory
    attngraph render MODEL --out FILE [--depth N] [--view backward] [--roll | --unroll] [--dim T=128]
    attngraph export MODEL --onnx FILE [--dim T=128]   the forward graph as an ONNX model (the onnx extra)
    attngraph view MODEL [--out FILE.html] [--depth N] one HTML page: the graph to explore, attention weights
    attngraph check-grads MODEL                        gradcheck every parameter, tiny float64 configuration
    attngraph train MODEL [--data TASK|FILE] [--steps N] [--out DIR] [--resume]
                                                       train a registered model on its task (attngraph.demos.registered)
    attngraph demo [NAME] [demo options]               train a demo and write its pictures
    attngraph info                                     versions, threading, CUDA, graphviz
    attngraph warmup [--dtype float32]                 compile the kernels into numba's cache
    attngraph --version                                the installed version

check-grads and warmup show the kernels numba compiles (``attngraph.train.progress``): a bar on stderr when it
is a terminal, else one line.

MODEL is a registry name or ``path/to/file.py:NAME``, where NAME is a ``ModelSpec`` (every command works
with it) or a function of the ``--config`` settings returning a traced ``Graph`` (render and summary).
``--config key=value`` (repeatable) changes a setting (values are Python literals, else strings) and must
have the type of the setting's default (an int may replace a float); ``--tiny`` starts from the model's tiny
configuration.

Exit status and errors: every bad input is found before slow work (building, compiling, training) and is
reported on ONE line of stderr, with no traceback, and status 2: bad options, paths and model settings, and the
library's errors that are also ``ValueError`` (``DataError``, ``ShapeError``, ``BindingError``: a bad value).
Its other errors (``RenderError``, ``DeviceError``, ``NonFiniteError``...: failures while working) print one
line and exit with 1, as a gradient mismatch in ``check-grads`` does. Ctrl-C prints "interrupted" and exits
with 130. Any other exception is a bug and shows its traceback.
"""
from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import platform
import shutil
import sys
import textwrap
from functools import cache
from pathlib import Path

import numpy as np

from .demos.arguments import Parser, one_line, positive_int, seed, writable_folder
from .errors import AttnGraphError


def _models(args) -> int:
    """The registry: each model's name and description, and its settings on the line below."""
    from . import models
    from .inspect.table import table
    rows = []
    for name in models.names():
        spec = models.spec(name)
        rows += [(name, spec.description), ("", ", ".join(f"{k}={v}" for k, v in spec.defaults.items()))]
    print("\n".join(table(("model", "description and settings"), rows, left=("model", "description and settings"))))
    return 0


def _summary(args) -> int:
    graph, model = _checked_graph(args)
    print(graph.summary(depth=args.depth, model=model, **args.dim))
    return 0


def _render(args) -> int:
    from .render import render_graph
    _check_output_file(args)
    path = render_graph(_checked_graph(args)[0], args.out, view=args.view, depth=args.depth, roll=args.roll,
                        parameter_nodes=args.parameter_nodes, direction=args.direction, dpi=args.dpi,
                        bodies=args.bodies, **args.dim)
    print(f"wrote {path}")
    return 0


def _export(args) -> int:
    from .export.onnx import export_onnx, onnx_package
    _check_writable(args, "--onnx", Path(args.onnx), "model.onnx")
    if Path(args.onnx).suffix.lower() != ".onnx":
        args.parser.error(f"--onnx {args.onnx}: give a file name ending in .onnx, such as model.onnx")
    onnx_package()
    print(f"wrote {export_onnx(_checked_graph(args)[0], args.onnx, **args.dim)}")
    return 0


def _view(args) -> int:
    """The viewer of MODEL's graph and of its attention weights on the example batch (seeded by ``--seed``, as
    ``render --view backward`` builds it); token ids show as numbers, the special ones of the text models by name."""
    from .models.tokens import SPECIALS
    from .errors import RenderError
    from .render.html import check_path, to_html
    run = Path(args.model).is_dir()     # a run's output folder (runs/copy): its dashboard
    out = Path(args.out or (Path(args.model) / "dashboard.html" if run else f"{args.model.rpartition(':')[2]}.html"))
    _check_writable(args, "--out", out, "model.html")
    try:
        check_path(out)
    except RenderError as e:
        args.parser.error(f"--out {out}: {e}")
    if run:
        from .render.dashboard import dashboard_html
        dashboard_html(args.model, out)
        print(f"wrote {out}")
        return 0
    graph, model = _checked_graph(args)
    inputs = None
    if model is not None:
        batch = _target(args).batch(model, np.random.default_rng(args.seed), 2)
        inputs = {name: value for name, value in batch.items() if name in graph.inputs}
    to_html(graph, out, inputs=inputs, vocabulary=dict(enumerate(SPECIALS)),
            title=args.model, view=args.view, depth=args.depth, **args.dim)
    print(f"wrote {out}")
    return 0


def _check_grads(args) -> int:
    from .inspect import gradcheck_parameters
    from .train.progress import CompileProgress
    spec = _spec(args)
    model = _model(args, spec, tiny=True).astype(np.float64).eval()
    batch = {k: v.astype(np.float64) if v.dtype.kind == "f" else v
             for k, v in spec.batch(model, np.random.default_rng(args.seed), 2).items()}
    with CompileProgress():
        report = gradcheck_parameters(lambda *xs: spec.loss(model, **dict(zip(batch, xs))), model,
                                      *batch.values())
    print(report)
    print(f"{len(report.entries)} parameters of {spec.name} (tiny, float64): "
          + ("all gradients match" if report.ok else "GRADIENT MISMATCH"))
    return 0 if report.ok else 1


def _profile(args) -> int:
    from .inspect import profile
    spec = _spec(args)
    graph, batch = _model_step(spec, _model(args, spec, args.tiny), np.random.default_rng(0))
    print(profile(graph, runs=args.runs, **batch).table(rows=args.rows))
    return 0


def _train(args) -> int:
    """``attngraph train``: the checks of every argument, then ``demos.registered.train``."""
    import json

    from . import models
    from .demos.common import Run
    from .demos.registered import Data, train
    from .errors import DataError
    from .nn.init import manual_seed
    from .train import checkpoint
    spec = _spec(args)
    keys = set(spec.batch(_model(args, spec, True), np.random.default_rng(0), 1))
    try:
        data = Data(spec, args.data, keys)
    except DataError as e:
        args.parser.error(str(e))
    config = {**spec.defaults, **(spec.tiny if args.tiny else {}), **data.settings, **_config(args, spec.defaults)}
    manual_seed(args.seed)
    model = _built(args, models.get, spec.name, **config)
    try:
        data.check(model)
    except DataError as e:
        args.parser.error(f"--data {args.data}: {e}")
    model_info = json.loads(json.dumps({"name": spec.name, "config": config, "data": data.name}))
    saved = Path(args.out) / "checkpoint.npz"
    if args.resume:
        if not saved.is_file():
            args.parser.error(f"--resume: no checkpoint at {saved}; train without --resume first")
        metadata = checkpoint.read(saved).metadata
        if metadata.get("model") != model_info:
            args.parser.error(f"--resume: {saved} was trained as {metadata.get('model')}, not {model_info}: give the "
                              "same MODEL, --tiny, --config and --data, or another --out")
        if metadata["step"] >= args.steps:
            args.parser.error(f"--steps {args.steps}: {saved} is at step {metadata['step']} already")
    run = Run(args.parser, [*args.argv, "--out", str(args.out)])
    train(run, spec, model, data, args.batch, args.lr, args.checkpoint_every or args.steps, args.resume, model_info)
    return 0


def _default_demo() -> str:
    from .demos import DEFAULT
    return DEFAULT


def _demo(args) -> int:
    from .demos import DEMOS
    name = args.name or _default_demo()
    if name not in DEMOS:
        args.parser.error(f"unknown demo {name!r}; choose from {', '.join(DEMOS)}")
    importlib.import_module(f"attngraph.demos.{name}").main(args.rest)
    return 0


def _demo_list() -> str:
    """The demos, each with the first paragraph of its docstring (read from the source: importing them is slow)."""
    from .demos import DEMOS
    folder = Path(__file__).parent / "demos"
    lines = []
    for name in DEMOS:
        doc = ast.get_docstring(ast.parse((folder / f"{name}.py").read_text(encoding="utf-8")))
        about = " ".join(doc.split("\n\n")[0].split()).removeprefix(f"{name.capitalize()}: ")
        lines.append(textwrap.fill(about, 100, initial_indent=f"  {name:<12} ", subsequent_indent=" " * 15))
    return "demos:\n" + "\n".join(lines)


def _info(args) -> int:
    from ops.cpu.threads import threading_info
    layer, threads = threading_info()
    rows = [("attngraph", _version("attngraph")), ("python", platform.python_version())]
    rows += [(package, _version(package)) for package in ("numpy", "numba", "llvmlite", "scipy", "networkx",
                                                          "graphviz", "tqdm", "matplotlib")]
    rows += [("numba threading layer", layer), ("numba threads", threads),
             ("idle threads", "OMP_WAIT_POLICY={} OPENBLAS_THREAD_TIMEOUT={} (see ops/cpu/threads.py)".format(
                 *(os.environ.get(k, "unset") for k in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT")))),
             ("CUDA", _cuda()),
             ("graphviz dot", shutil.which("dot") or "not found: SVG needs it (apt-get install graphviz, "
                                                     "brew install graphviz, conda install graphviz)")]
    for key, value in rows:
        print(f"{key:<24} {value}")
    return 0


def _warmup(args) -> int:
    from tqdm.auto import tqdm

    from . import models
    from .core.primitive import REGISTRY
    from .train.progress import CompileProgress
    work = [functools.partial(_program_step, program, np.dtype(dtype)) for dtype in args.dtype
            for program in _programs()]
    if "float32" in args.dtype:
        work += [_default_demo_steps] + [functools.partial(_registered_step, name) for name in models.names()]
    covered = set()
    with (tqdm(work, desc="compiling kernels into numba's cache", unit=" programs", disable=None) as bar,
          CompileProgress(bar=bar)):
        for run in bar:
            covered |= run()
    missing = sorted(set(REGISTRY) - covered)
    print(f"compiled the kernels of {len(REGISTRY) - len(missing)} primitives and of the optimizers for "
          f"{', '.join(args.dtype)}" + (f"; not exercised: {', '.join(missing)}" if missing else "")
          + ("; and those generated for the default demo and the registered models" if "float32" in args.dtype
             else ""))
    return 0


def _program_step(program, dtype: np.dtype) -> set[str]:
    """Run ``program``'s gradient graph and the Trainer's gradient handling on it; the ops it ran."""
    graph, feeds = _exercise(program, dtype)
    step = graph.compile()
    _train_step(step(**feeds)[1:], [feeds[name] for name in _PARAMETERS])
    return {n.op for n in graph.nodes} | {n.op for n in step.graph.nodes}


def _registered_step(name: str) -> set[str]:
    """Run a training step's graph of registered model ``name`` (tiny); the ops it ran."""
    from . import models
    graph, batch = _model_step(models.spec(name), models.get(name, tiny=True), np.random.default_rng(0))
    step = graph.compile()
    step(**batch)
    return {n.op for n in graph.nodes} | {n.op for n in step.graph.nodes}


def _model_step(spec, model, rng: np.random.Generator):
    """The training-step graph (the loss and its gradient) of ``model``, a registered model of ``spec``, and the
    batch of 2 it is traced on, drawn with ``rng``."""
    from .core.api import trace
    batch = spec.batch(model, rng, 2)
    return trace(lambda **b: spec.loss(model, **b), **batch).grad(), batch


def _default_demo_steps() -> set[str]:
    """Two training steps and a small evaluation of the default demo, quietly, into a temporary folder: the
    kernels that the fusion pass generates for its model compile too. The ops it ran are not recorded."""
    import contextlib
    import io
    import tempfile

    from .demos import DEFAULT
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        importlib.import_module(f"attngraph.demos.{DEFAULT}").main(["--steps", "2", "--heldout", "4", "--out", folder])
    return set()


def _train_step(grads: list, values: list) -> None:
    """What the Trainer does with gradients, so that its kernels compile too: accumulate two micro-batches,
    clip their norm, and take a step of every optimizer (on copies of ``values``)."""
    from .core.parameter import Parameter
    from .train import SGD, Adam, AdamW, GradientAccumulator, clip_grad_norm
    accumulator = GradientAccumulator()
    for _ in range(2):
        accumulator.add(grads)
    clip_grad_norm(accumulator.grads, 1e-3)
    params = [(name, Parameter(value.copy())) for name, value in zip(_PARAMETERS, values)]
    for optimizer in (SGD(params, lr=0.1, momentum=0.9), Adam(params), AdamW(params)):
        optimizer.step(accumulator.grads)


_PARAMETERS = ["x", "y", "table"]


def _programs() -> list:
    """Small functions of (x, y, tokens, table) that together use every primitive, forward and backward."""
    import attngraph as ag

    def elementwise(x, y, tokens, table):
        h = ag.where(x > y, ag.gelu(x), ag.gelu(y, approximate="none")) + ag.maximum(x, y) * (x * x + 1) ** 1.5
        h = h + ag.exp(-x) * ag.log(y * y + 1) / ag.sqrt(x * x + 1) - ag.tanh(x) * ag.sigmoid(y) + ag.relu(ag.erf(x))
        h = h + ag.minimum(x, y) + ag.sin(x) * ag.cos(y)
        h = h + ag.clip(ag.silu(ag.abs(x)) * ag.rsqrt(y * y + 1), -1.0, 1.0)
        h = h + ag.logaddexp(ag.atan2(x, y), ag.copysign(ag.expm1(x), y)) + ag.log1p(y * y) * ag.exp2(ag.tan(x))
        h = h + ag.asin(ag.tanh(x)) * ag.acos(ag.sigmoid(y)) + ag.atanh(ag.tanh(x) * 0.5) + ag.acosh(x * x + 1)
        h = h + ag.sinh(x) * ag.cosh(y) + ag.asinh(x) + ag.atan(y) + ag.log2(y * y + 1) - ag.log10(x * x + 1)
        h = h + ag.floor(x) + ag.ceil(y) + ag.round(x) + ag.trunc(y) + ag.sign(x)
        h = h + x // y + x % y + ag.fmod(x, y)
        bits = ((tokens & 6 | 1) ^ (tokens << 2 >> 1)) // 2 % 3 + ag.fmod(~tokens, 3)
        h = h + ag.sum(bits).astype(h.dtype) + ag.bitcast(ag.bitcast(x, f"int{8 * x.dtype.itemsize}"), x.dtype)
        h = ag.where(ag.logical_or(ag.isnan(h), ag.isinf(h)), 0.0, h) * ag.isfinite(y).astype(h.dtype)
        keep = ag.logical_or(ag.logical_and(x >= y, ag.not_equal(x, y)), ag.logical_not(ag.less_equal(x, y)))
        return ag.sum(h * keep.astype(h.dtype) + ag.equal(x, y).astype(h.dtype) + (x < y).astype(h.dtype))

    def shapes(x, y, tokens, table):
        h = ag.concat(ag.split(x, 2, axis=-1)[::-1], axis=-1) + ag.stop_gradient(y)
        h = h + ag.logsumexp(h, -1, keepdims=True) - ag.min(h * y, 0)
        at = np.tile(np.array([3, 0, 1, 1]), (2, 3, 1))
        h = h + ag.gather(ag.scatter_reduce(h, 2, at, h * y, "amax"), 2, at)
        return ag.mean(ag.transpose(ag.reshape(h, (2, 3, 2, 2)), (0, 1, 3, 2))) + ag.sum(ag.max(h * y, 0))

    def normalization(x, y, tokens, table):
        logits = ag.layer_norm(x, table[0], table[1], eps=1e-5)
        return ag.cross_entropy(logits, tokens) + ag.mean(ag.log_softmax(logits)) + ag.sum(ag.softmax(y, mask=x > 0))

    def attention(x, y, tokens, table):
        e = ag.embedding(table, tokens) + ag.embedding(table, ag.arange(tokens))
        a = ag.scaled_dot_product_attention(e, x, ag.dropout(y, 0.1), bias=ag.sum(x, -1, keepdims=True).mT, causal=True)
        return ag.sum(a @ ag.embedding(table, ag.relative_distance(a, a, 2))[0].mT) + ag.sum(a @ e.mT)

    def convolution(x, y, tokens, table):
        h = ag.conv2d(ag.reshape(x, (2, 3, 2, 2)), ag.reshape(y, (2, 3, 2, 2)), padding=1)
        pooled, at = ag.max_pool2d(h, 2, 1, return_indices=True)
        adaptive = ag.adaptive_max_pool2d(h, 2) * ag.adaptive_avg_pool2d(h, 2)
        return ag.sum(pooled * ag.avg_pool2d(h, 2, 1) + adaptive) + ag.sum(at.astype(h.dtype))

    def ordering(x, y, tokens, table):
        top, at = ag.topk(x, 2)
        h = ag.sort(y, axis=1, descending=True)[0] + ag.cumsum(x, 1) + ag.argmax(y, -1, keepdims=True).astype(x.dtype)
        h = h + ag.cumprod(y, 1) + ag.logcumsumexp(x, -1) + ag.cummax(x, 0)[0] + ag.cummin(y, 2)[0]
        h = h + ag.prod(x, 2, keepdims=True)
        return ag.sum(top * at.astype(x.dtype)) + ag.sum(h * y) + ag.sum(ag.argmin(x, 0).astype(x.dtype))

    return [elementwise, shapes, normalization, attention, convolution, ordering]


def _exercise(program, dtype: np.dtype):
    """The gradient graph of ``program`` and inputs to run it on."""
    import attngraph as ag
    rng = np.random.default_rng(0)
    feeds = dict(x=rng.standard_normal((2, 3, 4)).astype(dtype), y=rng.standard_normal((2, 3, 4)).astype(dtype),
                 tokens=np.array([[0, 1, 2], [3, 0, 1]]), table=rng.standard_normal((5, 4)).astype(dtype))
    return ag.trace(program, **feeds).grad(wrt=_PARAMETERS), feeds


def _graph(args):
    """The forward graph of MODEL (the loss and its gradient for ``--view backward`` or ``both``), and the model
    traced (None for a graph function)."""
    from . import models
    from .core.api import trace
    from .core.graph import Graph
    target, forward = _target(args), getattr(args, "view", "forward") == "forward"
    if not isinstance(target, models.ModelSpec):
        try:
            inspect.signature(target).bind(**args.config)
        except TypeError as e:
            args.parser.error(f"{args.model}: {e}")
        graph = _built(args, target, **_config(args, _defaults(target)))
        if not isinstance(graph, Graph):
            args.parser.error(f"{args.model} returned {type(graph).__name__}, not a traced Graph")
        return graph if forward else graph.grad(), None
    model = _model(args, target, args.tiny)
    if forward:
        return trace(model, **target.inputs(model)), model
    return _model_step(target, model, np.random.default_rng(args.seed))[0], model


def _model(args, spec, tiny: bool):
    """The model of ``spec`` with the ``--config`` settings."""
    from . import models
    return _built(args, models.get, spec.name, tiny=tiny, **_config(args, spec.defaults))


def _built(args, factory, *positional, **config):
    """``factory(*positional, **config)``; what it rejects (an unknown setting, a size its constructor refuses with
    ``ValueError`` or that does not fit in memory) is a usage error."""
    try:
        return factory(*positional, **config)
    except (AttnGraphError, ValueError, MemoryError) as e:
        args.parser.error(f"{args.model}: {e}")


def _config(args, defaults: dict) -> dict:
    """The ``--config`` settings, each checked against the type of the default it replaces: a bool for a bool,
    an int for an int, an int or a float for a float (made a float), a string for a string."""
    accepted = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
    config = {}
    for key, value in args.config.items():
        default = defaults.get(key)
        types = accepted.get(type(default), (type(value),))
        if type(value) not in types:
            args.parser.error(f"--config {key}={value!r}: expected {' or '.join(t.__name__ for t in types)}, "
                              f"as its default {default!r}")
        config[key] = float(value) if type(default) is float else value
    return config


def _defaults(function) -> dict:
    """The default values of ``function``'s parameters, by name."""
    return {p.name: p.default for p in inspect.signature(function).parameters.values() if p.default is not p.empty}


def _check_output_file(args) -> None:
    """``render --out``: a file name with a known suffix, in a folder that exists (created if need be) and can
    be written, checked before the graph is built."""
    from .errors import RenderError
    from .render.graph import format_of
    out = Path(args.out)
    try:
        format_of(out)
    except RenderError as e:
        args.parser.error(f"--out {out}: {e}")
    _check_writable(args, "--out", out, "graph.svg")


def _check_writable(args, option: str, out: Path, example: str) -> None:
    """A file name, not a folder, in a folder that exists (created if need be) and can be written."""
    if out.is_dir():
        args.parser.error(f"{option} {out} is a folder; give a file name such as {out / example}")
    try:
        writable_folder(out.parent)
    except argparse.ArgumentTypeError as e:
        args.parser.error(f"{option} {out}: {e}")


def _checked_graph(args):
    """``_graph``, with the ``--dim`` names checked against the graph's symbolic dimensions."""
    from .inspect import binding
    graph, model = _graph(args)
    try:
        binding(graph, **args.dim)
    except AttnGraphError as e:
        args.parser.error(str(e))
    return graph, model


def _spec(args):
    """MODEL as a ``ModelSpec``: checking gradients needs the model's batches and loss."""
    from . import models
    target = _target(args)
    if not isinstance(target, models.ModelSpec):
        args.parser.error(f"{args.model} is a graph function; checking gradients needs a ModelSpec (a model, "
                          "its batches and its loss)")
    return target


def _target(args):
    """A ``ModelSpec`` from the registry, or the object named by ``path/to/file.py:NAME``."""
    from . import models
    file, colon, name = args.model.rpartition(":")
    if not colon or not file.endswith(".py"):
        try:
            return models.spec(args.model)
        except AttnGraphError as e:
            args.parser.error(str(e) + "; or give path/to/file.py:NAME")
    if not Path(file).is_file():
        args.parser.error(f"no file {file}")
    try:
        target = getattr(_load(Path(file).resolve()), name, None)
    except SyntaxError as e:
        args.parser.error(f"{file}:{e.lineno}: {e.msg}")
    if isinstance(target, models.ModelSpec):
        if models.registry.REGISTRY.get(target.name) is not target:
            _built(args, models.register, target)
        return target
    if not callable(target):
        args.parser.error(f"{file} has no ModelSpec or graph function named {name!r}")
    return target


@cache
def _load(path: Path):
    """The module of a model file, executed once (a ModelSpec in it registers once)."""
    loader = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def _cuda() -> str:
    """The CUDA device, the simulator, or why there is neither (ops/_cuda.py asks numba.cuda)."""
    from ops import _cuda
    info = _cuda.describe()
    if "unavailable" in info:
        return f"unavailable: {info['unavailable']}"
    if info["simulator"]:
        return f"numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1; {info['backend']})"
    major, minor = info["compute_capability"]
    return (f"{info['name']}, compute capability {major}.{minor}, {info['memory'] / 2 ** 30:.1f} GiB "
            f"({info['backend']})")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _setting(text: str) -> tuple[str, object]:
    key, equals, value = text.partition("=")
    if not equals or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _learning_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive learning rate, got {text!r}")
    return value


def _task_names() -> list[str]:
    from .train.data import TASKS
    return list(TASKS)


def _dim(text: str) -> tuple[str, int]:
    key, value = _setting(text)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE with a positive integer size, got {text!r}")
    return key, value


def _parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = Parser(prog="attngraph", description="Build, see and train attention models.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, run, help, **options):
        sub = commands.add_parser(name, help=help, description=help, **options)
        sub.set_defaults(run=run, parser=sub)
        return sub

    def model_options(sub, seeded: str | None = None):
        """MODEL and --config; --seed where an example batch is drawn (``seeded`` says when)."""
        sub.add_argument("model", metavar="MODEL", help="a registry name or path/to/file.py:NAME")
        sub.add_argument("--config", type=_setting, action="append", default=[], metavar="KEY=VALUE",
                         help="change a setting of the model (repeatable)")
        if seeded:
            sub.add_argument("--seed", type=seed, default=0, help=f"seed of the example batch ({seeded})")

    def view_option(sub):
        sub.add_argument("--view", choices=("forward", "backward", "both"), default="forward",
                         help="the forward graph (default), the loss's gradient graph on the example batch "
                              "(backward), or both passes")

    def size_options(sub, dim_help="bind a symbolic dimension for FLOPs and sizes, e.g. T=128 (repeatable)"):
        sub.add_argument("--tiny", action="store_true", help="start from the model's tiny configuration")
        sub.add_argument("--dim", type=_dim, action="append", default=[], metavar="NAME=SIZE", help=dim_help)

    def picture_options(sub):
        size_options(sub)
        sub.add_argument("--depth", type=positive_int, help="show modules down to this depth (default: all)")

    command("models", _models, "list the models of the registry")
    sub = command("summary", _summary, "print a model's module tree with shapes, parameters and FLOPs")
    model_options(sub)
    picture_options(sub)
    sub = command("render", _render, "draw a model's graph (.svg, .png, .pdf or .dot)")
    model_options(sub, seeded="--view backward or both")
    picture_options(sub)
    sub.add_argument("--out", required=True, help="the file to write; its suffix gives the format")
    view_option(sub)
    rolling = sub.add_mutually_exclusive_group()
    rolling.add_argument("--roll", action="store_true", default=None,
                         help="draw identical consecutive blocks and the steps of a loop once, marked ×N "
                              "(default: when the picture is large)")
    rolling.add_argument("--unroll", action="store_false", dest="roll",
                         help="draw every repeated block and every step of a loop")
    sub.add_argument("--parameter-nodes", action="store_true", help="draw parameters as nodes of their own")
    sub.add_argument("--direction", choices=("down", "right"), default="down",
                     help="where the data flows: top to bottom (default) or left to right")
    sub.add_argument("--dpi", type=positive_int, help="resolution of a .png (graphviz's default: 96)")
    sub.add_argument("--bodies", action="store_true",
                     help="draw the body of each time loop (scan: an RNN over a sequence) beside its box")
    sub = command("export", _export, "write a model's forward graph as an ONNX model (needs the onnx extra: "
                                     "pip install 'attngraph[onnx]')")
    model_options(sub)
    size_options(sub, "fix a symbolic dimension, e.g. T=128 (repeatable; the others stay symbolic)")
    sub.add_argument("--onnx", required=True, metavar="FILE", help="the ONNX file to write")
    sub = command("view", _view, "write one HTML page to explore a model's graph (fold modules, search, details "
                                 "of a node) and its attention weights on an example batch")
    model_options(sub, seeded="its attention weights, and --view backward or both")
    picture_options(sub)
    sub.add_argument("--out", help="the .html file to write (default: MODEL.html)")
    view_option(sub)
    sub = command("check-grads", _check_grads, "gradcheck every parameter of a tiny float64 configuration")
    model_options(sub, seeded="the batch the gradients are checked on")
    sub = command("profile", _profile, "time the kernels of a training step (the loss and its gradient on a batch "
                                       "of 2) per op and per module")
    model_options(sub)
    sub.add_argument("--tiny", action="store_true", help="start from the model's tiny configuration")
    sub.add_argument("--runs", type=positive_int, default=10, help="timed runs, after one untimed (default: 10)")
    sub.add_argument("--rows", type=positive_int, default=20, help="ops and modules shown (default: 20)")
    sub = command("train", _train, "train a registered model on its task; writes checkpoints, metrics, curves and "
                                   "pictures as the demos do (mpiexec -n N attngraph train: data parallel)",
                  epilog="DATA: 'task' (the model's own), a task name (" + ", ".join(_task_names()) + ") for a "
                         "model reading src, tgt_in, tgt_out or tokens, targets, or a UTF-8 text file for a "
                         "character language model (tokens, targets).")
    sub.add_argument("model", metavar="MODEL", help="a registry name or path/to/file.py:NAME (a ModelSpec)")
    sub.add_argument("--config", type=_setting, action="append", default=[], metavar="KEY=VALUE",
                     help="change a setting of the model (repeatable)")
    sub.add_argument("--tiny", action="store_true", help="start from the model's tiny configuration")
    sub.add_argument("--data", metavar="DATA", help="what to train on (default: task; see below)")
    sub.add_argument("--steps", type=positive_int, default=1000, help="optimizer steps in all (default: 1000)")
    sub.add_argument("--batch", type=positive_int, default=32, help="examples per step (default: 32)")
    sub.add_argument("--lr", type=_learning_rate, default=1e-3, help="Adam's peak learning rate (default: 1e-3)")
    sub.add_argument("--out", type=Path, help="output folder (default: runs/MODEL)")
    sub.add_argument("--checkpoint-every", type=positive_int, metavar="N",
                     help="save OUT/checkpoint.npz every N steps (default: at the end only)")
    sub.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.npz to --steps in all")
    sub.add_argument("--seed", type=seed, default=0, help="seed of the initialization, the batches and dropout")
    sub.add_argument("--threads", type=positive_int, default=1,
                     help="CPU threads for numba's kernels and BLAS (default: 1; see attngraph.demos.common)")
    sub = command("demo", _demo, "train a demo model and write its pictures", epilog=_demo_list(),
                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.add_argument("name", nargs="?", help=f"which demo (default: {_default_demo()}; see below)")
    sub.add_argument("rest", nargs=argparse.REMAINDER,
                     help="options passed to the demo (--out, --steps, ...; attngraph demo NAME --help lists them)")
    command("info", _info, "versions, threading layer, CUDA and graphviz")
    sub = command("warmup", _warmup, "compile the kernels, and those generated for the default demo and a training "
                                     "step of every registered model (float32), into numba's cache")
    sub.add_argument("--dtype", nargs="+", choices=("float32", "float64"), default=["float32", "float64"])
    return parser


def main(argv=None) -> int:
    """Run the command line; returns the exit status (module docstring: 0, 1, 2 or 130)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["demo"] and argv[1:2] and argv[1].startswith("-") and argv[1] not in ("-h", "--help"):
        argv.insert(1, _default_demo())     # `attngraph demo --steps 5`: options for the default demo
    try:
        args = _parser().parse_args(argv)
        if hasattr(args, "config"):
            args.config = dict(args.config)
        if hasattr(args, "dim"):
            args.dim = dict(args.dim)
        if args.command == "train":
            args.argv, args.out = argv[1:], args.out or Path("runs") / args.model.rpartition(":")[2]
        return args.run(args)
    except SystemExit as e:                 # argparse's usage errors (2) and --help (0)
        return e.code if isinstance(e.code, int) else 2
    except AttnGraphError as e:
        print(f"attngraph: error: {one_line(e)}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:                 # the reader stopped early (attngraph summary gpt | head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
