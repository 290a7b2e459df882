"""Which runs are averaged together, and what each group is called.

A group is one agent in one setting: the agent's identity (its config name, ``agent``, plus every ``agent.*``
param that differs between the runs: two classifiers of one scikit-learn agent are two agents) and the setting
(every other tag or param that differs, except the seed and a param that copies it; :func:`grouping_keys`). Runs
made with different settings are never averaged together; within a group each seed counts once.

Labels (:func:`agent_labels`, :func:`setting_label`) are made once for a whole comparison, unique by
construction, and every table, figure, file and parent-run key uses them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from owl_eval.tracking.keys import CONFIG_HASH_TAG

NOT_GROUPED = {"seed"}  # what varies between the runs averaged together
# Tags that name what a run evaluated: group keys with readable labels, tried before the params behind them.
GROUP_TAGS = ("domain", "condition", "baseline")
# Params that never make two runs different evaluations.
BOOKKEEPING_PARAMS = {"seed", "progress", "figures", "experiment_name"}
BOOKKEEPING_PREFIXES = ("tracking.", "hydra.")


# -- which groups --------------------------------------------------------------------------------------
def _sweep_values(key: str, value) -> bool:
    """Whether a sweeper param's value sweeps (``a,b``, ``range(1,3)``, a list of two or more)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if isinstance(value, Sequence) and not isinstance(value, str):
        return len(value) > 1
    try:
        (override,) = OverridesParser.create().parse_overrides([f"{key}={value}"])
    except Exception:  # not override syntax: not a sweep Hydra could run (the data still group by it if it varies)
        return False
    return override.is_sweep_override()


def swept_keys(overrides: Iterable[str], sweeper_params: Mapping | None = None) -> list[str]:
    """Keys a sweep varies, from the command line (``agent=a,b``, ``protocol.num_trials=range(2,5)``) and from
    ``hydra.sweeper.params`` (declared in an experiment file), seed excluded, agent first."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    keys = [o.key_or_group.lstrip("+~") for o in parsed if o.is_sweep_override()]
    keys += [str(k) for k, v in (sweeper_params or {}).items() if _sweep_values(str(k), v)]
    keys = [k for k in keys if k not in NOT_GROUPED]
    return ["agent"] + [k for k in dict.fromkeys(keys) if k != "agent"]


def run_value(run, key: str) -> str:
    """A group key's value in a run: the tag of that name (agent, domain, condition...), else the param."""
    if key in run.data.tags:
        return run.data.tags[key]
    return run.data.params.get(key, "none")


def run_seed(run) -> str:
    return run.data.tags.get("seed") or run.data.params.get("seed") or run.info.run_id


def _determined(runs: Sequence, key: str, by: Sequence[str]) -> bool:
    """Whether ``key`` takes one value among the runs that agree on every key of ``by``."""
    seen: dict[tuple, str] = {}
    for r in runs:
        where = tuple(run_value(r, b) for b in by)
        value = run_value(r, key)
        if seen.setdefault(where, value) != value:
            return False
    return True


def _seed_copy(runs: Sequence, name: str) -> bool:
    """A param that holds the run's seed (``protocol.ste.seed: ${seed}``): it varies with the seed and only with it."""
    return all(r.data.params.get(name) == run_seed(r) for r in runs)


def grouping_keys(runs: Sequence, swept: Sequence[str] = ()) -> list[str]:
    """The keys that split runs into groups: the agent, then every tag or param whose value is not fixed by
    the keys before it, except the seed, a param that copies the seed, a per-job output directory and
    bookkeeping (``tracking.*``, ``progress``...). Runs made with different settings never share a group,
    whichever seeds finished: seeds 0-1 at ``protocol.num_trials=50`` and seeds 2-3 at ``=20`` are two groups.

    ``swept``: keys the sweep declares (:func:`swept_keys`), tried first after the agent so that the group labels
    name what the sweep varied. Candidates are tried tags first (readable labels: ``condition-given``), then swept
    keys, then params with few values first.
    """
    runs = dedupe(runs)  # the runs compare() averages
    keys = ["agent"]
    params = {
        name
        for r in runs
        for name in r.data.params
        if name not in BOOKKEEPING_PARAMS and not name.startswith(BOOKKEEPING_PREFIXES)
    }

    def values(name: str) -> list:
        return [r.data.params.get(name) for r in runs]

    def job_directory(name: str) -> bool:
        # an absolute path that differs in every run is where a job wrote (``${hydra:runtime.output_dir}/...``)
        seen = values(name)
        return len(seen) > 1 and len(set(seen)) == len(seen) and all(str(v).startswith("/") for v in seen)

    params = {name for name in params if not job_directory(name) and not _seed_copy(runs, name)}
    order = lambda name: (len(set(values(name))), any("/" in str(v) for v in values(name)), name)  # noqa: E731
    candidates = [*GROUP_TAGS, *swept, *sorted(params, key=order)]
    for key in dict.fromkeys(candidates):
        if key in keys or key in NOT_GROUPED:
            continue
        if not _determined(runs, key, keys):
            keys.append(key)
    return keys


