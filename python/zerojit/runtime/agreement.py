"""What a rank publishes at the end of its warmup, and the comparison every rank makes of all
of them (zerojit.RankGroup; docs/PYTHON.md, "Ranks that agree").

A record names each warmed key by (kernel, key text, arch) with its program identity, so two
ranks agree only if they would load the same modules; beside the keys it carries what explains
a difference (the archs, the compiler versions, the configuration), so that the error can name
the cause and not only the keys. Every rank compares the same records in the same way, so
every rank raises the same message.
"""

import hashlib
import json

FORMAT = 1
SHOWN_KEYS = 5  # the first differing keys a message names (the attribute has them all)


def digest_of(record):
    """The manifest digest: what must be equal on every rank, hashed."""
    agreed = {name: record.get(name) for name in ("archs", "compilers", "config", "entries")}
    return hashlib.sha256(json.dumps(agreed, sort_keys=True).encode()).hexdigest()


def make_record(rank, report=None, entries=(), compilers=None, config=None, aborted=None):
    """The record of one rank. ``entries``: (kernel, key text, arch, identity) per key, the
    identity "failed: ..." for a key that did not compile. ``aborted``: the error text of a
    warmup that raised before it had a report (the other ranks then fail at once, naming it,
    rather than wait for the timeout)."""
    record = {
        "format": FORMAT,
        "rank": rank,
        "aborted": aborted,
        "archs": sorted(report.get("archs", [])) if report else [],
        "compilers": dict(sorted((compilers or {}).items())),
        "config": config,
        "entries": sorted([list(entry) for entry in entries]),
    }
    record["digest"] = digest_of(record)
    return record


def ranks_text(ranks):
    """[0, 1, 2, 4, 6, 7] -> "0-2, 4, 6-7"."""
    ranks = sorted(ranks)
    spans, start = [], None
    for index, rank in enumerate(ranks):
        if start is None:
            start = rank
        if index + 1 == len(ranks) or ranks[index + 1] != rank + 1:
            spans.append(str(start) if start == rank else f"{start}-{rank}")
            start = None
    return ", ".join(spans)


def _plural(ranks):
    return ("ranks " if len(ranks) > 1 else "rank ") + ranks_text(ranks)


def _flat(value, path=""):
    if isinstance(value, dict):
        out = {}
        for name, inner in value.items():
            out.update(_flat(inner, f"{path}.{name}" if path else str(name)))
        return out
    return {path: value}


