"""Preflight: what would otherwise fail only inside a worker, after the study is written and Ray started.

`preflight` is the one place the commands that train (run, resume, confirm, train) check a valid config against
this machine: the corpus is long enough for the block size, the checkpoint folder can be made, the device exists,
and the model fits in memory. Each failure is a one-line ConfigError (StorageError for the URL) raised before
anything is stored or computed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from prism.data import CorpusError, CorpusFacts, check_windows, load_corpus, text_bytes
from search.config import StudyConfig
from search.errors import ConfigError

BYTES_PER_PARAM = 16  # fp32 weights, their gradients and AdamW's two moments
LOGIT_BYTES = 12  # per token and vocab entry: fp32 logits, their softmax and its gradient
# what each process's CUDA context holds on its GPU before any tensor: CUDA's runtime and torch's kernels (their
# vendor-documented range is a few hundred MiB, more on newer GPUs and CUDA versions); trials sharing a GPU each pay it
CUDA_CONTEXT_BYTES = 1 << 30
SIZE_FIELDS = ("model.n_layer", "model.d_model", "model.mlp_ratio", "model.block_size", "model.vocab_size", "train.batch_size")


def preflight(config: StudyConfig, *, address: str | None = None, device: str | None = None) -> CorpusFacts:
    """Check `config` before a command stores or trains anything; returns what the corpus holds (its fingerprint
    among it), so the corpus is loaded once per command (here) and the study records what its workers must find.

    `device`: `prism-search train`'s one in-process run (no storage, no checkpoint_dir). Otherwise a study's
    trials, on CUDA when resources.gpus_per_trial > 0, resources.workers at once. With a
    cluster `address` the trials run on other machines, whose devices and memory this machine cannot check.
    """
    if device is not None:
        check_device(device, "--device", fix="use --device cpu")
        check_memory(config, device, at_once=1, source="--device")
    else:
        from search.storage import check_lasting  # storage owns what a valid URL is

        check_lasting(config.storage)  # the trackers are checked as they are made, right after this, before any write
        if config.trainer.kind == "python":
            check_importable(config.trainer.function, config.trainer.path)
        if config.keep_checkpoints != "none":  # else the folder is never made: a study resumed elsewhere needs none
            check_folder(config.checkpoint_dir, "checkpoint_dir")
        if address is None:
            check_cpus(config.resources.workers, config.resources.cpus_per_trial)
            gpus = config.resources.gpus_per_trial
            study_device = "cuda" if gpus > 0 else "cpu"
            if gpus > 0:  # every machine has a CPU: torch (about 1.4 s to import) is loaded only to look for a GPU
                check_device(
                    study_device, "resources.gpus_per_trial", fix="set resources.gpus_per_trial = 0 or pass --address of a GPU cluster"
                )
            n = config.resources.workers
            at_once = min(n, max(1, int(1 / gpus))) if gpus else n  # fractional GPUs: that many trials share one
            check_memory(config, study_device, at_once, source="resources.gpus_per_trial" if gpus else "resources.workers")
    return corpus_facts(config)  # last: loading a corpus (or training its BPE) is the slow check


IMPORT_TIMEOUT_S = 300  # a module importing torch and CUDA on a cold disk can take a minute


def check_importable(function: str, path: list[str]) -> None:
    """A python trainer's module imports, tried in a child process as a worker would import it (`path` first on
    sys.path): a missing dependency is one line here, not a failed trial on every worker. A child, so whatever the
    module does on import (load torch, start threads) stays out of the driver."""
    module = function.split(":")[0]
    code = "import importlib, sys; sys.path[:0] = sys.argv[2:]; importlib.import_module(sys.argv[1])"
    try:
        done = subprocess.run([sys.executable, "-c", code, module, *path], capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        took = f"importing {module!r} took over {IMPORT_TIMEOUT_S} s"
        raise ConfigError(f"trainer.function {function!r}: {took} (fix: keep work out of the module's top level)") from None
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.strip().splitlines() if line.strip() and not set(line.strip()) <= set("^~ ")]
        raise ConfigError(
            f"trainer.function {function!r}: importing {module!r} failed: {lines[-1] if lines else f'exit {done.returncode}'} "
            "(fix: install what it imports in this Python, or add its folder to trainer.path)"
        )


def check_corpus(config: StudyConfig) -> str:
    """The corpus's fingerprint, once `corpus_facts` has checked it."""
    return corpus_facts(config).fingerprint


def corpus_facts(config: StudyConfig) -> CorpusFacts:
    """The corpus fits in memory, loads, fits the model's vocabulary, and both its splits hold the windows training
    and evaluation draw from it; returns what it holds."""
    try:
        size = text_bytes(config.data.corpus)
        if 2 * size > _host_available():  # read, then joined: twice its size at the peak, before any tokenizer
            raise CorpusError(
                f"{config.data.corpus!r} holds {_gib(size)} of text; reading it takes twice that and this machine has "
                f"{_gib(_host_available())} available (fix: a smaller corpus, or tokenize it into a .bin token file, which is mapped)"
            )
        corpus = load_corpus(config.data.corpus, config.data.val_fraction, **config.data.corpus_options())
        check_windows(corpus, config.model.block_size, config.train.batch_size * config.train.eval_batches)
    except CorpusError as e:
        raise ConfigError(f"data.corpus: {e}") from None
    if corpus.vocab_size > config.model.vocab_size:
        raise ConfigError(
            f"model.vocab_size={config.model.vocab_size} is smaller than the corpus vocab {corpus.vocab_size}; "
            f"set model.vocab_size = {corpus.vocab_size}"
        )
    return corpus.facts


