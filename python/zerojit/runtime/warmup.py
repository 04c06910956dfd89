"""Model and serving configurations, manifests and warmup of the DSv4 kernel family and of
the registered Python kernels (zerojit.Kernel), in one compile pool."""

import dataclasses
import json
import os
import time
import warnings

from zerojit import _core
from zerojit.languages import workers as _workers
from zerojit.runtime import ranks as _ranks
from zerojit.runtime.environment import path_bytes as _path_bytes
from zerojit.runtime.errors import WarmupError

__all__ = [
    "config",
    "default_config",
    "manifest",
    "warmup",
    "register",
    "registrations",
    "clear_registrations",
    "kernel_manifest",
    "key_of",
    "warmup_kernels",
    "set_misses_file",
    "misses_file",
    "wait_background_compiles",
]

# (kernel, tag, space or None), in registration order; a (kernel, tag) pair once.
_registrations = []


def register(kernel, space=None, tag="default"):
    """Registers a Python kernel (an instance or class of zerojit.Kernel) for warmup, with a
    space (default: its warmup_space()). Registering a (kernel, tag) twice keeps the first, as
    the C++ registry does (every layer of a type may register)."""
    kernel = kernel() if isinstance(kernel, type) else kernel
    for existing, existing_tag, _ in _registrations:
        if existing is kernel and existing_tag == tag:
            return
    if space is None and kernel.warmup_space() is None:
        raise ValueError(f"kernel {kernel.name}: no space given and no warmup_space() defined")
    _registrations.append((kernel, str(tag), space))
    kernel._registered()


def registrations():
    """The registered (kernel, tag) pairs."""
    return [(kernel, tag) for kernel, tag, _ in _registrations]


def clear_registrations():
    _registrations.clear()


def _expanded(kernels=None):
    """The registrations as the core takes them: (kernel handle, tag, slots, dead axes). Keys
    are interned here, with the GIL, so the compiles need no Python."""
    selected = None
    if kernels is not None:
        chosen = [k() if isinstance(k, type) else k for k in kernels]
        registered = {id(kernel) for kernel, _, _ in _registrations}
        for kernel in chosen:
            if id(kernel) not in registered:
                raise ValueError(
                    f"kernel {kernel.name} is not registered for warmup "
                    "(zerojit.register(kernel) first)"
                )
        selected = {id(k) for k in chosen}
    out = []
    for kernel, tag, space in _registrations:
        if selected is not None and id(kernel) not in selected:
            continue
        slots, failed, dead_axes = [], [], []
        points = [] if kernel.has_fallbacks() else None
        try:
            expansion = kernel.expand(space, points)
            dead_axes = expansion.dead_axes
        except Exception as error:  # the whole space: one failed "key" naming the kernel
            failed.append(("warmup space", "{}", _failure_text("its warmup space", error)))
            expansion = None
        keys = []
        for key in expansion.keys if expansion is not None else ():
            try:
                slots.append(kernel.slot(key))
                keys.append(key)
            except Exception as error:  # this key's program: the other keys still warm
                failed.append((_key_text(key), _key_json(key), _failure_text("program()", error)))
        if points is not None:
            _add_fallbacks(kernel, keys, points, slots, failed)
        out.append((kernel._core, tag, slots, dead_axes, failed))
    return out


def _add_fallbacks(kernel, keys, points, slots, failed):
    """The fallback of every key of the space, after the keys (the C++ registry's rule,
    registry.hpp): a key whose fallback would refuse a call the key accepts fails, naming
    both keys and why; its fallback and the other keys still warm."""
    refused, warmed = {}, set(keys)
    for point, key in [(None, key) for key in keys] + points:
        if key in refused or key not in warmed:
            continue
        try:
            fallback = kernel.fallback_key(key)
            if fallback is None:
                continue
            fallback_slot = kernel.slot(fallback)
            if fallback_slot not in slots:
                slots.append(fallback_slot)
            why = kernel.fallback_refusal(key, fallback, point)
            if why:
                where = f" ({point})" if point is not None else ""
                refused[key] = (
                    f"key [{kernel.key_text(key)}]: its fallback [{kernel.key_text(fallback)}] "
                    f"would refuse a call the key accepts{where}: {why}"
                )
        except Exception as error:  # the owner's fallback() or the fallback's program()
            refused[key] = _failure_text("fallback()", error)
    for key, why in refused.items():
        slot = kernel.slot(key)
        if slot in slots:
            slots.remove(slot)
        failed.append((kernel.key_text(key), _key_json(key), why))