def with_required(runs: Sequence, chosen: Sequence[str], swept: Sequence[str] = ()) -> list[str]:
    """``chosen`` group keys (``--group``), then every key :func:`grouping_keys` needs that they leave out: a
    chosen grouping may order or add keys, never pool runs made with different settings."""
    required = grouping_keys(runs, swept)
    chosen = ["agent", *(k for k in chosen if k != "agent")]
    return [*dict.fromkeys([*chosen, *(k for k in required if k not in chosen and not _determined(runs, k, chosen))])]


def dedupe(runs: Sequence) -> list:
    """One run per config (latest first wins): re-runs of an identical config must not count twice."""
    seen: set[str] = set()
    out = []
    for r in sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True):
        h = r.data.tags.get(CONFIG_HASH_TAG) or r.info.run_id
        if h not in seen:
            seen.add(h)
            out.append(r)
    return out


def one_per_seed(runs: Sequence) -> list:
    """The latest run of each seed: two runs of one seed in a group (e.g. ``progress`` toggled) are one sample."""
    seen: set[str] = set()
    out = []
    for r in sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True):
        if run_seed(r) not in seen:
            seen.add(run_seed(r))
            out.append(r)
    return out


# -- what a group is called ------------------------------------------------------------------------------
Pairs = tuple[tuple[str, str], ...]


def is_agent_key(key: str) -> bool:
    """Whether a group key is part of the agent's identity (``agent``, ``agent.classifier.max_depth``)."""
    return key == "agent" or key.startswith("agent.")


def split_group(group: Pairs) -> tuple[Pairs, Pairs]:
    """``group`` -> (the agent's identity, the setting): ``(("agent", "ond/sklearn"), ("agent.k", "5"),
    ("protocol.condition", "given"))`` -> ``((("agent", "ond/sklearn"), ("agent.k", "5")),
    (("protocol.condition", "given"),))``."""
    return tuple(p for p in group if is_agent_key(p[0])), tuple(p for p in group if not is_agent_key(p[0]))


def _short_names(keys: Sequence[str]) -> dict[str, str]:
    """Each dotted key by its shortest unique tail: ``protocol.condition`` -> ``condition`` unless another key
    ends in ``.condition`` too; a ``_target_`` by what it builds (``classifier._target_`` -> ``classifier``)."""
    bare = {key: key.removesuffix("._target_") for key in keys}
    out: dict[str, str] = {}
    for key, name in bare.items():
        parts = name.split(".")
        for size in range(1, len(parts) + 1):
            tail = ".".join(parts[-size:])
            if sum(1 for other in bare.values() if other == tail or other.endswith("." + tail)) == 1:
                out[key] = tail
                break
        else:
            out[key] = key
    return out


def _short_value(key: str, value: str) -> str:
    """A ``_target_`` as its class name (``sklearn.ensemble.RandomForestClassifier`` -> ``RandomForestClassifier``)."""
    return value.rsplit(".", 1)[-1] if key.endswith("_target_") and value.count(".") else value


def _path_tails(paths: Sequence[str]) -> dict[str, str]:
    """Each agent config name by its shortest unique tail of ``/`` parts: ``ond/knn_novelty`` -> ``knn_novelty``,
    but ``a/nm`` and ``b/nm`` stay whole."""
    out: dict[str, str] = {}
    for path in paths:
        parts = path.strip("/").split("/")
        for size in range(1, len(parts) + 1):
            tail = "/".join(parts[-size:])
            if sum(1 for p in paths if p.strip("/") == tail or p.strip("/").endswith("/" + tail)) == 1:
                out[path] = tail
                break
        else:
            out[path] = path
    return out


def agent_labels(identities: Iterable[Pairs]) -> dict[Pairs, str]:
    """One label per agent identity (:func:`split_group`), unique among ``identities`` by construction.

    The agent's config name by its shortest unique tail (``knn_novelty``; ``a/nm`` beside ``b/nm``), then, for
    identities that share a config name, the ``agent.*`` settings that tell them apart in brackets
    (``sklearn[classifier=RandomForestClassifier]``). Should two labels still meet (values that shorten alike), the
    identities' full text is used for those."""
    identities = list(dict.fromkeys(identities))
    paths = list(dict.fromkeys(dict(i).get("agent", "none") for i in identities))
    tails = _path_tails(paths)
    labels: dict[Pairs, str] = {}
    for identity in identities:
        path = dict(identity).get("agent", "none")
        siblings = [i for i in identities if dict(i).get("agent", "none") == path]
        extra = [(k, v) for k, v in identity if k != "agent" and len({dict(s).get(k) for s in siblings}) > 1]
        names = _short_names([k[len("agent.") :] for k, _ in extra])
        inside = ", ".join(f"{names[k[len('agent.') :]]}={_short_value(k, v)}" for k, v in extra)
        labels[identity] = tails[path] + (f"[{inside}]" if inside else "")
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    for identity, label in labels.items():
        if counts[label] > 1:
            labels[identity] = ", ".join(f"{k}={v}" for k, v in identity)
    return labels


def setting_label(setting: Pairs, keys: Sequence[str] | None = None) -> str:
    """``(("protocol.condition", "given"), ("domain", "digits"))`` -> ``condition=given, domain=digits`` (each key by
    its shortest tail unique among ``keys``, default the setting's own keys); ``()`` -> ``""``."""
    names = _short_names(list(keys) if keys is not None else [k for k, _ in setting])
    return ", ".join(f"{names.get(k, k)}={v}" for k, v in setting)