def check_folder(path: str, field: str) -> None:
    """`path` is a writable folder, or one can be made there: its nearest existing ancestor is a writable folder in
    which a folder can be made. Tried, not read from the mode bits: root passes `os.access` in /proc, where nothing
    can be made, and on a full disk."""
    target = Path(path)
    existing = next(p for p in (target, *target.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"{field} {path!r}: {str(existing)!r} is a file, not a folder (fix: point {field} at a folder)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{field} {path!r}: folder {str(existing)!r} is not writable (fix: point {field} at a writable folder)")
    if existing == target:  # there already: trying would change the folder (its time stamp), and rights are known
        return
    try:
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".prism-search-check-"))
    except OSError as e:
        raise ConfigError(
            f"{field} {path!r}: cannot make a folder in {str(existing)!r} (refused: {e.strerror or e}) "
            f"(fix: point {field} at a writable folder)"
        ) from None


def check_cpus(workers: int, cpus_per_trial: int) -> None:
    """A local Ray is started with workers x cpus_per_trial logical CPUs, so nothing stops 200 workers on 2 cores
    from starting 200 torch processes at once; and a trial asking for more CPUs than the machine has would wait for
    ever on a cluster. Both are refused against the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cpus_per_trial > cores:
        raise ConfigError(
            f"resources.cpus_per_trial={cpus_per_trial}: this machine has {cores} CPU cores (fix: at most {cores}, "
            "or pass --address of a cluster with larger nodes)"
        )
    if workers * cpus_per_trial > cores:
        raise ConfigError(
            f"resources.workers={workers} (--workers) x resources.cpus_per_trial={cpus_per_trial} is more than the {cores} "
            f"CPU cores of this machine (fix: at most {cores // cpus_per_trial} workers, or pass --address of a cluster)"
        )


def check_device(device: str, source: str, fix: str) -> None:
    """A device name torch knows, of a kind Trainer runs on, present on this machine."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise ConfigError(f"{source}: device {device!r} is not one prism-search trains on (fix: use cpu, cuda or cuda:N)")
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"{source}: CUDA is not available on this machine (torch {torch.__version__}) (fix: {fix})")
        if parsed.index is not None and parsed.index >= count:
            raise ConfigError(
                f"{source}: device {device!r} does not exist; this machine has {count} GPU(s) (fix: use cuda:0..cuda:{count - 1})"
            )


def training_bytes(sizes: dict[str, int]) -> int:
    """Memory one training run holds at its peak, estimated from SIZE_FIELDS' values: parameters with gradients and
    AdamW state, plus the activations kept for backward (about 8 d_model-wide and 3 MLP-wide fp32 values per token
    and layer; SDPA keeps no attention matrix) and the logits. An estimate rather than `param_count`, because it must
    also price sizes that do not form a valid model, such as each size reset to its default. Measured on CPU for
    4 layers x 256 wide, 32 x 256-token batches: 822 MiB peak against 714 MiB estimated (allocator slack aside)."""
    layers, d, ratio = sizes["model.n_layer"], sizes["model.d_model"], sizes["model.mlp_ratio"]
    vocab, block, batch = sizes["model.vocab_size"], sizes["model.block_size"], sizes["train.batch_size"]
    params = layers * (4 + 2 * ratio) * d * d + (vocab + block) * d  # attention, MLP (SwiGLU costs the same), embeddings
    per_token = layers * 4 * (8 + 3 * ratio) * d + LOGIT_BYTES * vocab
    return BYTES_PER_PARAM * params + batch * block * per_token


def sizes_of(model: object, batch_size: int) -> dict[str, int]:
    """SIZE_FIELDS' values of `model` (a study's [model] section or a ModelConfig) trained at `batch_size`."""
    return {name: batch_size if name == "train.batch_size" else getattr(model, name.split(".")[1]) for name in SIZE_FIELDS}


def trial_bytes(sizes: dict[str, int], device: str) -> int:
    """Memory one trial's process holds on `device`: its training, plus a CUDA context on a GPU."""
    return training_bytes(sizes) + (CUDA_CONTEXT_BYTES if device.startswith("cuda") else 0)


def available_bytes(device: str) -> tuple[int, str]:
    """Memory free for training on `device`, and where: a CUDA device's total (reading its free memory would make
    a CUDA context in this driver process, which holds GPU memory for as long as it runs), else the host's available."""
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        return props.total_memory, f"GPU {index} ({props.name})"
    return _host_available(), "this machine"


def _host_available() -> int:
    """Linux's MemAvailable (free pages plus the cache the kernel can reclaim); elsewhere the physical total."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(config: StudyConfig, device: str, at_once: int, source: str) -> None:
    """Refuse sizes whose training cannot fit, naming the size that matters most: the one whose reset to its
    default would save the most memory."""
    sizes = sizes_of(config.model, config.train.batch_size)
    need = trial_bytes(sizes, device) * at_once
    have, where = available_bytes(device)
    if need <= have:
        return
    defaults = {name: type(getattr(config, name.split(".")[0])).model_fields[name.split(".")[1]].default for name in SIZE_FIELDS}
    field = min(SIZE_FIELDS, key=lambda name: trial_bytes(sizes | {name: min(sizes[name], defaults[name])}, device))
    runs = f" for {at_once} trials at once ({source})" if at_once > 1 else ""
    raise ConfigError(
        f"{field}={sizes[field]}: training needs about {_gib(need)}{runs} (parameters, AdamW state, activations"
        f"{', a CUDA context each' if device.startswith('cuda') else ''}), "
        f"{where} has {_gib(have)} available (fix: lower {field}{' or the trials at once' if at_once > 1 else ''})"
    )


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"
