"""Run skfedcp's calibration and FedChi2Selector on a Flower deployment.

Optional: ``pip install "skfedcp[flower]"`` installs the pinned Flower
version. The rest of skfedcp never imports Flower, and this sub-package
imports it inside its functions only. It sits above the calibrators and
:mod:`skfedcp.federated` (client partitions, secure sums), which never
import it.

* :func:`make_client_app` builds the ``ClientApp`` each node (hospital,
  device) runs: it loads the node's own rows and the shared fitted model,
  computes the conformity scores locally and answers the server's queries
  with the calibrator's ``client_step`` message, or with pairwise-masked
  FED-chi2 vectors. Per-row scores never leave a node unless it allows a
  strategy that sends them (``"central"``, ``"dp-central"``, ``"ldp-l"``).
* :func:`make_server_app` builds the ``ServerApp``: it asks the nodes for
  their sizes, hands their messages to the calibrator's
  :meth:`~skfedcp.calibrators.BaseCalibrator.fit_from_messages` (every
  message checked against the public plan), runs FED-chi2's two secure
  sums, and saves the fitted calibrators and selector.
* :func:`run_calibration` and :func:`run_chi2_selection` do one task on a
  Flower ``Grid``, for a custom ``ServerApp``.

The results equal the in-process ``fit`` on the same partition: bit for bit
for deterministic strategies, and for private ones when each node's
``seed`` (node config) is the stream the simulation gives that client
(:func:`simulation_seeds`; never in production). See the user guide page
*Deployment with Flower*.
"""

from ._app import make_client_app, run_calibration, run_chi2_selection
from ._fingerprint import model_fingerprint
from ._protocol import node_random_state, simulation_seeds
from ._server_app import DeploymentResult, make_server_app, save_result
from ._session import DeploymentReport, RoundRecord
from ._wire import MESSAGE_TYPE

__all__ = [
    "MESSAGE_TYPE",
    "DeploymentReport",
    "DeploymentResult",
    "RoundRecord",
    "make_client_app",
    "make_server_app",
    "model_fingerprint",
    "node_random_state",
    "run_calibration",
    "run_chi2_selection",
    "save_result",
    "simulation_seeds",
]
