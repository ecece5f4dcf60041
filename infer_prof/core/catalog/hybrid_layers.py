"""Hybrid decoders: which layers attend and which are linear-attention or Mamba layers, read
from config.json as vLLM builds them, and what a linear/Mamba layer holds. Pure: no I/O.

A hybrid model (Qwen3-Next, NVIDIA Nemotron-H, IBM Granite-4.0-H, Jamba) mixes attention layers,
which keep K and V per token, with linear layers that keep a fixed state per sequence whatever
its length: a convolution state of ``(kernel - 1) x channels`` and a recurrent (SSM) state.
What each family spells, and where vLLM 0.32 reads it (``vllm/model_executor/models/<file>``):

- ``qwen3_next`` (``qwen3_next.py``): ``layer_types`` of ``full_attention`` /
  ``linear_attention``, else transformers' ``Qwen3NextConfig`` default from
  ``full_attention_interval`` (layer ``i`` is full when ``(i + 1) % interval == 0``). A linear
  layer is a Gated DeltaNet (``vllm/model_executor/layers/mamba/gdn/``): ``linear_num_key_heads``
  ``k``, ``linear_num_value_heads`` ``v``, ``linear_key_head_dim`` ``dk``,
  ``linear_value_head_dim`` ``dv``, ``linear_conv_kernel_dim`` ``K``. Conv state ``(K - 1) x
  (2 k dk + v dv)``, recurrent state ``v x dv x dk``
  (``MambaStateShapeCalculator.gated_delta_net_state_shape``). Weights: ``in_proj_qkvz``
  ``(2 k dk + 2 v dv) x H``, ``in_proj_ba`` ``2 v x H``, ``conv1d`` ``(2 k dk + v dv) x K``,
  ``dt_bias`` and ``A_log`` ``v``, the gated norm ``dv``, ``out_proj`` ``H x v dv``. Its
  attention layers are gated: ``q_proj`` is twice ``heads x head_dim`` wide
  (``attn_output_gate``, default true).
- ``qwen3_5_text`` / ``qwen3_5_moe_text`` (Qwen3.5 and its successors, the decoder in
  ``text_config``; ``qwen3_5.py``): as Qwen3-Next, with the SSM state in the config's
  ``mamba_ssm_dtype`` (``Qwen3_5ForConditionalGenerationConfig``); the vision tower is not
  counted.
- ``nemotron_h`` (``nemotron_h.py``): ``hybrid_override_pattern``, one character a layer:
  ``M`` a Mamba2 mixer, ``*`` attention, ``-`` an MLP (``up_proj``/``down_proj``, squared ReLU,
  not gated), ``E`` a mixture of experts (``n_routed_experts`` of the same ungated shape, shared
  experts of ``moe_shared_expert_intermediate_size``: Nemotron 3 Nano). Each layer is that one
  block behind one norm. Mamba2: ``mamba_num_heads`` ``h``, ``mamba_head_dim`` ``p``,
  ``ssm_state_size`` ``N``, ``n_groups`` ``G``, ``conv_kernel`` ``K``; ``I = h p``.
- ``granitemoehybrid`` (``granitemoehybrid.py``): ``layer_types`` of ``attention`` / ``mamba``;
  Mamba2 with ``mamba_n_heads``, ``mamba_d_head``, ``mamba_d_state``, ``mamba_n_groups``,
  ``mamba_d_conv`` and ``I = mamba_expand x H``; every layer also has the MLP: experts when
  ``num_local_experts > 0`` and the shared MLP of ``shared_intermediate_size``.
- ``falcon_h1`` (``falcon_h1.py``): every layer runs attention and a Mamba2 mixer side by side
  (so every layer keeps both KV and a state) before its gated MLP; Mamba2 of ``mamba_n_heads``,
  ``mamba_d_head``, ``mamba_d_state``, ``mamba_n_groups``, ``mamba_d_conv`` and ``I =
  mamba_d_ssm`` (else ``mamba_expand x H``).
- ``jamba`` (``jamba.py``): ``layers_block_type`` as transformers' ``JambaConfig`` derives it,
  attention where ``i % attn_layer_period == attn_layer_offset``, else a Mamba1 mixer
  (``mamba_d_state`` ``N``, ``mamba_d_conv`` ``K``, ``I = mamba_expand x H``, ``mamba_dt_rank``,
  default ``ceil(H / 16)``); experts where ``i % expert_layer_period == expert_layer_offset``.

Mamba2 state (``mamba2_state_shape``): conv ``(K - 1) x (I + 2 G' N)`` with ``G'`` the groups
after TP replication, SSM ``h x p x N``. Mamba1 (``mamba1_state_shape``): conv ``(K - 1) x I``,
SSM ``I x N``. Tensor parallelism splits channels and heads.

Other hybrid families (Kimi-Linear's KDA, MiniMax, Bamba, Zamba, LFM2, ...) are recognised and
refused with one line: the planner never plans them as full attention by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infer_prof.core.catalog.model_tensors import TensorGroup

MIXER_KINDS = ("gdn", "mamba2", "mamba1")
"""Kinds of linear layer: Gated DeltaNet, Mamba2 (SSD), Mamba1 (selective scan)."""

UNMODELLED_HYBRIDS = {
    "kimi_linear": "Kimi-Linear (KDA linear attention beside MLA)",
    "minimax": "MiniMax-Text-01 (lightning attention)",
    "minimax_text_01": "MiniMax-Text-01 (lightning attention)",
    "bamba": "Bamba (Mamba2 hybrid)",
    "zamba2": "Zamba2 (Mamba2 with shared attention)",
    "lfm2": "LFM2 (short convolutions)",
    "lfm2_moe": "LFM2-MoE (short convolutions)",
    "plamo2": "PLaMo-2 (Mamba hybrid)",
    "mamba": "Mamba (no attention)",
    "mamba2": "Mamba2 (no attention)",
    "falcon_mamba": "Falcon-Mamba (no attention)",
}
"""``model_type`` values of hybrid or attention-free families whose layers are not modelled:
refused rather than planned as full attention."""

HYBRID_FIELDS = ("full_attention_interval", "hybrid_override_pattern", "attn_layer_period",
                 "layers_block_type", "linear_attn_config", "mamba_d_state", "ssm_state_size",
                 "linear_num_value_heads")
"""Fields only a hybrid config carries: a config with one of them and a ``model_type`` not
read here is refused."""


class HybridConfigError(ValueError):
    """A hybrid config whose layer kinds cannot be read; the message names the field."""


@dataclass(frozen=True)
class LinearMixer:
    """One linear-attention or Mamba layer (all of a model's are alike), whole-model widths.

    ``kind`` one of :data:`MIXER_KINDS`; ``conv_kernel`` ``K``; ``conv_channels`` the
    convolution's channels (before TP); ``heads`` x ``rows`` x ``cols`` the recurrent state
    (heads split by TP; Mamba1: ``I x N x 1``); ``groups``/``group_width`` the Mamba2 B/C
    groups (replicated when TP does not divide them); ``inner`` ``I`` (value width for GDN);
    projection widths: ``in_proj`` rows of the input projection(s) (``H`` columns),
    ``extra_in`` rows of a second input projection (GDN ``in_proj_ba``, Mamba1 ``x_proj`` from
    ``I``, ``dt_proj``), ``norm_width`` the gated norm, ``bias`` on the projections,
    ``conv_bias`` on the convolution.
    """

    kind: str
    conv_kernel: int
    conv_channels: int
    heads: int
    rows: int
    cols: int
    inner: int
    in_proj: int
    groups: int = 0
    group_width: int = 0
    dt_rank: int = 0
    norm_width: int = 0
    bias: bool = False
    conv_bias: bool = False

    def conv_elements(self, tp: int = 1) -> int:
        """Conv-state elements one sequence keeps in one layer on one of ``tp`` GPUs:
        ``(K - 1) x channels / tp`` (Mamba2: groups replicated up to ``tp`` when ``tp`` does not
        divide them, as ``extra_groups_for_head_shards``)."""
        channels = self.conv_channels
        if self.kind == "mamba2" and self.groups % tp:
            channels += 2 * (tp - self.groups) * self.group_width
        return (self.conv_kernel - 1) * (channels // tp)

    def ssm_elements(self, tp: int = 1) -> int:
        """Recurrent-state elements one sequence keeps in one layer on one of ``tp`` GPUs:
        ``heads / tp x rows x cols``."""
        return (self.heads // tp) * self.rows * self.cols

    def state_bytes(self, tp: int, conv_bytes: int, ssm_bytes: int) -> int:
        """Bytes of one layer's state for one sequence (vLLM's ``MambaSpec`` page before
        padding): ``conv_elements x conv_bytes + ssm_elements x ssm_bytes``."""
        return self.conv_elements(tp) * conv_bytes + self.ssm_elements(tp) * ssm_bytes

    def flops_per_token(self) -> float:
        """FLOPs of the recurrence one token costs in one layer (projections excluded: they
        are linear weights): about 6 per state element (decay, rank-1 update, read-out), and
        ``2 x K`` per conv channel; constant in the context length."""
        return 6.0 * self.ssm_elements(1) + 2.0 * self.conv_kernel * self.conv_channels

    def tensors(self, hidden: int, prefix: str) -> list[TensorGroup]:
        """The layer's weight tensors (module paths under ``prefix``)."""
        from infer_prof.core.catalog.model_tensors import TensorGroup as T

        p, i = prefix, self.inner
        if self.kind == "gdn":
            out = [T(f"{p}.in_proj_qkvz", self.in_proj, hidden, 1, "mixer", linear=True),
                   T(f"{p}.in_proj_ba", 2 * self.heads, hidden, 1, "mixer", linear=True),
                   T(f"{p}.conv1d", self.conv_channels, self.conv_kernel, 1, "mixer_param"),
                   T(f"{p}.dt_bias+A_log", self.heads, 1, 2, "mixer_param"),
                   T(f"{p}.norm", self.norm_width, 1, 1, "norm", split=False),
                   T(f"{p}.out_proj", hidden, i, 1, "mixer", linear=True)]
            return out
        out = [T(f"{p}.in_proj", self.in_proj, hidden, 1, "mixer", linear=True),
               T(f"{p}.conv1d", self.conv_channels, self.conv_kernel, 1, "mixer_param")]
        if self.conv_bias:
            out.append(T(f"{p}.conv1d.bias", self.conv_channels, 1, 1, "mixer_param"))
        if self.kind == "mamba2":
            out += [T(f"{p}.A+D+dt_bias", self.heads, 1, 3, "mixer_param"),
                    T(f"{p}.norm", i, 1, 1, "mixer_param")]
        else:  # mamba1: x_proj, dt_proj (+ bias), A (I x N), D; Jamba's dt/B/C norms
            n = self.rows
            out += [T(f"{p}.x_proj", self.dt_rank + 2 * n, i, 1, "mixer", linear=True),
                    T(f"{p}.dt_proj", i, self.dt_rank, 1, "mixer", linear=True),
                    T(f"{p}.dt_proj.bias", i, 1, 1, "mixer_param"),
                    T(f"{p}.A_log", i, n, 1, "mixer_param"),
                    T(f"{p}.D", i, 1, 1, "mixer_param"),
                    T(f"{p}.dt+b+c_layernorm", self.dt_rank + 2 * n, 1, 1, "norm",
                      split=False)]
        out.append(T(f"{p}.out_proj", hidden, i, 1, "mixer", linear=True))
        if self.bias:
            out.append(T(f"{p}.in_proj+out_proj.bias", self.in_proj + hidden, 1, 1, "bias"))
        return out


