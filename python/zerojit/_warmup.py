"""Model and serving configurations, manifests and warmup of the DSv4 kernel family."""

import json
import os

from . import _core

__all__ = ["config", "default_config", "manifest", "warmup"]


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
        arguments["model"] = os.fspath(model)
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

    Returns the report as a dict: totals ({"keys", "compiled", "from_disk", "from_memory",
    "failed"}), per-kernel and per-key entries (each key with its origin, time and any error),
    archs, devices, wall_seconds, monitor_armed, compile_workers, compile_fallbacks, plus "ok"
    and a one-line "summary". Compile
    failures are reported per key (the other keys still compile), not raised.
    """
    if cache_dir is not None:
        _core.set_cache_dir(os.fspath(cache_dir))
    if monitor is not None:
        _core.set_monitor_mode(monitor)
    report_json, summary = _core.warmup(
        **_config_args(model, serving),
        devices=list(devices) if devices is not None else [],
        jobs=int(jobs),
        compile_only=bool(compile_only),
        arch=arch,
        progress=progress,
        arm_monitor=bool(arm_monitor),
        compile_processes=bool(compile_processes),
    )
    report = json.loads(report_json)
    report["ok"] = report["totals"]["failed"] == 0
    report["summary"] = summary
    return report