def _config_cause(ours, theirs, rank, reference):
    if ours == theirs or ours is None or theirs is None:
        return None
    a, b = _flat(ours), _flat(theirs)
    fields = [name for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
    shown = "; ".join(
        f"{name} = {json.dumps(a.get(name))} on rank {rank}, "
        f"{json.dumps(b.get(name))} on rank {reference}"
        for name in fields[:3]
    )
    more = f" (and {len(fields) - 3} more)" if len(fields) > 3 else ""
    return f"another configuration: {shown}{more}"


def _kernels_of(keys):
    names = sorted({kernel for kernel, _, _ in keys})
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _compare(record, reference):
    """(cause, differing keys) of ``record`` against ``reference``."""
    rank, ref = record["rank"], reference["rank"]
    causes = []
    config = _config_cause(record["config"], reference["config"], rank, ref)
    if config:
        causes.append(config)
    if record["archs"] != reference["archs"]:
        causes.append(
            f"another arch: {', '.join(record['archs']) or 'none'} on rank {rank}, "
            f"{', '.join(reference['archs']) or 'none'} on rank {ref}"
        )
    if record["compilers"] != reference["compilers"]:
        names = sorted(set(record["compilers"]) | set(reference["compilers"]))
        causes.append(
            "another compiler: "
            + "; ".join(
                f"{name} {record['compilers'].get(name, 'absent')} on rank {rank}, "
                f"{reference['compilers'].get(name, 'absent')} on rank {ref}"
                for name in names
                if record["compilers"].get(name) != reference["compilers"].get(name)
            )
        )
    ours = {tuple(entry[:3]): entry[3] for entry in record["entries"]}
    theirs = {tuple(entry[:3]): entry[3] for entry in reference["entries"]}
    lacking = sorted(set(theirs) - set(ours))
    extra = sorted(set(ours) - set(theirs))
    changed = sorted(key for key in set(ours) & set(theirs) if ours[key] != theirs[key])
    failed = [key for key in sorted(ours) if str(ours[key]).startswith("failed")]
    if failed:
        first = str(ours[failed[0]]).splitlines()[0]
        causes.append(f"rank {rank} failed to compile {len(failed)} keys ({first})")
    if not (config or len(causes) > (1 if failed else 0)):
        # Keys only explain the difference when nothing above does (another arch changes every
        # key; saying so key by key would hide the cause).
        if lacking and not extra:
            causes.append(
                f"a narrowed warmup space: rank {rank} lacks {len(lacking)} keys of "
                f"{_kernels_of(lacking)} that rank {ref} warms"
            )
        elif extra and not lacking:
            causes.append(
                f"a wider warmup space: rank {rank} warms {len(extra)} keys of "
                f"{_kernels_of(extra)} that rank {ref} does not"
            )
        elif extra and lacking:
            causes.append(
                f"other warmup keys: {len(extra)} only on rank {rank}, {len(lacking)} only on "
                f"rank {ref}"
            )
        if [key for key in changed if key not in failed]:
            causes.append(
                "other programs for the same keys (another kernel source, header, compile "
                "option or compiler)"
            )
    keys = [
        {
            "kernel": kernel,
            "key": key,
            "arch": arch,
            "rank_identity": ours.get((kernel, key, arch)),
            "reference_identity": theirs.get((kernel, key, arch)),
        }
        for kernel, key, arch in sorted(set(lacking) | set(extra) | set(changed))
    ]
    return "; ".join(causes) or "another manifest digest", keys


def _key_line(entry, rank, reference):
    where = f"{entry['kernel']} [{entry['key']}] on {entry['arch']}"
    if entry["rank_identity"] is None:
        return f"{where}: only on rank {reference}"
    if entry["reference_identity"] is None:
        return f"{where}: only on rank {rank}"
    return (
        f"{where}: identity {entry['rank_identity'][:40]} on rank {rank}, "
        f"{entry['reference_identity'][:40]} on rank {reference}"
    )


def disagreement(records, world_size, missing=(), timeout=None, prefix=""):
    """None when every rank published and all agree; else (message, ranks at fault, missing,
    differences). ``records``: rank -> record, the ranks that published."""
    missing = sorted(missing)
    aborted = sorted(rank for rank, record in records.items() if record.get("aborted"))
    groups = {}
    for rank in sorted(records):
        if rank not in aborted:
            groups.setdefault(records[rank]["digest"], []).append(rank)
    if not missing and not aborted and len(groups) <= 1:
        return None
    # The reference is the largest group of equal ranks (the lowest rank's on a tie): the
    # message names the few that differ from the many.
    ordered = sorted(groups.values(), key=lambda ranks: (-len(ranks), ranks[0]))
    reference = ordered[0] if ordered else []
    lines, differences = [], []
    for ranks in ordered[1:]:
        cause, keys = _compare(records[ranks[0]], records[reference[0]])
        differences.append(
            {"ranks": ranks, "reference": reference[0], "cause": cause, "keys": keys}
        )
        agreeing = f" ({_plural(reference)} agree)" if len(reference) > 1 else ""
        lines.append(
            f"  {_plural(ranks)} {'differ' if len(ranks) > 1 else 'differs'} from rank "
            f"{reference[0]}{agreeing}: {cause}"
        )
        lines += ["    " + _key_line(entry, ranks[0], reference[0]) for entry in keys[:SHOWN_KEYS]]
        if len(keys) > SHOWN_KEYS:
            lines.append(f"    ... and {len(keys) - SHOWN_KEYS} more keys")
    for rank in aborted:
        text = str(records[rank]["aborted"]).splitlines()[0]
        differences.append({"ranks": [rank], "reference": None, "cause": text, "keys": []})
        lines.append(f"  rank {rank}: its warmup raised: {text}")
    if missing:
        within = f" within {timeout:g} s" if timeout is not None else ""
        lines.append(
            f"  {_plural(missing)} never published {'their' if len(missing) > 1 else 'its'} "
            f"warmup{within} (died, hung, or did not warm up with this group)"
        )
    at_fault = sorted({rank for d in differences for rank in d["ranks"]} | set(missing))
    where = f", store prefix {prefix!r}" if prefix else ""
    message = (
        f"the ranks did not warm up the same kernels ({world_size} ranks{where}; "
        f"{_plural(at_fault)} at fault):\n" + "\n".join(lines)
    )
    return message, at_fault, missing, differences