@dataclass(frozen=True)
class HybridLayers:
    """The layer structure of a hybrid decoder: per layer its ``mixers`` (``attention``,
    ``linear``, ``both`` (Falcon-H1: side by side) or ``none``) and ``mlps`` (``gated``,
    ``moe``, ``plain`` (not gated: up and down only) or ``none``; empty: every layer has the
    model's usual MLP), the ``linear`` mixer,
    ``attention_gate`` (Qwen3-Next's gated attention: ``q_proj`` twice as wide),
    ``norms_per_layer``, and ``ssm_dtype`` the recurrent state's dtype vLLM 0.32 defaults to on a
    GPU (``"model"``: the model's, or ``"float32"``)."""

    family: str
    mixers: tuple[str, ...]
    linear: LinearMixer
    mlps: tuple[str, ...] = ()
    attention_gate: bool = False
    norms_per_layer: int = 2
    ssm_dtype: str = "model"

    @property
    def num_linear(self) -> int:
        """Linear/Mamba mixers (one per layer that has one)."""
        return self.mixers.count("linear") + self.mixers.count("both")

    @property
    def num_attention(self) -> int:
        """Attention mixers (one per layer that has one)."""
        return self.mixers.count("attention") + self.mixers.count("both")


def _number(value: object, key: str) -> int | float | str:
    """A field's JSON value that ``int()`` / ``float()`` read: a number or a numeric string;
    :class:`HybridConfigError` naming ``key`` when it is null or another kind of value."""
    if value is None:
        raise HybridConfigError(f"lacks the field {key!r} its linear layers need")
    if not isinstance(value, (int, float, str)):
        raise HybridConfigError(f"has {key} {value!r}, which is not a number")
    return value


