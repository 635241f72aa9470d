"""Type aliases shared by the public signatures of skfedcp.

The aliases are real runtime objects (not strings), so
:func:`typing.get_type_hints` resolves every public signature; they are not
part of the public API and may change without notice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "ArrayLike",
    "ClientIds",
    "FloatArray",
    "IntArray",
    "BoolArray",
    "MatrixLike",
    "Messages",
    "ScoreLike",
    "ConformityScoreLike",
    "RandomStateLike",
    "SecureRandomStateLike",
    "SklearnRandomState",
]

#: Seeds and generators accepted by ``random_state`` (None: fresh OS entropy).
RandomStateLike: TypeAlias = (
    int | np.random.RandomState | np.random.Generator | np.random.SeedSequence | None
)

#: ``random_state`` passed to scikit-learn's ``check_random_state`` (data
#: generators and partitions): an int, a ``RandomState`` or None.
SklearnRandomState: TypeAlias = int | np.random.RandomState | None

#: ``random_state`` of a privacy mechanism: also ``"secure"`` (OS randomness).
SecureRandomStateLike: TypeAlias = RandomStateLike | Literal["secure"]

#: ``client_ids`` of shape ``(n_samples,)``; ``None`` means a single client.
ClientIds: TypeAlias = ArrayLike | None

#: What a server step receives: one dict per client, or the fields stacked.
Messages: TypeAlias = Sequence[Mapping[str, Any]] | Mapping[str, Any]


class ScoreLike(Protocol):
    """A conformity-score object: anything with a ``conformity_score`` method."""

    def conformity_score(self, *args: Any, **kwargs: Any) -> Any: ...


#: A score name, a score object, or ``score(model, X, y) -> scores``.
ConformityScoreLike: TypeAlias = str | ScoreLike | Callable[..., Any]

#: A feature matrix: array-like, DataFrame or sparse matrix.
MatrixLike: TypeAlias = ArrayLike

FloatArray: TypeAlias = NDArray[np.float64]
IntArray: TypeAlias = NDArray[np.int64]
BoolArray: TypeAlias = NDArray[np.bool_]
