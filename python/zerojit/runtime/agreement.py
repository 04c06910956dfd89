"""What a rank publishes at the end of its warmup, and the comparison every rank makes of all
of them (zerojit.RankGroup; docs/PYTHON.md, "Ranks that agree").

A record names each warmed key by (kernel, key text, arch) with its program identity, so two
ranks agree only if they would load the same modules; beside the keys it carries what explains
a difference (the archs, the compiler versions, the configuration), so that the error can name
the cause and not only the keys. Every rank compares the same records in the same way, so
every rank raises the same message. The record's digest and the comparison are C++'s
(include/zerojit/ranks.hpp), which C++ engines' ranks use too: one record format, one set of
rules, and a group may hold ranks of both.
"""

import json

from zerojit import _core

FORMAT = 1


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
    # The manifest digest, what must be equal on every rank: C++'s (zerojit::RankRecord::seal),
    # so that a record made here and one made by a C++ engine's rank compare as equal.
    record["digest"] = _core.rank_record_digest(json.dumps(dict(record, rank=0, digest="")))
    return record


def disagreement(records, world_size, missing=(), timeout=0.0, prefix=""):
    """None when every rank published and all agree; else (message, ranks at fault, missing,
    differences). ``records``: rank -> record, the ranks that published. The rules and the
    messages are C++'s (zerojit::compare_ranks, include/zerojit/ranks.hpp), which groups that
    warm up from C++ apply too: one comparison, one text, whichever language a group is in."""
    found = _core.compare_ranks(
        json.dumps({str(rank): record for rank, record in records.items()}),
        world_size,
        sorted(missing),
        float(timeout),
        prefix,
    )
    return None if found is None else tuple(found)