def _int(cfg: Mapping[str, object], key: str, default: int | None = None) -> int:
    """The field ``key`` as ``int()`` reads it (``default`` when the key is absent; a null is
    an error, as is a value that is not a number)."""
    return int(_number(cfg.get(key, default), key))


def _kinds_from_list(cfg: Mapping[str, object], field: str, layers: int,
                     names: dict[str, str]) -> tuple[str, ...]:
    values = cfg.get(field)
    if not isinstance(values, list):
        raise HybridConfigError(f"lacks the list {field!r} of its layer kinds")
    if len(values) != layers:
        raise HybridConfigError(f"has {len(values)} {field} for {layers} layers "
                                "(num_hidden_layers)")
    unknown = sorted({str(v) for v in values if v not in names})
    if unknown:
        raise HybridConfigError(f"has {field} value(s) {', '.join(map(repr, unknown))} the "
                                f"planner cannot read (known: {', '.join(map(repr, names))})")
    return tuple(names[v] for v in values)


def _qwen3_next(cfg: Mapping[str, object], layers: int) -> HybridLayers:
    if isinstance(cfg.get("layer_types"), list):
        mixers = _kinds_from_list(cfg, "layer_types", layers, {
            "full_attention": "attention", "linear_attention": "linear"})
    else:
        every = _int(cfg, "full_attention_interval", 4)  # Qwen3NextConfig's default
        if every < 1:
            raise HybridConfigError(f"has full_attention_interval {every}; it must be >= 1")
        mixers = tuple("attention" if (i + 1) % every == 0 else "linear" for i in range(layers))
    k, v = _int(cfg, "linear_num_key_heads"), _int(cfg, "linear_num_value_heads")
    dk, dv = _int(cfg, "linear_key_head_dim"), _int(cfg, "linear_value_head_dim")
    kernel = _int(cfg, "linear_conv_kernel_dim")
    gdn = LinearMixer(kind="gdn", conv_kernel=kernel, conv_channels=2 * k * dk + v * dv,
                      heads=v, rows=dv, cols=dk, inner=v * dv,
                      in_proj=2 * k * dk + 2 * v * dv, norm_width=dv)
    return HybridLayers("qwen3_next", mixers, gdn,
                        attention_gate=bool(cfg.get("attn_output_gate", True)))


