"""A password in a tracking URI is never shown or written: not in the error line, the console, Hydra's files
(``.hydra/*.yaml``, the job log), nor anywhere in the store's folder, whatever form the URI takes (docs/TEAM.md).

Each command line points a store in a temporary folder at a database URI that refuses connections (127.0.0.1
port 1), holding a password made of the marker ``zq7K``: the command fails with one ``error:`` line before any run,
and the marker, or any piece of the password, must appear nowhere in the output nor in any file under the launch
folder (the store's SQLite file included). A real PostgreSQL sweep is checked the same way in
``integration/test_team_store.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.harness import CliResult, Workspace, assert_clean_failure, run_cli

MARKER = "zq7K"
HOST = "127.0.0.1:1"  # nothing listens on port 1: connection refused at once

# (id, URI): every piece of each password starts with the marker.
URIS = [
    ("hash", f"postgresql://owl:{MARKER}a#{MARKER}b@{HOST}/db"),
    ("slash", f"postgresql://owl:{MARKER}a/{MARKER}b@{HOST}/db"),
    ("question", f"postgresql://owl:{MARKER}a?{MARKER}b@{HOST}/db?sslmode=disable"),
    ("query-password", f"postgresql://owl@{HOST}/db?password={MARKER}a"),
    ("query-sslpassword", f"postgresql://owl@{HOST}/db?sslmode=disable&sslpassword={MARKER}a"),
    ("percent-encoded", f"postgresql+psycopg2://owl:{MARKER}a%23{MARKER}b@{HOST}/db"),
    ("unescaped-at", f"postgresql://owl:{MARKER}a@{MARKER}b@{HOST}/db"),
    ("quote-and-space", f"postgresql://owl:{MARKER}a'{MARKER}b {MARKER}c@{HOST}/db"),
    ("mysql", f"mysql+pymysql://owl:{MARKER}a#{MARKER}b@{HOST}/db"),
    ("unknown-scheme", f"postgres://owl:{MARKER}a/{MARKER}b@{HOST}/db"),
]
ENV_CASES = ["hash", "query-password", "unescaped-at"]
SWEEP_CASES = ["slash", "query-sslpassword"]
COMPARE_CASES = ["hash", "unknown-scheme"]
RUN = ["+experiment=ond_given_detection", "protocol.num_trials=3"]


class UriWorkspace(Workspace):
    """The catalogue's workspace, with ``tracking.uri`` left to the test (the store folder still holds Hydra's)."""

    def overrides(self) -> list[str]:
        return [o for o in super().overrides() if not o.startswith("tracking.uri=")]


@pytest.fixture()
def ws(workspace) -> UriWorkspace:
    return UriWorkspace(root=workspace.root, store=workspace.store, in_process=workspace.in_process)


def leaks(result: CliResult, root: Path) -> list[str]:
    """Where the marker is: ``stdout``, ``stderr``, or a file under ``root`` (read as bytes: a SQLite file too)."""
    found = [name for name, text in (("stdout", result.stdout), ("stderr", result.stderr)) if MARKER in text]
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            if MARKER.encode() in path.read_bytes():
                found.append(str(path.relative_to(root)))
    return found


def hydra_quoted(uri: str) -> str:
    """``uri`` as a Hydra override value: in double quotes (``#``, ``?``, spaces and quotes then pass)."""
    return '"' + uri.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.mark.parametrize("uri", [u for _, u in URIS], ids=[i for i, _ in URIS])
def test_a_password_of_a_uri_on_the_command_line_is_nowhere(ws, uri):
    result = run_cli("owl_eval", [*RUN, f"tracking.uri={hydra_quoted(uri)}"], ws)
    line = assert_clean_failure(result, "tracking.uri")
    assert not leaks(result, ws.root), f"{leaks(result, ws.root)}\n{line}"
    assert (ws.store / "hydra" / ".hydra" / "overrides.yaml").is_file()  # Hydra wrote its files: they were searched


@pytest.mark.parametrize("uri", [u for i, u in URIS if i in ENV_CASES], ids=ENV_CASES)
def test_a_password_of_mlflow_tracking_uri_is_nowhere(ws, uri):
    result = run_cli("owl_eval", RUN, ws, env={"MLFLOW_TRACKING_URI": uri})
    line = assert_clean_failure(result, "tracking.uri")
    assert "***" in line
    assert not leaks(result, ws.root), f"{leaks(result, ws.root)}\n{line}"


@pytest.mark.parametrize("uri", [u for i, u in URIS if i in SWEEP_CASES], ids=SWEEP_CASES)
def test_a_sweep_whose_database_refuses_shows_no_password(ws, uri):
    result = run_cli("owl_eval", ["-m", *RUN, "seed=0,1", f"tracking.uri={hydra_quoted(uri)}"], ws)
    line = assert_clean_failure(result, "tracking.uri")
    assert "***" in line
    assert not leaks(result, ws.root), f"{leaks(result, ws.root)}\n{line}"


# -- the redaction itself ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        (f"postgresql://owl:{MARKER}a#b@db.lab:5432/mlflow", "postgresql://owl:***@db.lab:5432/mlflow"),
        (
            f"postgresql://owl:{MARKER}a/b?c@db.lab/mlflow?sslmode=require",
            "postgresql://owl:***@db.lab/mlflow?sslmode=require",
        ),
        (f"postgresql://owl@db.lab/mlflow?password={MARKER}&x=1", "postgresql://owl@db.lab/mlflow?password=***&x=1"),
        (
            f"postgresql://owl@db.lab/mlflow?sslpassword={MARKER}&passfile=/home/owl/.pgpass",
            "postgresql://owl@db.lab/mlflow?sslpassword=***&passfile=/home/owl/.pgpass",
        ),
        (f"mysql+pymysql://owl:{MARKER}%40x@db.lab:3306/mlflow", "mysql+pymysql://owl:***@db.lab:3306/mlflow"),
        (f"postgresql+psycopg2://owl:{MARKER}@b@db.lab/mlflow", "postgresql+psycopg2://owl:***@db.lab/mlflow"),
        (
            "postgresql://owl:pw@db.lab/mlflow?application_name=a@b",
            "postgresql://owl:***@db.lab/mlflow?application_name=a@b",
        ),
        (f"postgresql://owl/x:{MARKER}@db.lab/mlflow", "postgresql://***@db.lab/mlflow"),  # no SQLAlchemy URL
        (f"http://owl:{MARKER}#@mlflow.lab:5000", "http://owl:***@mlflow.lab:5000"),
        (f"owl:{MARKER}@db.lab", "***@db.lab"),  # no scheme: everything before the '@'
    ],
)
def test_redacted_hides_every_form_of_password_and_keeps_the_rest(uri, shown):
    from owl_eval.tracking.settings import redacted

    assert redacted(uri) == shown


