"""The ClientApp every node runs: scores stay on the node."""

from skfedcp.flower import make_client_app

from .task import load_data, load_model, load_selection_data

# Per-row scores leave a node only for "central" / "dp-central", and only if
# the node operator allows it: --node-config 'allow-raw-scores=true'.
app = make_client_app(
    load_data,
    load_model=load_model,
    load_selection_data=load_selection_data,
    conformity_score="absolute",
)