@dataclass(frozen=True)
class Mamba2Fields:
    """How one family's config.json spells its Mamba2 fields: the number of SSM heads, the head
    width, the state size N, the number of B/C groups, the causal convolution's kernel width,
    and the flags for the convolution's bias and the projections' bias."""

    heads: str
    head_dim: str
    state: str
    groups: str
    kernel: str
    conv_bias: str
    bias: str


_NEMOTRON_H_MAMBA2 = Mamba2Fields(
    heads="mamba_num_heads", head_dim="mamba_head_dim", state="ssm_state_size",
    groups="n_groups", kernel="conv_kernel", conv_bias="use_conv_bias", bias="use_bias")
"""NemotronH's spelling."""
_MAMBA_PREFIXED_MAMBA2 = Mamba2Fields(
    heads="mamba_n_heads", head_dim="mamba_d_head", state="mamba_d_state",
    groups="mamba_n_groups", kernel="mamba_d_conv", conv_bias="mamba_conv_bias",
    bias="mamba_proj_bias")
"""GraniteMoeHybrid's and Falcon-H1's spelling."""


def _mamba2(cfg: Mapping[str, object], fields: Mamba2Fields,
            inner: int | None = None) -> LinearMixer:
    """A Mamba2 mixer read from ``cfg`` as ``fields`` spells it; ``inner`` the SSM width
    (heads x head width when not given)."""
    h, p = _int(cfg, fields.heads), _int(cfg, fields.head_dim)
    n, g, k = _int(cfg, fields.state), _int(cfg, fields.groups, 1), _int(cfg, fields.kernel, 4)
    i = inner if inner is not None else h * p
    conv = i + 2 * g * n
    return LinearMixer(kind="mamba2", conv_kernel=k, conv_channels=conv, heads=h, rows=p,
                       cols=n, inner=i, in_proj=2 * i + 2 * g * n + h, groups=g,
                       group_width=n, norm_width=i, bias=bool(cfg.get(fields.bias, False)),
                       conv_bias=bool(cfg.get(fields.conv_bias, True)))