def _add_learned(also):
    """The keys of the misses files ``also`` names (one path or a list), for the warmup: the
    registrations of the Python kernels' keys (each read back through its owner's Key), and
    (kernel, key text) of every other kernel's, for the core to read back (a C++ kernel's, such
    as the DSv4 family's; the core names one it cannot in a warning). A damaged line or a key a
    Python owner cannot read is skipped and named in one warning; the other keys are added."""
    from zerojit.languages.owner import KernelOwner

    paths = [also] if isinstance(also, (str, bytes, os.PathLike)) else list(also)
    by_kernel, notes, learned = {}, [], []
    for path in paths:
        misses, skipped = _core.read_misses(os.fsdecode(path))
        notes += [f"{os.fsdecode(path)}: {line}" for line in skipped]
        for kernel_name, key_text, key_json, _, _ in misses:
            owner = KernelOwner.named(kernel_name)
            if owner is None:  # a C++ kernel's (a DSv4 one), or no kernel: the core decides
                learned.append((kernel_name, key_text))
                continue
            try:
                slot = owner.slot(
                    owner.key_of({"kernel": kernel_name, "key": json.loads(key_json)})
                )
            except Exception as error:
                notes.append(
                    f"kernel {kernel_name} [{key_text}]: not a key this kernel can "
                    f"read back ({error}); not warmed"
                )
                continue
            slots = by_kernel.setdefault(owner, [])
            if slot not in slots:
                slots.append(slot)
    if notes:
        warnings.warn(
            "zerojit warmup: skipped from the misses files:\n  " + "\n  ".join(notes),
            stacklevel=3,
        )
    registrations = [
        (owner._core, "learned misses", slots, [], []) for owner, slots in by_kernel.items()
    ]
    return registrations, learned


def set_misses_file(path):
    """Records every runtime miss (a call whose key was not warmed, after warmup) as a line of
    the file at ``path`` (None: stop recording; unset, $ZEROJIT_MISSES_FILE names it), so that
    the next boot warms those keys too: ``warmup_kernels(also=path)``."""
    _core.set_misses_file(None if path is None else os.fsdecode(path))


def misses_file():
    """The file runtime misses are recorded to, or None."""
    return _core.misses_file()


def wait_background_compiles(timeout):
    """Waits until the fallback mode's background compiles are done, at most ``timeout``
    seconds; whether they are."""
    return _core.wait_background_compiles(float(timeout))


def _failure_text(what, error):
    text = str(error) or type(error).__name__
    return f"{what} failed: {type(error).__name__}: {text}"


def _key_fields(key):
    return {
        field.name: getattr(getattr(key, field.name), "value", getattr(key, field.name))
        for field in dataclasses.fields(key)
    }


def _key_text(key):
    """The key as the core would print it, for a key that never reached the core."""
    return ", ".join(f"{name}={value}" for name, value in _key_fields(key).items())


def _key_json(key):
    return json.dumps(_key_fields(key))


def key_of(entry):
    """The Key object of a manifest entry (of ``kernel_manifest()`` or the tool's ``keys
    --json``), by its kernel's owner in this process: ``program()``, ``identity()`` and
    ``compile()`` take it. The entry's ``"key"`` is JSON (a DType field is its name)."""
    from zerojit.languages.owner import KernelOwner

    name = entry.get("kernel") if isinstance(entry, dict) else None
    owner = KernelOwner.named(name) if isinstance(name, str) else None
    if owner is None:
        raise ValueError(
            f"no Python kernel named {name!r} is defined in this process (import the module "
            "that defines it; key_of takes a manifest entry: {'kernel', 'key', ...})"
        )
    return owner.key_of(entry)


def kernel_manifest(kernels=None):
    """The keys warmup compiles for the registered Python kernels (all, or those in
    ``kernels``): ``{"entries": [{"kernel", "key", "text"}], "dead_axes": [{"kernel", "tag",
    "axis"}]}``. Compiles nothing. An entry's ``"key"`` is its fields as JSON (so the manifest
    prints and serializes); ``zerojit.key_of(entry)`` gives the Key object back."""
    entries, dead = _core.dynamic_manifest(_expanded(kernels))
    return {
        "entries": [
            {"kernel": kernel, "key": json.loads(key_json), "text": text}
            for kernel, text, key_json in entries
        ],
        "dead_axes": [{"kernel": k, "tag": t, "axis": a} for k, t, a in dead],
    }