def test_redacted_hides_what_sqlalchemy_reads_as_the_password():
    """Whatever SQLAlchemy would send as the password (or, with an unescaped '@', as part of the host) is hidden."""
    from sqlalchemy.engine import make_url

    from owl_eval.tracking.settings import redacted

    for _, uri in URIS:
        shown = redacted(uri)
        assert MARKER not in shown and "127.0.0.1" in shown, shown
        if uri.startswith("postgres://"):
            continue  # not a scheme SQLAlchemy 2 reads
        url = make_url(uri)
        for secret in (url.password, url.host, *url.query.values()):
            if secret and MARKER in str(secret):
                assert str(secret) not in shown


def test_scrub_finds_remembered_secrets_outside_any_uri_and_in_yaml_quotes(tmp_path):
    from omegaconf import OmegaConf

    from owl_eval.tracking.redaction import remember, scrub, scrub_file

    uri = f"postgresql://owl:{MARKER}x'{MARKER}y z@db.lab/mlflow"
    remember(uri)
    assert MARKER not in scrub(f"driver said: password {MARKER}x'{MARKER}y z was refused")
    path = tmp_path / "overrides.yaml"
    OmegaConf.save(OmegaConf.create([f'tracking.uri="{uri}"', "seed=0"]), path)
    assert MARKER in path.read_text()  # YAML wrote the quote as ''
    scrub_file(path)
    assert MARKER not in path.read_text()
    assert OmegaConf.to_container(OmegaConf.load(path)) == [
        'tracking.uri="postgresql://owl:***@db.lab/mlflow"',
        "seed=0",
    ]


def test_a_yaml_file_is_parsed_for_hidden_secrets_only_where_it_can_hold_one(tmp_path, monkeypatch):
    """Hydra's files are read value by value only where a value could hide a secret from the text scrub: the
    escaped, quoted URIs below are still found (their passwords never appear in the file afterwards), a file without
    a user part or secret query key is left unparsed (and unchanged)."""
    from owl_eval.tracking import redaction

    monkeypatch.setattr(redaction, "_secrets", set())  # nothing remembered by earlier tests of this process
    monkeypatch.setattr(redaction, "_uris", set())
    hidden = {
        "password.yaml": 'uri: "postgresql://owl:pa\\"ss%sword@db.lab/mlflow"\n',  # YAML escapes the quote
        "token.yaml": "uri: 'http://mlflow.lab/?api%%5Fkey=%sword'\n",  # percent-encoded key
        "pwd.yaml": 'overrides:\n- tracking.uri="mysql://db.lab/m?x=1&PWD=%sword"\n',
        "spaced.yaml": 'uri: "http://mlflow.lab/?my password=%sword"\n',  # a key with a space
    }
    for name, text in hidden.items():
        text = text % MARKER
        assert redaction._values_may_hold_secret(text), name
        path = tmp_path / name
        path.write_text(text)
        redaction.scrub_file(path)
        assert MARKER not in path.read_text(), (name, path.read_text())
    hydra_like = (
        "hydra:\n  help:\n    footer: 'Powered by Hydra (https://hydra.cc)'\n  job_logging:\n    formatters:\n"
        "      simple:\n        format: '[%(asctime)s][%(name)s] %(message)s'\n    handlers:\n      console:\n"
        "        stream: ext://sys.stdout\n  output_subdir: ???\ntracking:\n  uri: sqlite:///outputs/mlflow.db\n"
    )
    redaction._secrets.clear()  # those of the files above, remembered when they were hidden
    redaction._uris.clear()
    assert not redaction._values_may_hold_secret(hydra_like)
    redaction.remember(f"postgresql://owl:{MARKER}@db.lab/mlflow")  # a remembered secret: every file is read
    assert redaction._values_may_hold_secret(hydra_like)


@pytest.mark.parametrize("uri", [u for i, u in URIS if i in COMPARE_CASES], ids=COMPARE_CASES)
def test_owl_eval_compare_shows_no_password(tmp_path, uri):
    from tests.inprocess import COMPARE, run_module

    result = run_module(
        COMPARE, ["experiment=x", "--uri", uri], cwd=tmp_path, unset=("MLFLOW_TRACKING_URI",), timeout=60
    )
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: tracking.uri"), result.stderr
    assert MARKER not in result.stdout + result.stderr, result.stderr


def test_the_printed_open_lines_hide_the_password():
    from owl_eval.runner.cli.summary import open_command

    for uri in (f"http://owl:{MARKER}@mlflow.lab:5000", f"postgresql://owl:{MARKER}#x/y@db.lab/mlflow"):
        shown = open_command(uri, "1", "0a1b")
        assert MARKER not in shown and "***@" in shown, shown
