"""A typed, validated view of an AI Toolkit job config.

:func:`build_view` reads the config tree as AI Toolkit loads it and returns frozen pydantic
models holding the memory-relevant settings of every process that trains a diffusion model.
Absent keys take AI Toolkit's Python defaults, and every section records which keys the file
actually sets (``present``): a plan must tell "missing, so the default applies" from "set".

Values are checked as strictly as the trainer needs them. A value of the wrong type raises
:class:`~oom_wizard.errors.ConfigError` at its line and column, naming the field in AI Toolkit's
notation (``config.process[0].train.batch_size``), what it is and what is expected.

A ``${VAR}`` placeholder is not an error: AI Toolkit substitutes it from the environment
before parsing, so its value is unknown until run time. Where the view needs a number, a flag
or a resolution it stores ``None`` for such a value; the key is listed in the section's
``unknown`` set and its path in :attr:`JobView.placeholders`. Text values (``[name]`` too)
stay as written.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias, TypeVar

from annotated_types import Ge, Le, MinLen
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Strict,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from oom_wizard.errors import ConfigError
from oom_wizard.frozen import FrozenModel
from oom_wizard.paths import FieldPath, format_path

TRAINING_PROCESS_TYPES: Final[tuple[str, ...]] = (
    "sd_trainer",
    "textual_inversion_trainer",
    "diffusion_trainer",
    "ui_trainer",
    "concept_slider",
    "ultimate_slider_trainer",
    "image_reference_slider_trainer",
    "concept_replacer",
)
"""Process types that run AI Toolkit's diffusion training loop (and so can run out of memory)."""

SIZE_FLAGS: Final[Mapping[str, str]] = {
    "w": "width",
    "h": "height",
    "frames": "num_frames",
    "num_frames": "num_frames",
}
"""Inline prompt flags (``--w 768``) that override a sample's size or length."""

Locate: TypeAlias = Callable[[FieldPath], "tuple[int, int] | None"]
"""Where the value at a field path starts in the file: 1-based (line, column), or None."""

_PLACEHOLDER: Final = re.compile(r"\$\{[^}]+\}")

SizeField: TypeAlias = Literal["width", "height", "num_frames"]


def has_placeholder(value: object) -> bool:
    """Whether ``value`` (text, or a list holding text) contains a ``${VAR}`` placeholder."""
    if isinstance(value, str):
        return _PLACEHOLDER.search(value) is not None
    if isinstance(value, list):
        return any(has_placeholder(item) for item in value)
    return False


def size_flags(prompt: str) -> Iterator[tuple[str, str]]:
    """The size and length flags in a sample prompt, as ``(flag, text after it)``.

    Splits the prompt the way AI Toolkit's sampler does: on ``--``, the flag being the first
    word of each piece and its value the rest of the piece, stripped.
    """
    for piece in prompt.strip().split("--")[1:]:
        flag = piece.split(" ")[0].strip()
        if flag in SIZE_FLAGS:
            yield flag, piece[len(flag) :].strip()


