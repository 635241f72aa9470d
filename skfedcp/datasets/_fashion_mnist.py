"""Fashion-MNIST from the idx files of the Debian package, without clients."""

from __future__ import annotations

import functools
import gzip
import os
from numbers import Integral
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch

from .._typing import SklearnRandomState
from ..utils._random import check_random_state
from ._base import XyClients, _check_bool, _fill_doc, _make_bunch

__all__ = ["load_fashion_mnist"]

_FASHION_MNIST_APT = "apt-get update && apt-get install -y dataset-fashion-mnist"
# Where the Debian package ``dataset-fashion-mnist`` puts its files; the
# environment variable SKFEDCP_FASHION_MNIST_DIR is searched first.
_FASHION_MNIST_DIRS = ("/usr/share/datasets/fashion-mnist",)
_FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def _fashion_mnist_dir():
    candidates = list(_FASHION_MNIST_DIRS)
    env = os.environ.get("SKFEDCP_FASHION_MNIST_DIR")
    if env:
        candidates.insert(0, env)
    names = _fashion_mnist_files()
    for directory in candidates:
        if all((Path(directory) / name).is_file() for name in names):
            return Path(directory)
    raise FileNotFoundError(
        f"Fashion-MNIST files not found in {candidates}. On Debian or Ubuntu "
        f"install them (as root) with: {_FASHION_MNIST_APT}  -- or point "
        "SKFEDCP_FASHION_MNIST_DIR at a folder holding the four idx .gz files."
    )


def _fashion_mnist_files():
    return [
        f"{part}-{kind}-idx{dim}-ubyte.gz"
        for part in ("train", "t10k")
        for kind, dim in (("images", 3), ("labels", 1))
    ]


def _read_idx(path, ndim):
    """Read an idx file (big-endian header, unsigned bytes)."""
    with gzip.open(path, "rb") as handle:
        raw = handle.read()
    magic = int.from_bytes(raw[:4], "big")
    if magic != 0x0800 + ndim:
        raise ValueError(f"{path} is not an idx{ndim} uint8 file (magic {magic:#x}).")
    shape = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != np.prod(shape):
        raise ValueError(f"{path} is truncated: expected shape {shape}.")
    return data.reshape(shape)


@functools.lru_cache(maxsize=1)
def _fashion_mnist_arrays():
    directory = _fashion_mnist_dir()
    image_parts: list[np.ndarray] = []
    label_parts: list[np.ndarray] = []
    for part in ("train", "t10k"):
        img = _read_idx(directory / f"{part}-images-idx3-ubyte.gz", 3)
        lab = _read_idx(directory / f"{part}-labels-idx1-ubyte.gz", 1)
        if img.shape[0] != lab.shape[0]:
            raise ValueError(f"Fashion-MNIST {part}: images and labels differ in size.")
        image_parts.append(img.reshape(img.shape[0], -1))
        label_parts.append(lab)
    images, labels = np.concatenate(image_parts), np.concatenate(label_parts)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


@_fill_doc
def load_fashion_mnist(
    *,
    n_samples: int | None = None,
    random_state: SklearnRandomState = None,
    return_X_y: bool = False,
) -> Bunch | XyClients:
    """Load Fashion-MNIST (10-class image classification, no clients).

    70,000 greyscale 28x28 images of clothing in 10 balanced classes, read
    from the idx files of the Debian package ``dataset-fashion-mnist``. It
    stands in for CIFAR-10 offline. There is no natural client variable; use
    :func:`partition_dirichlet` for a label-skew federation.

    =================  ==============
    Samples            70,000 (60,000 train then 10,000 test)
    Features           784 pixels, float64 in [0, 1]
    Target             int 0-9 (see ``target_names``)
    Clients            none (``client_ids`` is None)
    =================  ==============

    Parameters
    ----------
    n_samples : int, default=None
        Return a random subsample of this many rows, stratified by label
        (class proportions kept up to rounding), in the original row order.
        None returns all 70,000 rows: the 60,000 training images followed by
        the 10,000 test images.
    random_state : int, RandomState instance or None, default=None
        Seed of the subsample; ignored when ``n_samples`` is None; None draws fresh
        entropy from the operating system, never NumPy's global state.
    %(return_X_y_no_clients)s

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data`` (float64 of shape (n, 784): pixel / 255), ``target``
        (int64 of shape (n,)), ``client_ids`` (None), ``feature_names``
        (``pixel_0`` ... ``pixel_783``, row-major), ``target_names`` (the 10
        class names), ``frame`` (None) and ``DESCR``.
    (data, target, client_ids) : tuple if ``return_X_y`` is True

    Raises
    ------
    FileNotFoundError
        If the files are missing. Install them with
        ``apt-get update && apt-get install -y dataset-fashion-mnist`` (they
        land in ``/usr/share/datasets/fashion-mnist``), or set the
        environment variable ``SKFEDCP_FASHION_MNIST_DIR`` to a folder
        holding the four ``*-ubyte.gz`` files.

    Notes
    -----
    MIT licence, (c) 2017 Zalando SE. The raw bytes are read once and kept
    in memory (55 MB); each call converts the requested rows to float64
    (440 MB for all rows).

    References
    ----------
    .. [1] H. Xiao, K. Rasul and R. Vollgraf, "Fashion-MNIST: a Novel Image
       Dataset for Benchmarking Machine Learning Algorithms", arXiv:1708.07747,
       2017.

    Examples
    --------
    >>> from skfedcp.datasets import load_fashion_mnist
    >>> X, y, _ = load_fashion_mnist(n_samples=1000, random_state=0,
    ...                              return_X_y=True)  # doctest: +SKIP
    >>> X.shape, X.max() <= 1.0, sorted(set(y)) == list(range(10))  # doctest: +SKIP
    ((1000, 784), True, True)
    """
    return_X_y = _check_bool(return_X_y, "return_X_y")
    images, labels = _fashion_mnist_arrays()
    n_total = labels.shape[0]
    if n_samples is None:
        rows = slice(None)
    else:
        if isinstance(n_samples, bool) or not isinstance(n_samples, Integral):
            raise TypeError(f"n_samples must be an int or None; got {n_samples!r}.")
        n_classes = len(_FASHION_MNIST_CLASSES)
        if not n_classes <= n_samples <= n_total:
            raise ValueError(
                f"n_samples must be between {n_classes} (one row per class) and "
                f"{n_total}; got {n_samples}."
            )
        if n_samples == n_total:
            rows = slice(None)
        else:
            rows, _ = train_test_split(
                np.arange(n_total),
                train_size=int(n_samples),
                stratify=labels,
                random_state=check_random_state(random_state),
            )
            rows = np.sort(rows)
    data = images[rows].astype(np.float64) / 255.0
    target = labels[rows].astype(np.int64)
    if return_X_y:
        return data, target, None
    feature_names = [f"pixel_{i}" for i in range(images.shape[1])]
    return _make_bunch(
        data, target, None, feature_names, _FASHION_MNIST_CLASSES, None, "fashion_mnist"
    )