def _languages(expanded):
    """The language of each expanded kernel handle, by its name."""
    by_handle = {id(kernel._core): kernel for kernel, _, _ in _registrations}
    return {
        handle.name: getattr(by_handle.get(id(handle)), "_language", "cuda")
        for handle, *_ in expanded or []
    }


def _prestart(kernels, compile_only, devices, arch):
    """Starts the compilers' worker interpreters of the kernels to warm (those whose language
    has one) for the archs warmup will compile for, so that their imports overlap everything
    warmup does before their first compile. Only a hint: what cannot be known is skipped."""
    chosen = [k() if isinstance(k, type) else k for k in kernels] if kernels is not True else None
    owners = [kernel for kernel, _, _ in _registrations if chosen is None or kernel in chosen]
    if not owners:
        return
    archs = {arch}
    if not compile_only:
        try:
            ordinals = list(devices) if devices is not None else range(_core.device_count())
            archs = {_core.device_arch(int(d)) for d in ordinals} or archs
        except Exception:  # no driver, no such device: warmup itself will say so
            return
    for owner in owners:
        for target in archs:
            owner._prestart_compiler(target)


def _config_args(model, serving):
    """The model and serving arguments as the core takes them.

    ``model``: None (DeepSeek-V4-Flash), a preset name ("dsv4-flash", "dsv4-pro"), the path of a
    Hugging Face config.json (or of its directory), or a dict in config.json form.
    ``serving``: None (the defaults) or a dict of serving options (block_size, kv_cache_dtype,
    indexer_dtype, max_num_batched_tokens, target_arch, dcp_world_size, cp_interleave,
    c128_page_stride_bytes); missing options keep their defaults, unknown ones are an error.
    A full config dict ``{"model": ..., "serving": ...}`` (as ``config()`` returns) may be
    passed as ``model`` with ``serving`` left None.
    """
    if isinstance(model, dict) and set(model) == {"model", "serving"} and serving is None:
        model, serving = model["model"], model["serving"]
    arguments = {}
    if isinstance(model, dict):
        arguments["model_json"] = json.dumps(model)
    elif model is not None:
        arguments["model"] = _path_bytes(model)
    if serving is not None:
        if not isinstance(serving, dict):
            raise TypeError(
                f"serving must be a dict of serving options, got {type(serving).__name__}"
            )
        arguments["serving_json"] = json.dumps(serving)
    return arguments


def config(model=None, serving=None):
    """The validated configuration as a dict ``{"model": {...}, "serving": {...}}`` (the model
    in config.json form). Raises zerojit.ConfigError (a ValueError) naming the field at fault."""
    return json.loads(_core.config_json(**_config_args(model, serving)))


def default_config():
    """DeepSeek-V4-Flash with the default serving options: block 256, fp8_ds_mla cache, FP8
    indexer, 8192 batched tokens, sm_90a, no decode context parallelism."""
    return config()


def manifest(model=None, serving=None):
    """The keys warmup compiles for this configuration, in order: a list of
    ``{"kernel": name, "key": {field: value}, "text": "<key as text>"}``. Compiles nothing."""
    return [
        {"kernel": kernel, "key": json.loads(key_json), "text": key_text}
        for kernel, key_text, key_json in _core.manifest(**_config_args(model, serving))
    ]