def _flag_value(text: str) -> int | None:
    """The whole number >= 1 a size flag's text stands for, or None."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 1 else None


# --- value types --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Expect:
    """Annotation metadata: how an error message describes the values a field accepts."""

    text: str


def _known(value: Any) -> Any:
    """Before-validator of a required value: a placeholder means unknown (None); null is refused."""
    if value is None:
        raise PydanticCustomError("null_value", "the value is null")
    return None if has_placeholder(value) else value


def _known_or_null(value: Any) -> Any:
    """Before-validator of a value that may be null: a placeholder means unknown (None)."""
    return None if has_placeholder(value) else value


def _not_null(value: Any) -> Any:
    """Before-validator of required text: null is refused, placeholders stay as written."""
    if value is None:
        raise PydanticCustomError("null_value", "the value is null")
    return value


def _as_resolution(value: Any) -> Any:
    """Before-validator of ``datasets[].resolution``: one number or a list, as a tuple."""
    value = _known(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list):
        return tuple(value)
    return value


def _accumulation_steps(value: int) -> int:
    """After-validator of ``gradient_accumulation_steps``: >= 1, or -1 for a whole epoch."""
    if value < 1 and value != -1:
        raise PydanticCustomError("accumulation_steps", "out of range")
    return value


def _checked_prompt(prompt: str) -> str:
    """After-validator of a sample prompt: its size flags must carry whole numbers >= 1."""
    for flag, text in size_flags(prompt):
        if _flag_value(text) is None:
            raise PydanticCustomError(
                "prompt_flag",
                "bad prompt flag",
                {
                    "got": repr(f"--{flag} {text}".strip()),
                    "expected": f"a whole number >= 1 after --{flag}",
                },
            )
    return prompt


_WholeAtLeast1 = Annotated[int, Strict(), Ge(1), _Expect("a whole number >= 1")]
_WholeAtLeast0 = Annotated[int, Strict(), Ge(0)]

_T = TypeVar("_T")

_Known: TypeAlias = Annotated[_T | None, BeforeValidator(_known)]
"""A value the key must hold; a placeholder reads as None (unknown), null is refused."""
_KnownOrNull: TypeAlias = Annotated[_T | None, BeforeValidator(_known_or_null)]
"""A value that may be null; a placeholder reads as None (unknown)."""

Flag: TypeAlias = Annotated[_Known[Annotated[bool, Strict()]], _Expect("true or false")]
Count: TypeAlias = Annotated[_Known[_WholeAtLeast1], _Expect("a whole number >= 1")]
OptionalCount: TypeAlias = Annotated[
    _KnownOrNull[_WholeAtLeast1], _Expect("a whole number >= 1, or null")
]
StartStep: TypeAlias = Annotated[_Known[_WholeAtLeast0], _Expect("a whole number >= 0")]
SampleEvery: TypeAlias = Annotated[
    _KnownOrNull[_WholeAtLeast0],
    _Expect("a whole number >= 0 (0 or null turns periodic sampling off)"),
]
AccumulationSteps: TypeAlias = Annotated[
    _Known[Annotated[int, Strict(), AfterValidator(_accumulation_steps)]],
    _Expect("a whole number >= 1, or -1 for a whole epoch"),
]
Number: TypeAlias = Annotated[_Known[Annotated[float, Strict()]], _Expect("a number")]
NonNegative: TypeAlias = Annotated[
    _Known[Annotated[float, Strict(), Ge(0)]], _Expect("a number >= 0")
]
Fraction: TypeAlias = Annotated[
    _Known[Annotated[float, Strict(), Ge(0), Le(1)]], _Expect("a number from 0.0 to 1.0")
]
Text: TypeAlias = Annotated[Annotated[str, Strict()], BeforeValidator(_not_null), _Expect("text")]
OptionalText: TypeAlias = Annotated[Annotated[str, Strict()] | None, _Expect("text, or null")]
Prompt: TypeAlias = Annotated[
    str, Strict(), AfterValidator(_checked_prompt), _Expect("the prompt text")
]
ControlPaths: TypeAlias = Annotated[
    Annotated[str, Strict()] | tuple[Annotated[str, Strict()], ...] | None,
    _Expect("a folder path, a list of them, or null"),
]
Resolution: TypeAlias = Annotated[
    Annotated[tuple[_WholeAtLeast1, ...], Strict(), MinLen(1)] | None,
    BeforeValidator(_as_resolution),
    _Expect("a whole number >= 1, or a non-empty list of them"),
]


# --- sections -----------------------------------------------------------------------------


class _Section(FrozenModel):
    """A mapping of the config read into a model: its keys, which were set, which are unknown.

    Only keys named like a field are read; ``present`` lists those the file sets and
    ``unknown`` those whose value holds a ``${VAR}`` placeholder. Fields listed in
    ``DERIVED`` are filled in by the reader, never taken from the file.
    """

    model_config = ConfigDict(extra="ignore")

    DERIVED: ClassVar[frozenset[str]] = frozenset({"present", "unknown"})
    EXPECTED: ClassVar[str] = "a mapping"

    present: frozenset[str] = frozenset()
    unknown: frozenset[str] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _read_section(cls, data: Any) -> Any:
        """Keep the keys this view reads, note which are set and which are unknown."""
        if not isinstance(data, Mapping):
            return data
        keys = [key for key in cls.model_fields if key not in cls.DERIVED and key in data]
        out: dict[str, Any] = {key: data[key] for key in keys}
        out.update({key: data[key] for key in cls.DERIVED if key in data})
        out["present"] = frozenset(keys)
        out["unknown"] = frozenset(key for key in keys if has_placeholder(data[key]))
        cls._complete(data, out)
        return out

    @classmethod
    def _complete(cls, raw: Mapping[str, Any], values: dict[str, Any]) -> None:
        """Fill values that the toolkit derives from other keys (a hook for subclasses)."""

    def is_set(self, key: str) -> bool:
        """Whether the file sets ``key`` in this section (to any value, null included)."""
        return key in self.present

    def is_known(self, key: str) -> bool:
        """Whether the value of ``key`` is known now (not a ``${VAR}`` placeholder)."""
        return key not in self.unknown


class EmaView(_Section):
    """``config.process[i].train.ema_config``: only whether EMA is on is read."""

    EXPECTED: ClassVar[str] = "a mapping of EMA settings"

    use_ema: Flag = False


def _as_sigmas(value: Any) -> Any:
    """Before-validator of ``validation_sigmas``: a list of numbers as a tuple of floats."""
    value = _known(value)
    if isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        return tuple(float(v) for v in value)
    return value


Sigmas: TypeAlias = Annotated[
    Annotated[tuple[Annotated[float, Strict()], ...], Strict(), MinLen(1)] | None,
    BeforeValidator(_as_sigmas),
    _Expect("a non-empty list of numbers"),
]


class ValidationView(_Section):
    """``config.process[i].train.validation_config``: AI Toolkit's validation loss pass
    (toolkit/config_modules.py ValidationConfig; BaseSDTrainProcess.validate)."""

    EXPECTED: ClassVar[str] = "a mapping of validation settings"

    resolution: Count = 512
    """The pixel budget (its square) each validation image is resized to."""
    validate_every_n_steps: SampleEvery = 10
    """Every this many steps (and at the start step); 0 or null: at the start step only."""
    validation_sigmas: Sigmas = (1.0, 0.75, 0.5, 0.25)
    """One prediction per sigma, all in one batch: the pass's batch size."""


