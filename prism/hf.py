"""Local Hugging Face GPT-2-family checkpoints (gpt2, distilgpt2, gpt2-medium, ...) as a uniform PrismLM.

Reads `config.json` and `model.safetensors` (or `pytorch_model.bin`) from a directory written by
`save_pretrained`; `transformers` itself is not needed. GPT-2 keeps its linear weights as Conv1D (in, out), so
they are transposed into nn.Linear's (out, in); everything else maps one to one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from prism.checkpoint import CheckpointError
from prism.config import ModelConfig, is_power_of_two
from prism.model import PrismLM
from prism.schedule import Schedule

_RENAME = [  # HF GPT-2 name (after dropping "transformer.") -> PrismLM name, transpose?
    (r"h\.(\d+)\.ln_(\d)\.(weight|bias)", r"blocks.\1.ln_\2.\3", False),
    (r"h\.(\d+)\.attn\.c_attn\.(weight|bias)", r"blocks.\1.attn.qkv.\2", True),
    (r"h\.(\d+)\.attn\.c_proj\.(weight|bias)", r"blocks.\1.attn.proj.\2", True),
    (r"h\.(\d+)\.mlp\.c_fc\.(weight|bias)", r"blocks.\1.mlp.fc.\2", True),
    (r"h\.(\d+)\.mlp\.c_proj\.(weight|bias)", r"blocks.\1.mlp.proj.\2", True),
    (r"(wte|wpe|ln_f)\.(weight|bias)", r"\1.\2", False),
]


def _gpt2_config(hf: dict, source: Path) -> ModelConfig:
    if hf.get("model_type") != "gpt2":
        raise CheckpointError(f"{source}: model_type {hf.get('model_type')!r} is not gpt2; only GPT-2-family checkpoints load")
    unsupported = {
        "activation_function": (hf.get("activation_function", "gelu_new"), ("gelu_new", "gelu_pytorch_tanh")),
        "scale_attn_weights": (hf.get("scale_attn_weights", True), (True,)),
        "scale_attn_by_inverse_layer_idx": (hf.get("scale_attn_by_inverse_layer_idx", False), (False,)),
        "layer_norm_epsilon": (hf.get("layer_norm_epsilon", 1e-5), (1e-5,)),
    }
    for key, (value, ok) in unsupported.items():
        if value not in ok:
            raise CheckpointError(f"{source}: {key}={value!r} is not supported (GPT-2 uses {ok[0]!r})")
    d, n_head = hf["n_embd"], hf["n_head"]
    head_dim = d // n_head
    if d % n_head or not is_power_of_two(head_dim):
        raise CheckpointError(f"{source}: head dim n_embd/n_head = {d}/{n_head} is not a power of two; Prism needs one")
    inner = hf.get("n_inner") or 4 * d
    if inner % d:
        raise CheckpointError(f"{source}: n_inner={inner} is not a multiple of n_embd={d}")
    return ModelConfig(
        vocab_size=hf["vocab_size"],
        n_layer=hf["n_layer"],
        d_model=d,
        block_size=hf["n_positions"],
        dh_min=min(32, head_dim),
        dh_max=max(256, head_dim),
        mlp_ratio=inner // d,
        dropout=0.0,
        bias=True,
        mlp="gelu",  # GPT-2's tanh GELU, which its weights were trained with
    )


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    if (path / "model.safetensors").is_file():
        import safetensors.torch

        return safetensors.torch.load_file(str(path / "model.safetensors"))
    if (path / "pytorch_model.bin").is_file():
        return torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise CheckpointError(f"{path}: no model.safetensors or pytorch_model.bin; pass a directory written by save_pretrained")


def load_hf_gpt2(path: str | Path) -> PrismLM:
    """A local GPT-2-family checkpoint as the uniform PrismLM (n_head heads in every layer), in eval mode."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise CheckpointError(f"{str(path)!r} has no config.json; pass a local Hugging Face model directory")
    hf_config = json.loads((path / "config.json").read_text())
    cfg = _gpt2_config(hf_config, path)
    model = PrismLM(cfg, Schedule.uniform(hf_config["n_head"], cfg.n_layer))
    state = {}
    for name, tensor in _read_weights(path).items():
        name = name.removeprefix("transformer.")
        for pattern, target, transpose in _RENAME:
            if re.fullmatch(pattern, name):
                state[re.sub(pattern, target, name)] = tensor.t() if transpose and tensor.dim() == 2 else tensor
                break  # unmatched names: attention-mask buffers and the lm_head tied to wte
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]  # tied to wte, loaded through it
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not map onto GPT-2 (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return model.eval()
