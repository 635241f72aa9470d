"""Batched in-process simulation of pairwise-masked sums (what the estimators run)."""

import numpy as np
import scipy.sparse as sp

from ._fixed_point import _MINUS_ONE
from ._secure_aggregation import _CirculantGraph

# Mask words expanded at once (32 MB of uint64): bounds memory, keeps the
# arrays in cache-friendly chunks.
_MASK_CHUNK_WORDS = 2**22


class _MaskStream:
    """Uniform words of the ring Z/2^64 for the simulated masks.

    A keyed pseudorandom generator: AES-128 in counter mode (the PRG of the
    secure aggregation protocols, as :func:`_prg` for a deployment's masks)
    with a key drawn from ``rng``. Which key is drawn changes the masks, never
    a sum (the masks cancel).
    """

    def __init__(self, rng):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        key = rng.bit_generator.random_raw(2).tobytes()
        self._cipher = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()

    def filler(self, buf, n_words):
        """A function that writes ``n_words`` fresh words to ``buf[:n_words]``.

        ``buf`` is a 1-D C-contiguous uint64 array with two spare words (the
        cipher may write up to one block past the end of its output),
        initially zero. Each call of the returned function draws new words:
        the cipher encrypts ``buf[:n_words]`` in place, so the words are the
        next ones of the key stream XOR the previous content of ``buf``. A
        one-time pad on any value independent of the pad is uniform: every
        call gives fresh uniform words (the first, the key stream itself),
        without reading a buffer of zeros.
        """
        dest = memoryview(buf).cast("B")
        source = dest[: 8 * n_words]
        update = self._cipher.update_into

        def fill():
            update(source, dest)

        return fill


# Words per client-by-column chunk of the circulant simulation (1 MB per
# buffer): large enough that the per-layer Python calls cost little, small
# enough to stay in the last-level cache (measured best on a 2-core EPYC).
_CIRCULANT_CHUNK_WORDS = 2**17


def _sum_rows(a):
    """``np.sum(a, axis=0)`` of a 2-D uint64 array. Exact in the ring, like
    any order of summation.

    Rows of 64 words or more: numpy's reduction (one pass, no temporary).
    Shorter rows: by halving (numpy's axis-0 reduction pays per row).
    """
    if a.shape[0] <= 64 or a.shape[1] >= 64:
        return np.add.reduce(a, axis=0, dtype=np.uint64)
    h = a.shape[0] // 2
    acc = a[:h] + a[h : 2 * h]
    if a.shape[0] % 2:
        acc[0] += a[-1]
    while acc.shape[0] > 64:
        h = acc.shape[0] // 2
        if acc.shape[0] % 2:
            acc[0] += acc[-1]
        acc[:h] += acc[h : 2 * h]
        acc = acc[:h]
    return np.sum(acc, axis=0, dtype=np.uint64)