class ModelKwargsView(_Section):
    """``config.process[i].model.model_kwargs``: the arch's own options the memory counts."""

    EXPECTED: ClassVar[str] = "a mapping of the model's own options"

    match_target_res: Flag = False
    """Edit archs that resize their control images: to the target's area instead of theirs."""
    control_image_max_pixels: OptionalCount = None
    """Krea 2 and Boogu edit: the pixel budget a control image is scaled down to."""
    use_comfy_weights: Flag = False
    """Load ComfyUI's pre-quantized weights: the transformer arrives at its file's precision."""
    vae_tiling: Flag = False
    """Wan's text-to-video archs: tile the VAE's decode of every sample."""


class TrainView(_Section):
    """``config.process[i].train``: batch, accumulation, checkpointing, sampling switches."""

    EXPECTED: ClassVar[str] = "a mapping of training settings"

    batch_size: Count = 1
    gradient_accumulation: Count = 1
    gradient_accumulation_steps: AccumulationSteps = 1
    gradient_checkpointing: Flag = True
    steps: Count = 1000
    disable_sampling: Flag = False
    skip_first_sample: Flag = False
    force_first_sample: Flag = False
    cache_text_embeddings: Flag = False
    unload_text_encoder: Flag = False
    optimizer: Text = "adamw"
    dtype: Text = "fp32"
    lr: Number = 1e-6
    train_text_encoder: Flag = False
    """The text encoder is trained too (its gradients and optimizer state join the step)."""
    diff_output_preservation: Flag = False
    """A second forward pass without the network, for the preservation loss."""
    blank_prompt_preservation: Flag = False
    """A second forward pass on a blank prompt, for the preservation loss."""
    inverted_mask_prior: Flag = False
    """A prior prediction (one more forward pass) for the masked-out part."""
    do_prior_divergence: Flag = False
    """A prior prediction (one more forward pass) to diverge from."""
    ema_config: EmaView | None = None
    """``train.ema_config``; None when absent (EMA off)."""
    attention_backend: OptionalText = None
    diffusion_feature_extractor_path: OptionalText = None
    """A feature-extractor loss (``v3``…``v10`` or a file): its model beside the job's, on the
    card, run on every step (SDTrainer.py:392-410, 660-727)."""
    """diffusers' attention backend (``native`` when unset); an eager one keeps the matrix."""
    do_paramiter_swapping: Flag = False
    """Adafactor/Automagic train a random share of a full fine-tune's weights per step."""
    paramiter_swapping_factor: Fraction = 0.1
    """That share (the toolkit's default 0.1)."""
    validation_config: ValidationView | None = None
    """``train.validation_config``; None when absent (no validation pass)."""

    @property
    def use_ema(self) -> bool | None:
        """Whether EMA keeps a second copy of the trained weights (``ema_config.use_ema``)."""
        return False if self.ema_config is None else self.ema_config.use_ema

    def accumulation_conflict(self) -> bool:
        """Whether both accumulation keys are in use, which the toolkit refuses."""
        return (
            self.gradient_accumulation is not None
            and self.gradient_accumulation > 1
            and self.gradient_accumulation_steps is not None
            and self.gradient_accumulation_steps != 1
        )


