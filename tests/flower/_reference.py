"""What the server fits from the messages nodes make with their own streams.

Shared by the in-memory adapter tests and the loopback deployment test.
"""

from sklearn.base import clone

from skfedcp import flower
from skfedcp.utils._random import spawn_random_states


def per_node_fit(cal, scores, ids, *, alpha, seeds, random_state, labels=None):
    """The server's fit on what each node sends with its own seeded stream.

    ``fit`` vectorises LDP-L and LDP-S with one stream for all simulated
    users; a deployment draws each node's noise from that node's stream
    (``seeds``, one per node), so the reference is ``fit_from_messages`` (the
    server path both share) on the messages made by ``client_step`` /
    ``client_respond`` with the nodes' streams. Nodes are ``0 .. len(seeds)-1``.
    """
    streams = [flower.node_random_state(seed) for seed in seeds]
    local = [scores[ids == k] for k in range(len(seeds))]
    sizes = [part.shape[0] for part in local]
    if cal.interactive:
        server = spawn_random_states(random_state, 1)[0]
        state = cal.server_init(sizes, alpha=alpha, random_state=server)
        rounds = []
        while not state["done"]:
            messages = [
                cal.client_respond(local[k], q, random_state=streams[k])
                if len(q["users"])
                else None
                for k, q in enumerate(state["queries"])
            ]
            rounds.append(messages)
            state = cal.server_update(state, messages)
        messages = rounds
    else:
        messages = [
            cal.client_step(
                local[k],
                labels=None if labels is None else labels[ids == k],
                random_state=streams[k],
            )
            for k in range(len(seeds))
        ]
    return clone(cal).fit_from_messages(
        messages, alpha=alpha, n_per_client=sizes, random_state=random_state
    )


def assert_same_fit(deployed, reference):
    """Every public fitted attribute of ``reference`` is equal in ``deployed``."""
    for name in vars(reference):  # read through the attributes: lazy ones computed
        if name.endswith("_") and not name.startswith("_"):
            expected = getattr(reference, name)
            assert repr(getattr(deployed, name)) == repr(expected), name
