"""The constant-velocity paper's table from the README's command line: one sweep over the ETH/UCY test groups, read
back from the store, equal to the reference code's values (tests/domains/test_cvm_reference.py holds them and checks
the five groups through the same predictor and domain without the command line). A whole-data run: in the
integration suite (CI's ``integration/commands`` step).
"""

from __future__ import annotations

import pytest

from tests.domains.test_cvm_reference import CVM_REFERENCE, TOLERANCE


def test_the_paper_table_comes_out_of_a_command_line_sweep(mlflow_store, client, tmp_path):
    """The README's line: one sweep over the five test groups, read back from the store."""
    import uuid

    from tests.conftest import PROJECT_ROOT, SHARED_DIR
    from tests.inprocess import run_module

    if not SHARED_DIR.is_dir():
        pytest.skip(f"the shared folder {SHARED_DIR} is absent (it sits beside the clone in CI only)")
    name = f"cvm-table-{uuid.uuid4().hex[:8]}"
    args = [
        "-m",
        "+experiment=trajectory_eth_ucy",
        f"domain.path={SHARED_DIR / 'data' / 'eth_ucy'}",
        "domain.test_group=eth,hotel,univ,zara1,zara2",
        "agent=trajectory/constant_velocity",
        "protocol.num_preds=1",  # deterministic: one prediction is the whole distribution
        "metrics.k_values=[1]",
        "tracking.log_record=false",
        "figures=false",
        "progress=false",
        f"tracking.uri={mlflow_store['uri']}",
        f"tracking.artifact_location={mlflow_store['artifacts']}",
        f"experiment_name={name}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    # python -m owl_eval, in the test process (tests/inprocess.py)
    proc = run_module("owl_eval", args, cwd=PROJECT_ROOT, unset=("OWL_EVAL_PARENT_RUN_ID",), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id], filter_string="tags.windows = 'cvm'")
    by_group = {r.data.params["domain.test_group"]: r for r in runs}
    assert sorted(by_group) == sorted(CVM_REFERENCE)
    for group, (count, ade_ref, fde_ref) in CVM_REFERENCE.items():
        r = by_group[group]
        assert r.info.status == "FINISHED"
        assert r.data.metrics["detail/num_agents"] == count, group
        assert r.data.metrics["ade_marginal"] == pytest.approx(ade_ref, rel=TOLERANCE), group
        assert r.data.metrics["fde_marginal"] == pytest.approx(fde_ref, rel=TOLERANCE), group