def _nemotron_h(cfg: Mapping[str, object], layers: int, hidden: int) -> HybridLayers:
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is None and isinstance(cfg.get("layers_block_type"), list):
        # transformers 5's NemotronHConfig spelling: one word a layer
        words = {"linear_attention": "M", "mamba": "M", "full_attention": "*",
                 "attention": "*", "mlp": "-", "moe": "E"}
        kinds = _kinds_from_list(cfg, "layers_block_type", layers, words)
        pattern = "".join(kinds)
    if not isinstance(pattern, str):
        raise HybridConfigError("lacks the field 'hybrid_override_pattern' (one character a "
                                "layer: M, *, -, E)")
    if len(pattern) != layers:
        raise HybridConfigError(f"has a hybrid_override_pattern of {len(pattern)} characters "
                                f"for {layers} layers (num_hidden_layers)")
    unknown = sorted(set(pattern) - set("M*-E"))
    if unknown:
        raise HybridConfigError(f"has hybrid_override_pattern character(s) "
                                f"{', '.join(map(repr, unknown))} the planner cannot read "
                                "(known: 'M', '*', '-', 'E')")
    mixers = tuple({"M": "linear", "*": "attention"}.get(c, "none") for c in pattern)
    mlps = tuple({"-": "plain", "E": "moe"}.get(c, "none") for c in pattern)
    mixer = _mamba2(cfg, _NEMOTRON_H_MAMBA2)
    # NemotronHForCausalLMConfig: the SSM state is float32 unless the config says otherwise
    ssm = str(cfg.get("mamba_ssm_cache_dtype") or "float32")
    return HybridLayers("nemotron_h", mixers, mixer, mlps=mlps, norms_per_layer=1,
                        ssm_dtype="float32" if ssm == "float32" else "model")


def _granite(cfg: Mapping[str, object], layers: int, hidden: int) -> HybridLayers:
    # the published configs spell "attention"/"mamba"; transformers 5 rewrites them to
    # "full_attention"/"linear_attention" (configuration_utils._LEGACY_LAYER_TYPE_REMAP)
    mixers = _kinds_from_list(cfg, "layer_types", layers, {
        "attention": "attention", "mamba": "linear", "full_attention": "attention",
        "linear_attention": "linear"})
    mixer = _mamba2(cfg, _MAMBA_PREFIXED_MAMBA2, inner=_int(cfg, "mamba_expand", 2) * hidden)
    return HybridLayers("granitemoehybrid", mixers, mixer)