def _circulant_masked_sum(
    enc, survivors, graph, rng, *, n_clients, self_masks, max_words, trace=None
):
    """:func:`_masked_sum_simulation` on a :class:`_CirculantGraph`.

    The clients sit in position order ``graph.label``. Layer ``s`` draws one
    uniform block ``D`` (a row per position): the mask of the edge between
    positions ``i`` and ``i + s`` is ``m = D[i]`` if ``label[i] < label[i +
    s]``, else ``-D[i]`` (uniform too), so that the smaller client adds
    ``m`` and the larger subtracts it exactly when position ``i`` adds
    ``D[i]`` and position ``i + s`` subtracts it: two slices per layer.

    ``trace`` (tests only): a list that receives, per column chunk, the
    messages ``y``, the self masks ``t`` and each layer's ``(s, D)``, all in
    position order.
    """
    surv = np.asarray(survivors, dtype=np.intp)
    n = graph.n_clients
    length = enc.shape[1]
    label = graph.label
    alive_client = np.zeros(n_clients, dtype=bool)
    alive_client[surv] = True
    alive = alive_client[label]  # by position
    alive_pos = np.flatnonzero(alive)
    everyone = alive_pos.shape[0] == n
    # The survivors' vectors in position order (zero rows for the dropped
    # clients: their messages are never sent).
    if enc.shape[0] == n_clients:
        rows = label[alive_pos]
    else:
        row_of = np.full(n_clients, -1, dtype=np.intp)
        row_of[surv] = np.arange(surv.shape[0])
        rows = row_of[label[alive_pos]]
    if everyone:
        q = enc[rows]
    else:
        q = np.zeros((n, length), dtype=np.uint64)
        q[alive_pos] = enc[rows]
    layers = list(graph.layers())
    # Edges between a survivor and a dropped client, per layer: the server
    # recovers their masks. ``plus``: the survivor (at i) added +D[i];
    # ``minus``: the survivor (at i + s) subtracted D[i].
    fixes = []
    for s, m in layers:
        here, there = alive[:m], alive[(np.arange(m) + s) % n]
        fixes.append((np.flatnonzero(here & ~there), np.flatnonzero(~here & there)))
    stream = _MaskStream(rng)
    width = max(1, min(length, int(max_words) // max(n, 1)))
    # The self masks are drawn straight into the message buffer (y = t,
    # then y += q): two buffers of a chunk instead of three.
    y_buf = np.zeros(n * width + 2, dtype=np.uint64)
    d_buf = np.zeros(n * width + 2, dtype=np.uint64)
    total = np.empty(length, dtype=np.uint64)
    plan_w = None
    for c0 in range(0, length, width):
        c1 = min(c0 + width, length)
        w = c1 - c0
        if w != plan_w:  # views and fillers for this chunk width
            plan_w = w
            y = y_buf[: n * w].reshape(n, w)
            fill_t = stream.filler(y_buf, n * w)
            steps = []
            for (s, m), (plus, minus) in zip(layers, fixes, strict=True):
                d = d_buf[: m * w].reshape(m, w)
                # Position i adds D[i]; position (i + s) % n subtracts it.
                if m == n:
                    sub = [(y[s:], d[: n - s]), (y[:s], d[n - s :])]
                else:  # the half layer of an even complete graph: s = m = n/2
                    sub = [(y[s:], d)]
                fill_d = stream.filler(d_buf, m * w)
                steps.append((s, fill_d, y[:m], d, sub, plus, minus))
        # ---- clients: y = q + t + (pairwise masks), position by position ----
        z = np.zeros(w, dtype=np.uint64)
        t = None
        if self_masks:
            fill_t()  # y = t: fresh words (key stream XOR the previous y)
            if trace is not None:
                t = y.copy()
            # ---- server: the survivors' self masks, recovered, removed ----
            z -= _sum_rows(y if everyone else y[alive_pos])
            y += q[:, c0:c1]
        else:
            y[...] = q[:, c0:c1]
        drawn = []
        for s, fill_d, y_add, d, sub, plus, minus in steps:
            fill_d()
            if trace is not None:
                drawn.append((s, d.copy()))
            np.add(y_add, d, out=y_add)
            for y_sub, d_sub in sub:
                np.subtract(y_sub, d_sub, out=y_sub)
            # ---- server: recovered masks of survivor-dropped edges ----
            if plus.size:
                z -= np.sum(d[plus], axis=0, dtype=np.uint64)
            if minus.size:
                z += np.sum(d[minus], axis=0, dtype=np.uint64)
        # ---- server: the survivors' messages (self masks removed above) ----
        z += _sum_rows(y if everyone else y[alive_pos])
        if trace is not None:
            trace.append((c0, y.copy(), t, drawn))
        total[c0:c1] = z
    return total


def _masked_sum_simulation(
    enc,
    survivors,
    edges,
    rng,
    *,
    n_clients=None,
    self_masks=True,
    max_words=None,
):
    """Simulate one pairwise-masked secure sum of the rows of ``enc``.

    Every survivor's message ``y_i = q_i + t_i + sum_{j > i} m_ij - sum_{j <
    i} m_ij (mod 2**64)`` is materialized (it is the server's whole view);
    the server adds the messages, then removes the survivors' self masks
    ``t_i`` and the pairwise masks shared with dropped clients. The
    arithmetic is that of :func:`mask_input` and :func:`unmask_sum`, batched
    over clients: each mask is expanded once, column chunk by column chunk,
    and used by both parties that know it (the two ends of an edge, or the
    owner of a self mask and the server after recovery). The masks are
    uniform words of a PRG keyed from ``rng`` (a simulation: no key
    agreement; see :class:`_MaskStream`).

    A :class:`_CirculantGraph` (what the estimators use) is simulated layer
    by layer with slices (:func:`_circulant_masked_sum`); an edge list, with
    a sparse incidence matrix (the reference for any graph).

    Parameters
    ----------
    enc : ndarray of uint64, shape (n_clients, length) or (n_survivors, length)
        Every client's encoded vector (rows of dropped clients are ignored),
        or, when ``n_clients`` is given, the survivors' vectors only.
    survivors : ndarray of int
        Sorted indices of the clients whose messages arrive.
    edges : _CirculantGraph or ndarray of shape (n_edges, 2)
        Masking graph: a circulant graph, or pairs ``(a, b)`` with ``a < b``.
    rng : numpy.random.Generator
        Source of the masks.
    n_clients : int, optional
        Number of clients; given, ``enc`` holds the survivors' rows only.
    self_masks : bool, default=True
        Whether clients add self masks.
    max_words : int, optional
        Mask words expanded at once (a bound on memory).

    Returns
    -------
    total : ndarray of uint64, shape (length,)
        ``sum_{i in survivors} enc[i] (mod 2**64)``, bit for bit.
    """
    if isinstance(edges, _CirculantGraph):
        return _circulant_masked_sum(
            enc,
            survivors,
            edges,
            rng,
            n_clients=enc.shape[0] if n_clients is None else n_clients,
            self_masks=self_masks,
            max_words=_CIRCULANT_CHUNK_WORDS if max_words is None else max_words,
        )
    if max_words is None:
        max_words = _MASK_CHUNK_WORDS
    surv = np.asarray(survivors, dtype=np.intp)
    length = enc.shape[1]
    if n_clients is None:
        n_clients = enc.shape[0]
        rows_of = surv
    else:
        rows_of = np.arange(surv.shape[0])
    alive = np.zeros(n_clients, dtype=bool)
    alive[surv] = True
    a, b = edges[:, 0], edges[:, 1]
    n_edges = a.shape[0]
    # Each survivor's mask sum, as a (n_survivors x n_edges) incidence matrix
    # over the ring: +1 where the survivor is the smaller end, -1 = 2**64 - 1
    # where it is the larger one (uint64 products wrap modulo 2**64).
    pos = np.full(n_clients, -1, dtype=np.intp)
    pos[surv] = np.arange(surv.shape[0])
    ends = np.concatenate([a, b])
    keep = alive[ends]
    sign = np.concatenate(
        [np.ones(n_edges, dtype=np.uint64), np.full(n_edges, _MINUS_ONE)]
    )
    incidence = sp.csr_matrix(
        (sign[keep], (pos[ends[keep]], np.tile(np.arange(n_edges), 2)[keep])),
        shape=(surv.shape[0], n_edges),
        dtype=np.uint64,
    )
    # Edges between a survivor and a dropped client: the server recovers them.
    plus_fix = np.flatnonzero(alive[a] & ~alive[b])  # survivor added +m
    minus_fix = np.flatnonzero(~alive[a] & alive[b])  # survivor added -m
    bitgen = rng.bit_generator
    width = max(1, int(max_words) // max(n_edges + surv.shape[0], 1))
    total = np.empty(length, dtype=np.uint64)
    for c0 in range(0, length, width):
        c1 = min(c0 + width, length)
        w = c1 - c0
        y = enc[rows_of, c0:c1]  # a copy: the messages
        if self_masks:
            t = bitgen.random_raw((surv.shape[0], w))
            y += t
        if n_edges:
            m = bitgen.random_raw((n_edges, w))
            y += incidence @ m
        # ---- server: only y, the dropped set and recovered masks ----
        z = np.sum(y, axis=0, dtype=np.uint64)
        if self_masks:
            z -= np.sum(t, axis=0, dtype=np.uint64)
        if n_edges:
            z -= np.sum(m[plus_fix], axis=0, dtype=np.uint64)
            z += np.sum(m[minus_fix], axis=0, dtype=np.uint64)
        total[c0:c1] = z
    return total
