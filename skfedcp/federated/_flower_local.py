"""An in-process stand-in for a Flower ``Grid``: nodes are ClientApp calls.

For tests, benchmarks and dry runs of a deployment: every message goes
through Flower's own serialization (``deflate`` / ``inflate`` of the record
tree) and the node's ``ClientApp`` exactly as a SuperNode would call it, but
without processes or network. Flower is imported inside the methods.
"""

import uuid

__all__ = ["InMemoryGrid"]


def _roundtrip(content):
    """Serialize and rebuild a ``RecordDict`` as the wire would."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    from flwr.supercore.inflatable.inflatable_utils import (
        inflate_object_from_contents,
    )

    contents = {
        oid: obj.deflate() for oid, obj in get_all_nested_objects(content).items()
    }
    return inflate_object_from_contents(content.object_id, contents)


class InMemoryGrid:
    """Run a ``ClientApp`` for several simulated nodes in this process.

    Parameters
    ----------
    client_app : flwr.clientapp.ClientApp
        The app every node runs.
    node_configs : sequence of dict
        One node config per node (``client-id``, paths, ``seed``, ...).
    run_config : dict, default=None
        The run config the nodes see.
    first_node_id : int, default=101
        Node ids are ``first_node_id, first_node_id + 1, ...``.

    Attributes
    ----------
    unresponsive : set of int
        Node ids that never reply (simulates a time-out).
    contexts : dict of int to flwr.app.Context
        Each node's context; ``state`` persists across messages.
    """

    def __init__(self, client_app, node_configs, *, run_config=None, first_node_id=101):
        from flwr.app import Context, RecordDict
        from flwr.supercore.task_identity import TaskIdentity

        # A ServerApp process has its identity set by Flower; emulate it so
        # that messages can be built in this process.
        for name, value in (("run_id", 1), ("node_id", 1), ("task_id", 0)):
            try:
                getattr(TaskIdentity, name)
            except RuntimeError:
                setattr(TaskIdentity, name, value)
        self.client_app = client_app
        self.unresponsive = set()
        self._replies = {}
        self.contexts = {
            first_node_id + i: Context(
                run_id=1,
                node_id=first_node_id + i,
                node_config=dict(cfg),
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
            for i, cfg in enumerate(node_configs)
        }

    def get_node_ids(self):
        """Return the ids of the simulated nodes."""
        return list(self.contexts)

    def push_messages(self, messages):
        """Deliver each message to its node's ``ClientApp``; return message ids."""
        from flwr.app import Error, Message

        ids = []
        for message in messages:
            message_id = uuid.uuid4().hex
            message.metadata.__dict__["_message_id"] = message_id
            ids.append(message_id)
            node = message.metadata.dst_node_id
            if node in self.unresponsive or node not in self.contexts:
                continue
            delivered = Message(
                content=_roundtrip(message.content), metadata=message.metadata
            )
            try:
                reply = self.client_app(delivered, self.contexts[node])
            except Exception as exc:  # as a SuperNode: an error reply
                reason = f"{type(exc)}:<'{exc}'>"
                reply = Message(Error(code=2, reason=reason), reply_to=delivered)
            else:
                reply = Message(
                    content=_roundtrip(reply.content), metadata=reply.metadata
                )
            self._replies[message_id] = reply
        return ids

    def pull_messages(self, message_ids):
        """Return (and forget) the replies to ``message_ids`` that arrived."""
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages, *, timeout=None):
        """Push the messages and return every reply (no waiting)."""
        return self.pull_messages(self.push_messages(messages))