def _falcon_h1(cfg: Mapping[str, object], layers: int, hidden: int) -> HybridLayers:
    if cfg.get("mamba_d_ssm") is not None:
        width = _int(cfg, "mamba_d_ssm")
    else:
        width = int(float(_number(cfg.get("mamba_expand", 2), "mamba_expand")) * hidden)
    head = cfg.get("mamba_d_head")
    if head in (None, "auto"):
        cfg = {**cfg, "mamba_d_head": width // _int(cfg, "mamba_n_heads")}
    mixer = _mamba2(cfg, _MAMBA_PREFIXED_MAMBA2, inner=width)
    return HybridLayers("falcon_h1", ("both",) * layers, mixer)


def _jamba(cfg: Mapping[str, object], layers: int, hidden: int) -> HybridLayers:
    period, offset = _int(cfg, "attn_layer_period", 8), _int(cfg, "attn_layer_offset", 4)
    if period < 1 or not 0 <= offset < period:
        raise HybridConfigError(f"has attn_layer_period {period} and attn_layer_offset "
                                f"{offset}; the offset must be in [0, period)")
    mixers = tuple("attention" if i % period == offset else "linear" for i in range(layers))
    n, k = _int(cfg, "mamba_d_state", 16), _int(cfg, "mamba_d_conv", 4)
    i = _int(cfg, "mamba_expand", 2) * hidden
    rank = cfg.get("mamba_dt_rank", "auto")
    dt_rank = -(-hidden // 16) if rank in (None, "auto") else _int(cfg, "mamba_dt_rank")
    mixer = LinearMixer(kind="mamba1", conv_kernel=k, conv_channels=i, heads=i, rows=n,
                        cols=1, inner=i, in_proj=2 * i, dt_rank=dt_rank,
                        bias=bool(cfg.get("mamba_proj_bias", False)),
                        conv_bias=bool(cfg.get("mamba_conv_bias", True)))
    return HybridLayers("jamba", mixers, mixer)


def read_hybrid(cfg: Mapping[str, object], num_layers: int, hidden: int) -> HybridLayers | None:
    """The hybrid structure of a (text) config, or None for a decoder of attention layers only.
    Raises :class:`HybridConfigError` naming the field when the layer kinds cannot be read, or
    the family when it is a hybrid the planner does not model (never planned as attention)."""
    model_type = str(cfg.get("model_type") or "")
    if model_type == "qwen3_next":
        return _qwen3_next(cfg, num_layers)
    if model_type in ("qwen3_5_text", "qwen3_5_moe_text"):
        # Qwen3_5ForConditionalGenerationConfig: the SSM state in the config's mamba_ssm_dtype
        h = _qwen3_next(cfg, num_layers)
        ssm = "float32" if cfg.get("mamba_ssm_dtype") == "float32" else "model"
        return replace(h, family=model_type, ssm_dtype=ssm)
    if model_type == "nemotron_h":
        return _nemotron_h(cfg, num_layers, hidden)
    if model_type == "granitemoehybrid":
        return _granite(cfg, num_layers, hidden)
    if model_type == "jamba":
        return _jamba(cfg, num_layers, hidden)
    if model_type == "falcon_h1":
        return _falcon_h1(cfg, num_layers, hidden)
    if model_type in UNMODELLED_HYBRIDS:
        raise HybridConfigError(f"is {UNMODELLED_HYBRIDS[model_type]}, a model_type "
                                f"({model_type!r}) whose layers the planner does not model yet")
    marks = [f for f in HYBRID_FIELDS if cfg.get(f) is not None]
    if marks:
        raise HybridConfigError(f"has {marks[0]!r}, a hybrid model's field, under a model_type "
                                f"({model_type or 'none'!r}) whose layer kinds the planner "
                                "cannot read")
    return None