def warmup(
    model=None,
    serving=None,
    *,
    devices=None,
    jobs=0,
    cache_dir=None,
    compile_only=False,
    arch=None,
    monitor=None,
    progress="none",
    arm_monitor=True,
    compile_processes=False,
    kernels=True,
    raise_on_failure=True,
    on_key=None,
    group=None,
    ready_file=None,
    also=None,
):
    """Compiles every kernel specialization this configuration can ask for, and loads each on
    every device, so that nothing compiles while serving.

    devices: CUDA ordinals to load on (None: every visible device; none without a GPU).
    jobs: parallel compiles (0: one per core).
    cache_dir: the disk cache to compile through, installed for the rest of the process too
        ("off": memory only; None: keep the current one, by default $ZEROJIT_CACHE_DIR or
        ~/.cache/zerojit).
    compile_only: compile (and store) without loading, e.g. to build a cache for another host.
    arch: the target when nothing is loaded (default: the serving config's target_arch); with
        devices, each device's own architecture is used.
    monitor: set the JIT monitor's mode first ("off", "warn", "error"); warmup arms it at the
        end unless arm_monitor is False (an "off" monitor stays silent).
    progress: "none", "auto" (a bar on a terminal, else lines), "bar" or "lines" (standard error).
    compile_processes: run the compiles in worker processes forked from this one (NVRTC scales
        across processes, not threads: about 1.3x faster at 8 jobs). Forking a large process
        costs time, and no other thread should be compiling with zerojit meanwhile.

    kernels: the registered Python kernels (zerojit.register) compile in the same pool: True
        (all), False (none) or a list of kernels.
    raise_on_failure: raise zerojit.WarmupError naming every failed key (False: report them in
        the result only). Either way a failed warmup never arms the monitor.
    on_key: called as on_key(kernel, key, origin, seconds, error, done, total) when each key
        is done, from a worker thread (zerojit.hooks.tqdm_progress draws a tqdm bar with it).
    group: a zerojit.RankGroup; at the end every rank of it publishes what it warmed (each
        key's identity, the archs, the compilers, the configuration) and compares it with every
        other rank's, raising zerojit.RankAgreementError on every rank when they differ or one
        never publishes within the group's timeout (docs/PYTHON.md, "Ranks that agree").
    ready_file: a path removed when warmup starts and written (atomically, JSON with the time,
        the keys and their digest) only when it succeeded, i.e. no key failed: a readiness
        probe's file, as ``zerojit warmup --ready-file`` writes it.
    also: a misses file, or a list of them (zerojit.set_misses_file records one): their keys
        of the Python kernels of this process are warmed too (a damaged line, or a kernel this
        process does not define, is skipped and named in a warning).

    Returns the report as a dict: totals ({"keys", "compiled", "from_disk", "from_memory",
    "failed"}), per-kernel and per-key entries (each key with its origin, time and any error),
    archs, devices, wall_seconds, monitor_armed, compile_workers, compile_fallbacks, cancelled,
    deferred (keys another process was compiling, warmed after the others), plus "ok" and a
    one-line "summary". A failing key does not stop the others. Ctrl-C (or a
    KeyboardInterrupt from on_key) stops it between keys and is raised once the keys in flight
    are done; the monitor is then not armed.
    """
    try:
        config_args = _config_args(model, serving)
    except BaseException as error:  # a rank with a bad configuration is named at once
        if group is not None:
            _ranks.publish_aborted(group, error)
        raise
    return _run(_Run(config_args, True, **_options(locals())))


def warmup_kernels(
    kernels=None,
    *,
    devices=None,
    jobs=0,
    cache_dir=None,
    compile_only=False,
    arch="sm_90a",
    monitor=None,
    progress="none",
    arm_monitor=True,
    compile_processes=False,
    raise_on_failure=True,
    on_key=None,
    group=None,
    ready_file=None,
    also=None,
):
    """warmup() of the registered Python kernels only (all, or those in ``kernels``), without
    the DSv4 family; the same options (``group`` and ``also`` included) and report."""
    options = _options(locals())
    options["kernels"] = True if kernels is None else list(kernels)
    return _run(_Run({}, False, **options))


# What warmup() and warmup_kernels() take beyond the configuration, as _Run's fields.
_OPTION_NAMES = (
    "devices",
    "jobs",
    "cache_dir",
    "compile_only",
    "arch",
    "monitor",
    "progress",
    "arm_monitor",
    "compile_processes",
    "kernels",
    "raise_on_failure",
    "on_key",
    "group",
    "ready_file",
    "also",
)


def _options(arguments):
    return {name: arguments[name] for name in _OPTION_NAMES}


@dataclasses.dataclass(frozen=True)
class _Run:
    """One warmup's request: the configuration's arguments (``dsv4``: the family is warmed)
    and the options of warmup() (see its docstring)."""

    config_args: dict
    dsv4: bool
    devices: object
    jobs: int
    cache_dir: object
    compile_only: bool
    arch: object
    monitor: object
    progress: str
    arm_monitor: bool
    compile_processes: bool
    kernels: object
    raise_on_failure: bool
    on_key: object
    group: object
    ready_file: object
    also: object


