"""What each node loads: its own rows and the shared model (paths in node config)."""

import joblib
import numpy as np


def load_data(context):
    """This node's calibration rows, from ``data-path`` (an .npz file)."""
    with np.load(context.node_config["data-path"]) as data:
        return data["X"], data["y"]


def load_selection_data(context):
    """Non-negative features and class labels for FED-chi2."""
    with np.load(context.node_config["data-path"]) as data:
        return data["X_select"], data["y_select"]


def load_model(context):
    """The shared fitted model, from ``model-path`` (a joblib file)."""
    return joblib.load(context.node_config["model-path"])


def load_server_model(context):
    """The server's copy of the model (run config ``model-path``), or None."""
    path = context.run_config.get("model-path", "")
    return joblib.load(path) if path else None
