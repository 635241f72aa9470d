"""Every public signature carries type hints, and the hints resolve.

The public surface is what docs/api.rst documents: every name in the
``__all__`` of each module under a ``currentmodule`` directive, and for
classes every public method (plus ``__init__`` and ``__call__``) defined in
skfedcp, inherited ones included. Each parameter except ``self``, ``cls``,
``*args`` and ``**kwargs`` and each return must be annotated, and
:func:`typing.get_type_hints` must evaluate the annotations (a misspelt name
in a string annotation fails there, not only under a type checker).
"""

import functools
import importlib
import inspect
import re
import typing
import warnings
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[1] / "docs" / "api.rst"


# Names imported only for type checkers (``if TYPE_CHECKING:``): optional
# packages (matplotlib, flwr) and lazily imported ones. get_type_hints gets
# them from here; a hint naming one whose package is absent is skipped.
_TYPE_CHECKING_NAMES = {
    "Axes": ("matplotlib.axes", "Axes"),
    "Figure": ("matplotlib.figure", "Figure"),
    "SubFigure": ("matplotlib.figure", "SubFigure"),
    "Context": ("flwr.app", "Context"),
    "ClientApp": ("flwr.clientapp", "ClientApp"),
    "Grid": ("flwr.serverapp", "Grid"),
    "ServerApp": ("flwr.serverapp", "ServerApp"),
    "pd": ("pandas", None),
}
_DUNDERS_CHECKED = ("__init__", "__call__")
_SKIPPED_PARAMS = ("self", "cls")


def _public_modules():
    """Modules listed under ``.. currentmodule::`` in docs/api.rst."""
    found = re.findall(r"^\.\. currentmodule:: (\S+)$", API.read_text(), re.M)
    return list(dict.fromkeys(found))


def _module_of(func):
    return getattr(inspect.unwrap(func), "__module__", "") or ""


def _methods(cls):
    """``(qualified name, function)`` of the public methods skfedcp defines."""
    seen = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("skfedcp"):
            continue
        for attr, value in vars(klass).items():
            if attr in seen:
                continue
            if attr.startswith("_") and attr not in _DUNDERS_CHECKED:
                continue
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if not inspect.isfunction(inspect.unwrap(value)):
                continue
            if not _module_of(value).startswith("skfedcp"):
                continue  # e.g. a NamedTuple's generated helpers
            seen.add(attr)
            yield f"{klass.__module__}.{klass.__qualname__}.{attr}", value


def _public_callables():
    """``(name, function)`` for every documented public function and method."""
    out, seen = [], set()
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                members = list(_methods(obj))
            elif inspect.isfunction(inspect.unwrap(obj)):
                members = [(f"{_module_of(obj)}.{obj.__qualname__}", obj)]
            else:
                continue  # constants such as CALIBRATORS
            for qualname, func in members:
                if qualname not in seen:
                    seen.add(qualname)
                    out.append((qualname, func))
    return out


def missing_annotations(func):
    """Parameters (and ``"return"``) of ``func`` without an annotation."""
    signature = inspect.signature(func)
    missing = [
        p.name
        for p in signature.parameters.values()
        if p.name not in _SKIPPED_PARAMS
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.annotation is p.empty
    ]
    if signature.return_annotation is signature.empty:
        missing.append("return")
    return missing


@functools.cache
def _type_checking_namespace():
    namespace, absent = {}, set()
    for name, (module_name, attr) in _TYPE_CHECKING_NAMES.items():
        try:
            with warnings.catch_warnings():  # flwr's dependencies warn on import
                warnings.simplefilter("ignore", DeprecationWarning)
                module = importlib.import_module(module_name)
        except ImportError:
            absent.add(name)
            continue
        namespace[name] = module if attr is None else getattr(module, attr)
    return namespace, absent


CALLABLES = _public_callables()
CHECKED = CALLABLES


def test_the_walk_finds_the_public_api():
    names = {n for n, _ in CALLABLES}
    # One function, one constructor, one inherited method, one classmethod.
    for expected in (
        "skfedcp.metrics._intervals.coverage_score",
        "skfedcp.plotting._interval.IntervalDisplay.__init__",
        "skfedcp.calibrators._ldp._label.LDPLabelCalibrator.plan",
        "skfedcp.plotting._client_coverage.ClientCoverageDisplay.from_estimator",
        "skfedcp.exceptions.InvalidMessageError.__init__",
        "skfedcp.flower._server_app.make_server_app",
    ):
        assert expected in names
    assert len(CHECKED) > 50


@pytest.mark.parametrize("name, func", CHECKED, ids=[n for n, _ in CHECKED])
def test_public_signature_is_annotated(name, func):
    missing = missing_annotations(func)
    assert missing == [], f"{name}: no annotation for {missing}"


@pytest.mark.parametrize("name, func", CHECKED, ids=[n for n, _ in CHECKED])
def test_annotations_resolve(name, func):
    namespace, absent = _type_checking_namespace()
    try:
        typing.get_type_hints(func, localns=namespace)
    except NameError as exc:
        if exc.name in absent:
            pytest.skip(f"{exc.name} comes from a package that is not installed")
        raise


def test_the_check_can_fail():
    def untyped(x, y: int = 0, *args, **kwargs):
        return x

    def typed(x: int, *args: int, **kwargs: str) -> int:
        return x

    class Thing:
        def __init__(self, a):
            self.a = a

    assert missing_annotations(untyped) == ["x", "return"]
    assert missing_annotations(typed) == []
    assert missing_annotations(Thing.__init__) == ["a", "return"]
    with pytest.raises(NameError):
        typing.get_type_hints(_misspelt_hint)


def _misspelt_hint(x: "Intt") -> None:  # noqa: F821
    """A string annotation naming nothing: get_type_hints must refuse it."""


def test_package_is_marked_typed():
    """PEP 561: the marker sits in the package and is declared package data."""
    root = Path(__file__).resolve().parents[1]
    assert (root / "skfedcp" / "py.typed").is_file()
    pyproject = (root / "pyproject.toml").read_text()
    assert re.search(r'^"skfedcp" = \[[^\]]*"py\.typed"', pyproject, re.M)