class ModelView(_Section):
    """``config.process[i].model``: architecture, quantization, offloading, compile."""

    EXPECTED: ClassVar[str] = "a mapping of model settings"

    arch: OptionalText = None
    name_or_path: OptionalText = None
    low_vram: Flag = False
    quantize: Flag = False
    quantize_te: Flag = False
    qtype: OptionalText = "qfloat8"
    qtype_te: OptionalText = "qfloat8"
    auto_memory: Flag = False
    layer_offloading: Flag = False
    layer_offloading_transformer_percent: Fraction = 1.0
    layer_offloading_text_encoder_percent: Fraction = 1.0
    compile: Flag = False
    te_device: OptionalText = None
    """Where the text encoder lives (``cpu``...); None: the training device."""
    vae_device: OptionalText = None
    """Where the VAE lives; None: the training device."""
    te_dtype: OptionalText = None
    """The text encoder's dtype; None: the model's ``dtype``."""
    vae_dtype: OptionalText = None
    """The VAE's dtype; None: the model's ``dtype``."""
    text_encoder_bits: Count = 16
    """Bits per text-encoder weight (16, 8 or 4)."""
    split_model_over_gpus: Flag = False
    """Spread the transformer's blocks over the visible GPUs (FLUX with ``is_flux`` only)."""
    split_model_other_module_param_count_scale: NonNegative = 0.3
    """The weight of what stays on cuda:0 besides its blocks, in AI Toolkit's split rule."""
    model_kwargs: ModelKwargsView | None = None
    """The arch's own options (``match_target_res``...); None when absent."""
    is_v2: Flag = False
    is_v3: Flag = False
    is_xl: Flag = False
    is_pixart: Flag = False
    is_pixart_sigma: Flag = False
    is_auraflow: Flag = False
    is_flux: Flag = False
    is_lumina2: Flag = False
    is_vega: Flag = False
    is_ssd: Flag = False
    is_v_pred: Flag = False

    @classmethod
    def _complete(cls, raw: Mapping[str, Any], values: dict[str, Any]) -> None:
        values.setdefault("quantize_te", raw.get("quantize", False))
        values.setdefault("layer_offloading", raw.get("auto_memory", False))

    @property
    def legacy_flags(self) -> frozenset[str]:
        """The ``is_*`` keys set to true (``is_v_pred`` included: it is not an arch flag)."""
        return frozenset(
            name
            for name in type(self).model_fields
            if name.startswith("is_") and getattr(self, name)
        )

    def arch_keys(self) -> dict[str, Any]:
        """The keys that choose the model class, as the file sets them: ``arch`` and ``is_*``.

        ``oom_wizard.rules.catalog.Presets.arch_from_model`` resolves them as the toolkit does.
        """
        keys: dict[str, Any] = dict.fromkeys(self.legacy_flags, True)
        if self.arch is not None:
            keys["arch"] = self.arch
        return keys

    @property
    def qtype_base(self) -> str | None:
        """The quantization type without an accuracy-recovery adapter (``uint4|…`` → ``uint4``)."""
        return None if self.qtype is None else self.qtype.split("|", 1)[0]

    @property
    def qtype_adapter(self) -> str | None:
        """The accuracy-recovery adapter after ``|`` in ``qtype``, or None."""
        if self.qtype is None or "|" not in self.qtype:
            return None
        return self.qtype.split("|", 1)[1]


class SampleItem(_Section):
    """One entry of ``sample.samples``; each size field is None unless this sample sets it."""

    EXPECTED: ClassVar[str] = "a mapping with a prompt (and optional width, height, num_frames)"

    prompt: Annotated[Prompt | None, _Expect("the prompt text")] = None
    width: OptionalCount = None
    height: OptionalCount = None
    num_frames: OptionalCount = None


class SampleOverride(FrozenModel):
    """A single sample overriding the section's width, height or frame count."""

    sample: int
    """Index of the sample in the effective list (``samples``, else legacy ``prompts``)."""
    field: SizeField
    source: Literal["field", "prompt_flag"]
    """``field``: ``samples[i].<field>``; ``prompt_flag``: an inline flag such as ``--w 768``."""
    path: FieldPath
    """The value's path: ``…samples[i].width``, or the prompt holding the flag."""
    flag: str | None = None
    """The flag as written, without its value (``--w``), for ``prompt_flag``."""
    value: int


class SampleView(_Section):
    """``config.process[i].sample`` (or ``first_sample``): the preview settings."""

    DERIVED: ClassVar[frozenset[str]] = _Section.DERIVED | {"path"}
    EXPECTED: ClassVar[str] = "a mapping of sample settings"

    path: FieldPath = ()
    """Where this section is: ``("config", "process", i, "sample")``."""
    width: Count = 512
    height: Count = 512
    sample_steps: Count = 20
    sample_every: SampleEvery = 100
    sample_start_step: StartStep = 0
    num_frames: Count = 1
    fps: Count = 16
    guidance_scale: NonNegative = 7.0
    samples: Annotated[tuple[SampleItem, ...], _Expect("a list of samples")] = ()
    prompts: Annotated[tuple[Prompt, ...], _Expect("a list of prompt texts")] = ()

    @property
    def periodic_sampling(self) -> bool | None:
        """Whether samples are made every ``sample_every`` steps; None while unknown."""
        if not self.is_known("sample_every"):
            return None
        return bool(self.sample_every)

    def prompt_paths(self) -> tuple[tuple[FieldPath, str | None], ...]:
        """The effective samples' prompts with their paths: ``samples``, else ``prompts``."""
        return self._prompt_paths

    @cached_property
    def _prompt_paths(self) -> tuple[tuple[FieldPath, str | None], ...]:
        if self.is_set("samples"):
            return tuple(
                ((*self.path, "samples", i, "prompt"), item.prompt)
                for i, item in enumerate(self.samples)
            )
        return tuple(((*self.path, "prompts", i), text) for i, text in enumerate(self.prompts))

    def overrides(self) -> tuple[SampleOverride, ...]:
        """Every per-sample width, height or frame count, in the order the toolkit applies
        them (a sample's own key first, then its prompt flags, the last one winning)."""
        return self._overrides

    @cached_property
    def _overrides(self) -> tuple[SampleOverride, ...]:
        found: list[SampleOverride] = []
        for index, (prompt_path, prompt) in enumerate(self.prompt_paths()):
            if self.is_set("samples"):
                found.extend(self._field_overrides(index))
            for flag, text in size_flags(prompt or ""):
                value = _flag_value(text)
                if value is not None:
                    found.append(
                        SampleOverride(
                            sample=index,
                            field=_size_field(flag),
                            source="prompt_flag",
                            path=prompt_path,
                            flag=f"--{flag}",
                            value=value,
                        )
                    )
        return tuple(found)

    def rendered_size(self, index: int) -> dict[SizeField, int]:
        """The width, height and frames sample ``index`` renders at: the section's values,
        overridden by the sample's own (the last override wins); 1 for an unknown value."""
        size: dict[SizeField, int] = {
            "width": self.width or 1,
            "height": self.height or 1,
            "num_frames": self.num_frames or 1,
        }
        size.update(self._overrides_by_sample.get(index, {}))
        return size

    @cached_property
    def _overrides_by_sample(self) -> dict[int, dict[SizeField, int]]:
        """Per sample, the value each overridden field ends at (one pass over the overrides)."""
        result: dict[int, dict[SizeField, int]] = {}
        for override in self.overrides():
            result.setdefault(override.sample, {})[override.field] = override.value
        return result

    def _field_overrides(self, index: int) -> Iterator[SampleOverride]:
        item = self.samples[index]
        for name in ("width", "height", "num_frames"):
            value = getattr(item, name)
            if value is not None:
                yield SampleOverride(
                    sample=index,
                    field=_size_field(name),
                    source="field",
                    path=(*self.path, "samples", index, name),
                    value=value,
                )


def _size_field(name: str) -> SizeField:
    """The sample field a size key or prompt flag sets."""
    field = SIZE_FLAGS.get(name, name)
    if field == "width":
        return "width"
    if field == "height":
        return "height"
    return "num_frames"


class DatasetView(_Section):
    """One entry of ``config.process[i].datasets``."""

    DERIVED: ClassVar[frozenset[str]] = _Section.DERIVED | {"index", "resolution_is_list"}
    EXPECTED: ClassVar[str] = "a mapping of dataset settings"

    index: int = 0
    """Position in ``datasets``."""
    folder_path: OptionalText = None
    resolution: Resolution = (512,)
    resolution_is_list: bool = False
    """Whether the file writes ``resolution`` as a list (``[512, 768]``), not one number."""
    batch_size: OptionalCount = None
    num_frames: Count = 1
    auto_frame_count: Flag = False
    fps: Count = 24
    cache_latents: Flag = False
    cache_latents_to_disk: Flag = False
    cache_text_embeddings: Flag = False
    buckets: Flag = True
    control_path: ControlPaths = None
    control_path_1: OptionalText = None
    control_path_2: OptionalText = None
    control_path_3: OptionalText = None
    full_size_control_images: Flag = True
    """False: the dataloader resizes each control image to 512×512 (not to the target's)."""
    control_from_same_folder: Flag = False
    """Each item draws its control images from the other images of its own folder
    (dataloader_mixins.py:1124-1141), ``num_controls_from_same_folder`` of them."""
    num_controls_from_same_folder: Count = 1
    num_repeats: StartStep = 1
    """Each file is listed this many times (data_loader.py:452-454), an item each; 0 and 1
    list it once."""
    flip_x: Flag = False
    """A mirrored copy of every item is added (data_loader.py:567-574); flip_y likewise."""
    flip_y: Flag = False

    @classmethod
    def _complete(cls, raw: Mapping[str, Any], values: dict[str, Any]) -> None:
        values["resolution_is_list"] = isinstance(raw.get("resolution"), list)

    @property
    def control_images(self) -> int:
        """How many control images each item brings (edit models): with
        ``control_from_same_folder``, ``num_controls_from_same_folder`` (the dataloader draws
        that many of the folder's other images, fewer only where the folder has fewer);
        else the non-empty paths of ``control_path_1..3`` when any is set, else of
        ``control_path`` (text or a list), as the toolkit's DatasetConfig reads them."""
        if self.control_from_same_folder:
            return self.num_controls_from_same_folder or 1  # at most the folder's others
        numbered = [p for p in (self.control_path_1, self.control_path_2, self.control_path_3) if p]
        if numbered:
            return len(numbered)
        if isinstance(self.control_path, str):
            return 1 if self.control_path else 0
        return len([p for p in self.control_path or () if p])

    @property
    def caches_latents(self) -> bool:
        """Whether the latents are encoded once, while caching, before training
        (``cache_latents``, or ``cache_latents_to_disk``, which caches them too)."""
        return self.cache_latents is True or self.cache_latents_to_disk is True

    @property
    def name(self) -> str:
        """The dataset as people call it: its folder's name (``/data/portraits`` →
        ``portraits``, Windows paths too); ``#N`` (counted from 1) without a folder."""
        folder = (self.folder_path or "").replace("\\", "/").rstrip("/")
        return folder.rsplit("/", 1)[-1] or f"#{self.index + 1}"

    @property
    def is_video(self) -> bool:
        """Whether the dataset trains on clips: ``num_frames`` > 1 or ``auto_frame_count``.

        Judged on the known values only: a placeholder counts as neither.
        """
        return (self.num_frames or 1) > 1 or self.auto_frame_count is True


class NetworkView(_Section):
    """``config.process[i].network``: the adapter's type and sizes."""

    EXPECTED: ClassVar[str] = "a mapping of network settings"

    type: Text = "lora"
    rank: OptionalCount = None
    linear: OptionalCount = None
    conv: OptionalCount = None
    """The rank of the convolution layers' adapters (LoCon; None: none)."""
    lokr_factor: Annotated[_Known[Annotated[int, Strict()]], _Expect("a whole number")] = -1
    """LoKr's Kronecker factor; -1 lets the toolkit pick the largest."""
    lokr_full_rank: Flag = True


class AdapterView(_Section):
    """``config.process[i].adapter``: only its type and control-image count are read."""

    EXPECTED: ClassVar[str] = "a mapping of adapter settings"

    type: OptionalText = None
    num_control_images: Count = 1


class _Fields(FrozenModel):
    """Scalar keys read from a mapping that is not a section of its own."""

    model_config = ConfigDict(extra="ignore")


class _TopLevel(_Fields):
    job: OptionalText = None


class _ConfigHeader(_Fields):
    name: OptionalText = None


class _ProcessHeader(_Fields):
    type: Annotated[Text, _Expect("text naming the process type, such as sd_trainer")]
    name: OptionalText = None
    training_folder: OptionalText = None
    device: OptionalText = None


class ProcessView(FrozenModel):
    """One training process, ``config.process[index]``."""

    model_config = ConfigDict(extra="ignore")

    index: int
    type: str
    name: str | None
    training_folder: str | None
    train: TrainView
    model: ModelView
    sample: SampleView | None
    """None when the process has no ``sample:`` section."""
    first_sample: SampleView | None = None
    """The ``first_sample:`` section, an extra sampling pass before training, if any."""
    datasets: tuple[DatasetView, ...] = ()
    network_rank: int | None = None
    """LoRA rank (``network.rank``, else ``network.linear``, else 4); None without a
    ``network:`` section or while the rank is a placeholder."""
    network: NetworkView | None = None
    """The ``network:`` section; None without one (a full fine-tune)."""
    adapter: AdapterView | None = None
    """The ``adapter:`` section (control LoRA and other adapters), if any."""
    device: str | None = None
    """The process's ``device`` (AI Toolkit trains on ``cuda:0`` when it is absent)."""

    @property
    def gpu_index(self) -> int:
        """The index of the GPU AI Toolkit trains on: ``cuda:N``'s N, else 0."""
        device = (self.device or "cuda:0").strip().lower()
        number = device.partition(":")[2]
        return int(number) if device.startswith("cuda") and number.isdigit() else 0

    @property
    def first_sample_section(self) -> bool:
        """Whether the process has a ``first_sample:`` section."""
        return self.first_sample is not None

    def path(self, *parts: str | int) -> FieldPath:
        """The field path of ``parts`` inside this process."""
        return ("config", "process", self.index, *parts)

    def path_text(self, relative: str) -> str:
        """``train.batch_size`` inside this process, in AI Toolkit's notation."""
        return f"config.process[{self.index}].{relative}"


class JobView(FrozenModel):
    """The whole job: its name and type, its training processes and the others."""

    model_config = ConfigDict(extra="ignore")

    name: str | None
    job: str | None
    processes: tuple[ProcessView, ...]
    other_processes: tuple[tuple[int, str], ...] = ()
    """(index, type) of every process that does not train a diffusion model."""
    placeholders: tuple[str, ...] = ()
    """Paths of the values read here that hold a ``${VAR}`` placeholder; numbers, flags and
    resolutions among them are None in the view."""

    @property
    def primary(self) -> ProcessView | None:
        """The first training process, the one the wizard works on."""
        return self.processes[0] if self.processes else None


# --- reading ------------------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)
_S = TypeVar("_S", bound=_Section)

_EXPECTED_BY_ERROR: Final[Mapping[str, str]] = {
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "tuple_type": "a list",
    "list_type": "a list",
    "too_short": "a non-empty list",
}


def build_view(tree: Mapping[str, Any], *, file: str, locate: Locate) -> JobView:
    """Read and check the memory-relevant part of a job config.

    Args:
        tree: The config as AI Toolkit loads it (from YAML or JSON).
        file: The config's file name, for error messages.
        locate: Gives the 1-based (line, column) of the value at a field path, or None.

    Raises:
        ConfigError: the first value of the wrong type, or a broken structure, at its
            position in the file.
    """
    return _Reader(file, locate).job(tree)


class _Reader:
    """Walks the config tree, validating each section and collecting placeholder paths."""

    def __init__(self, file: str, locate: Locate) -> None:
        self._file = file
        self._locate = locate
        self._placeholders: list[str] = []

    def job(self, tree: object) -> JobView:
        """The view of the whole config tree."""
        if not isinstance(tree, Mapping):
            raise self._error(
                (),
                f"the top level of the config is {_show(tree)}; expected a mapping with "
                "job: extension and config: (holding name: and process:)",
            )
        if "config" not in tree:
            raise self._error(
                (),
                "the config has no config: section; an AI Toolkit job needs job: extension and "
                "config: with name: and a process: list",
            )
        config = tree["config"]
        if not isinstance(config, Mapping):
            raise self._error(
                ("config",),
                f"config is {_show(config)}; expected a mapping with name: and a process: list",
            )
        top = self._validate(_TopLevel, tree, ())
        header = self._validate(_ConfigHeader, config, ("config",))
        processes: list[ProcessView] = []
        others: list[tuple[int, str]] = []
        for index, entry in enumerate(self._process_list(config)):
            process = self._process_header(index, entry)
            if process.type in TRAINING_PROCESS_TYPES:
                processes.append(self._process(index, entry, process))
            else:
                others.append((index, process.type))
        return JobView(
            name=header.name,
            job=top.job,
            processes=tuple(processes),
            other_processes=tuple(others),
            placeholders=tuple(self._placeholders),
        )

    def _process_list(self, config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        path: FieldPath = ("config", "process")
        if "process" not in config:
            raise self._error(
                ("config",),
                "config has no process: list; add one with the training process "
                "(- type: sd_trainer, with its train:, model: and datasets:)",
            )
        entries = config["process"]
        if not isinstance(entries, list):
            raise self._error(
                path,
                f"config.process is {_show(entries)}; expected a list of processes "
                "(- type: sd_trainer ...)",
            )
        if not entries:
            raise self._error(
                path, "config.process is an empty list; add the training process to it"
            )
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise self._error(
                    (*path, index),
                    f"{format_path((*path, index))} is {_show(entry)}; expected a mapping with "
                    "type: and the process's settings",
                )
        return entries

    def _process_header(self, index: int, entry: Mapping[str, Any]) -> _ProcessHeader:
        path: FieldPath = ("config", "process", index)
        if "type" not in entry:
            raise self._error(
                path,
                f"{format_path(path)} has no type:; add the process type, such as type: sd_trainer",
            )
        return self._validate(_ProcessHeader, entry, path)

    def _process(self, index: int, entry: Mapping[str, Any], header: _ProcessHeader) -> ProcessView:
        base: FieldPath = ("config", "process", index)
        train = self._section(TrainView, entry.get("train"), (*base, "train")) or TrainView()
        if train.accumulation_conflict():
            first = format_path((*base, "train", "gradient_accumulation"))
            second = format_path((*base, "train", "gradient_accumulation_steps"))
            raise self._error(
                (*base, "train", "gradient_accumulation_steps"),
                f"{first} is {train.gradient_accumulation} and {second} is "
                f"{train.gradient_accumulation_steps}: the toolkit refuses this, the two are "
                "mutually exclusive; keep one and set the other to 1",
            )
        model = self._section(ModelView, entry.get("model"), (*base, "model")) or ModelView()
        sample = self._sample(entry, "sample", base)
        first_sample = self._sample(entry, "first_sample", base)
        datasets = self._datasets(entry, base)
        network = self._section(NetworkView, entry.get("network"), (*base, "network"))
        adapter = self._section(AdapterView, entry.get("adapter"), (*base, "adapter"))
        return ProcessView(
            index=index,
            type=header.type,
            name=header.name,
            training_folder=header.training_folder,
            train=train,
            model=model,
            sample=sample,
            first_sample=first_sample,
            datasets=datasets,
            network_rank=_rank(network),
            network=network,
            adapter=adapter,
            device=header.device,
        )

    def _sample(self, entry: Mapping[str, Any], key: str, base: FieldPath) -> SampleView | None:
        return self._section(SampleView, entry.get(key), (*base, key), path=(*base, key))

    def _datasets(self, entry: Mapping[str, Any], base: FieldPath) -> tuple[DatasetView, ...]:
        path: FieldPath = (*base, "datasets")
        items = entry.get("datasets")
        if items is None:
            return ()
        if not isinstance(items, list):
            raise self._error(
                path,
                f"{format_path(path)} is {_show(items)}; expected a list of datasets "
                "(- folder_path: ...)",
            )
        views: list[DatasetView] = []
        for index, item in enumerate(items):
            view = self._section(DatasetView, item, (*path, index), index=index)
            views.append(view or DatasetView(index=index))
        return tuple(views)

    def _section(self, model: type[_S], raw: object, where: FieldPath, **derived: Any) -> _S | None:
        """Validate the mapping ``raw`` found at ``where`` as ``model``; None when it is null.

        Args:
            model: The section's view class.
            raw: The value in the config tree (None when the key is absent).
            where: The value's field path.
            derived: Values of the model's ``DERIVED`` fields that the reader knows.
        """
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise self._error(
                where, f"{format_path(where)} is {_show(raw)}; expected {model.EXPECTED}"
            )
        view = self._validate(model, {**raw, **derived}, where)
        self._placeholders.extend(format_path(p) for p in _unknown_paths(view, where))
        return view

    def _validate(self, model: type[_M], data: Mapping[str, Any], base: FieldPath) -> _M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise self._first_error(exc, model, data, base) from None

    def _first_error(
        self,
        exc: ValidationError,
        model: type[BaseModel],
        data: Mapping[str, Any],
        base: FieldPath,
    ) -> ConfigError:
        """The first validation error as a one-line ConfigError at the value's position."""
        error = exc.errors()[0]
        loc, got = _reach(data, tuple(error["loc"]))
        path = (*base, *loc)
        ctx = error.get("ctx") or {}
        expected = (
            ctx.get("expected")
            or _expected_at(model, loc)
            or _EXPECTED_BY_ERROR.get(error["type"], "a different value")
        )
        where = format_path(path)
        if error["type"] == "null_value":
            message = (
                f"{where} is empty (null); expected {expected}: write a value, or delete the "
                "key to use AI Toolkit's default"
            )
        elif "got" in ctx:
            message = f"{where} has {ctx['got']}; expected {expected}"
        else:
            message = f"{where} is {_show(got)}; expected {expected}{_hint(got, expected)}"
        return self._error(path, message)

    def _error(self, path: FieldPath, message: str) -> ConfigError:
        """A ConfigError at the position of ``path``, or of its nearest located parent."""
        for end in range(len(path), -1, -1):
            position = self._locate(path[:end])
            if position is not None:
                line, column = position
                return ConfigError(message, file=self._file, line=line, column=column)
        return ConfigError(message, file=self._file)


def _rank(network: NetworkView | None) -> int | None:
    """The LoRA rank the toolkit uses: ``rank`` wins over ``linear``; 4 when neither is set."""
    if network is None:
        return None
    for key in ("rank", "linear"):
        if not network.is_known(key):
            return None
        value: int | None = getattr(network, key)
        if value is not None:
            return value
    return 4


def _unknown_paths(view: _Section, base: FieldPath) -> Iterator[FieldPath]:
    """The paths of ``view``'s placeholder values, nested sample items included."""
    for key in sorted(view.unknown, key=list(type(view).model_fields).index):
        yield (*base, key)
    if isinstance(view, SampleView):
        for index, item in enumerate(view.samples):
            yield from _unknown_paths(item, (*base, "samples", index))


def _reach(data: object, loc: tuple[str | int, ...]) -> tuple[FieldPath, object]:
    """The longest prefix of ``loc`` that exists in ``data``, and the value found there."""
    reached: list[str | int] = []
    value = data
    for part in loc:
        found, child = _child(value, part)
        if not found:
            break
        value = child
        reached.append(part)
    return tuple(reached), value


def _child(value: object, part: str | int) -> tuple[bool, object]:
    """Whether ``value`` has a key or index ``part``, and the value there."""
    if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
        return True, value[part]
    if isinstance(value, Mapping) and part in value:
        return True, value[part]
    return False, None


def _expected_at(model: type[BaseModel], loc: FieldPath) -> str | None:
    """How the annotation of the field (or item) at ``loc`` describes the values it accepts."""
    hint: Any = model
    for part in loc:
        core = _core(hint)
        if isinstance(part, str) and isinstance(core, type) and issubclass(core, BaseModel):
            field = core.model_fields.get(part)
            if field is None:
                return None
            hint = field.rebuild_annotation()
        elif isinstance(part, int) and typing.get_origin(core) is tuple:
            hint = typing.get_args(core)[0]
        else:
            return None
    return _expectation(hint)


def _core(hint: Any) -> Any:
    """``hint`` without ``Annotated`` wrappers and without ``| None``."""
    while True:
        if typing.get_origin(hint) is Annotated:
            hint = typing.get_args(hint)[0]
            continue
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(members) == 1:
            hint = members[0]
            continue
        return hint


def _expectation(hint: Any) -> str | None:
    """The outermost ``_Expect`` text in ``hint``, else a nested model's description.

    Python flattens nested ``Annotated`` types, so the last ``_Expect`` is the outermost.
    """
    while typing.get_origin(hint) is Annotated:
        base, *metadata = typing.get_args(hint)
        texts = [item.text for item in metadata if isinstance(item, _Expect)]
        if texts:
            return texts[-1]
        hint = base
    core = _core(hint)
    if isinstance(core, type) and issubclass(core, _Section):
        return core.EXPECTED
    return None


def _show(value: object) -> str:
    """A short rendering of a config value for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    text = repr(value)
    if isinstance(value, list):
        return text if len(text) <= 40 else "a list"
    return text if len(text) <= 60 else text[:57] + "..."


def _hint(got: object, expected: str) -> str:
    """Advice for a decimal written where a whole number is expected (``2.0`` → ``2``)."""
    if expected.startswith("a whole number") and isinstance(got, float) and got.is_integer():
        return f" (write {int(got)}, not {got})"
    return ""