def _run(run):
    group, ready_file = run.group, run.ready_file
    if ready_file is not None:
        # First: whatever fails from here on, no earlier warmup's file says "ready".
        _remove_ready_file(ready_file)
    try:
        report, expanded = _warm(run)
        record = None
        if group is not None:
            languages = _languages(expanded)
            record = _ranks.warmup_record(
                report, expanded or [], languages, run.config_args if run.dsv4 else None
            )
    except BaseException as error:
        # The other ranks fail now, naming this one, rather than wait for the timeout.
        if group is not None:
            _ranks.publish_aborted(group, error)
        raise
    if group is not None:
        if report["ok"] or not run.raise_on_failure:
            group.agree(record, report)
        else:  # published for the others to name it; this rank raises its own WarmupError
            group.publish(record)
    if ready_file is not None and report["ok"]:  # last: ready only once the ranks agree
        _write_ready_file(ready_file, report, run.compile_only)
    if run.raise_on_failure and not report["ok"]:
        failed = [
            {"kernel": k["kernel"], "key": k["key"], "arch": k["arch"], "error": k["error"]}
            for k in report["keys"]
            if k["origin"] == "failed"
        ]
        lines = "".join(
            f"\n  {f['kernel']} [{f['key']}] on {f['arch']}: "
            f"{f['error'].splitlines()[0] if f['error'] else ''}"
            for f in failed
        )
        raise WarmupError(
            f"warmup failed for {len(failed)} of {report['totals']['keys']} keys (the monitor "
            f"was not armed):{lines}",
            failed,
            report,
        )
    return report


def _warm(run):
    """The warmup itself: (report, the expanded registrations)."""
    if os.environ.get("ZEROJIT_COMPILE_WORKER"):
        raise WarmupError(
            "zerojit warmup was started while a compile worker imported a kernel's module: a "
            "script that defines Triton kernels and warms them up must do so under "
            '`if __name__ == "__main__":`',
            [],
            {},
        )
    if run.cache_dir is not None:
        _core.set_cache_dir(_path_bytes(run.cache_dir))
    if run.monitor is not None:
        _core.set_monitor_mode(run.monitor)
    # Triton (Python) compiles run in worker processes, `jobs` at a time; they stop at the end.
    _workers.set_limit(run.jobs if run.jobs and run.jobs > 0 else (os.cpu_count() or 1))
    expanded = None
    try:
        if run.kernels is not False:
            _prestart(run.kernels, run.compile_only, run.devices, run.arch)
            expanded = _expanded(None if run.kernels is True else run.kernels)
        learned = []
        if run.also is not None:
            registrations, learned = _add_learned(run.also)
            expanded = (expanded or []) + registrations
        report_json, summary = _core.warmup(
            **run.config_args,
            devices=list(run.devices) if run.devices is not None else [],
            jobs=int(run.jobs),
            compile_only=bool(run.compile_only),
            arch=run.arch,
            progress=run.progress,
            arm_monitor=bool(run.arm_monitor),
            compile_processes=bool(run.compile_processes),
            kernels=expanded,
            dsv4=run.dsv4,
            on_key=run.on_key,
            learned=learned,
        )
    finally:
        _workers.shutdown()
    report = json.loads(report_json)
    skipped = report.pop("learned_skipped", [])
    if skipped:
        warnings.warn(
            "zerojit warmup: skipped from the misses files:\n  " + "\n  ".join(skipped),
            stacklevel=4,
        )
    report["ok"] = report["totals"]["failed"] == 0
    report["summary"] = summary
    return report, expanded


def _remove_ready_file(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _manifest_digest(report):
    """FNV-1a (64 bits) of the warmed keys' "kernel\tkey\n" lines, sorted and each once: the
    digest the tool's ready file carries, equal wherever the same keys were warmed."""
    lines = sorted({f"{k['kernel']}\t{k['key']}\n" for k in report["keys"]})
    value = 0xCBF29CE484222325
    for byte in "".join(lines).encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"fnv1a64:{value:016x}"


def _write_ready_file(path, report, compile_only):
    document = {
        "ready": True,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "keys": report["totals"]["keys"],
        "archs": report.get("archs", []),
        "devices": report.get("devices", []),
        "compile_only": bool(compile_only),
        "manifest_digest": _manifest_digest(report),
    }
    # A temporary file in the same directory renamed over the path: a reader sees the whole
    # file or none.
    path = os.fspath(path)
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise
