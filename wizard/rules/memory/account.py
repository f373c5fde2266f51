"""What one training process holds on the GPU in each phase of its run, in bytes: the account
that sums the memory model's terms, each computed in a module of its own.
:mod:`~oom_wizard.rules.memory.job` turns them into each phase's band of GiB, adds what no CPU
can measure (the CUDA context, the allocator's slack, the trainer's workspaces:
:mod:`~oom_wizard.rules.memory.overheads`) and calibrates them by the job's own figures
(:mod:`~oom_wizard.rules.memory.calibration`).

The terms, each its module: the family's figures (``family``: parameter counts, the blocks'
activation figures, how they were checked); the weights (``weights``: the resident transformer,
the layer copies in flight, the text encoder, the VAE); the trained state (``trained``: the
adapter or the fully trained weights, gradients, EMA, optimizer state); a training step's
activations (``activations``); the passes without gradients (``sampling``: a sample, the
validation pass); the VAE's passes (``vae_passes``: encode, a sample's decode); a model split
over the GPUs (``split_model``).

The formula
-----------

Per training process (the job's figure of a phase is the largest over its processes), in bytes,
turned into GiB at the end (``/ 2³⁰``)::

    transformer  = P_t × b_t × E × (1 − o_t × (1 − k))             resident transformer
    in_flight    = ring (+ kept)                    weight copies made for the pass
    text_encoder = P_te × b_te × (1 − o_te) + o_te × R_te × b_te'   0 with te_device: cpu
    vae          = P_vae × b_vae                   0 with vae_device: cpu, and in a training
                                                   step when every dataset's latents are cached
                   + P_as × b                      in a sample, and in a training step when
                                                   the job samples at all (a sample leaves them)
    trainable    = adapter weights + gradients (+ EMA's copy)  or, for a full fine-tune,
                   P_t' × b × s (gradients) (+ P_t' × b, EMA), P_t' the weights left on the
                   card by layer offloading (a moved weight's gradient goes to system RAM as
                   it is made, and its state and EMA copy live beside it there; its gradient
                   ring of depth copies is in ``in_flight``); s = ``paramiter_swapping_factor``
                   with ``do_paramiter_swapping`` on an optimizer that swaps (levers.yaml's
                   ``paramiter_swapping``), else 1: only that share holds a gradient
    optimizer    = n × S                           n trained weights on the card, S state bytes each
    activations  = activations.py in a training step, sampling.py in a sample
    overhead     = C + k × (activations + in_flight) + W
                                                   the CUDA context (a constant), the allocator's
                                                   slack (a share) and, outside loading, the
                                                   libraries' workspaces (overheads.py)

    P_t, P_te, P_vae  billions of parameters (memory.yaml's family, else archs.yaml, else nominal;
                 an arch whose size follows ``model.name_or_path``, the generic ``wan21``, takes
                 the family its ``memory_by_name`` patterns find there)
    b            bytes per weight of ``train.dtype``; b_t the qtype's with ``model.quantize``;
                 b_te: ``te_dtype``'s bytes, the qtype_te's with ``quantize_te``, and at most
                 ``text_encoder_bits`` / 8; b_vae: ``vae_dtype``'s bytes, else b
    E            the arch's experts, 1 with ``low_vram``; o_t, o_te the layer-offloading shares
    k, ring      under layer offloading (AI Toolkit's memory manager moves each Linear and
                 Conv2d of the model, blocks or not): k the share of the transformer's
                 parameters outside those layers, which stays; ring = the staging rings'
                 copies of its largest layer (memory.yaml's ``offload``): depth + 1 for a
                 forward pass, 2 × depth + 1 in a training step (OFFLOAD_PIPELINE_DEPTH), at
                 the compute dtype (a torchao or quanto weight is dequantized into its slot,
                 with its stored copy beside it while it is), or at b_t for AI Toolkit's own
                 quantizers, which stage their codes; each moved layer also keeps its bf16
                 input for backward (BOUNCED_INPUT_SHARE)
    kept         a qtype AI Toolkit's own quantizers dequantize at every forward (levers.yaml's
                 ``dequantized_per_forward``, offloaded or not): F.linear keeps that copy for
                 the input's gradient until backward: the largest block's Linear weights at
                 the compute dtype with checkpointing, every Linear weight's without
    P_as         parameters a sample moves to the card and nothing moves back (memory.yaml's
                 ``params.after_sample``: LTX-2's vocoder)
    R_te, b_te'  the text encoders' parameters outside their Linear and Conv2d layers
                 (memory.yaml's ``offload.text_encoder_resident_params``: token embeddings
                 above all), which text-encoder offloading leaves on the card, unquantized

The phases::

    load            the larger of: transformer + one block at full precision while it is
                    quantized on the card (not with low_vram, which quantizes in system RAM,
                    nor with ComfyUI's pre-quantized weights) + text_encoder + vae; and, while
                    the latents are cached, vae + one item's encode (the transformer and the
                    text encoder wait on the CPU; on an arch that skips the device presets
                    under low_vram, ``low_vram_skips_device_presets``, the encode stacks on
                    the first); + the context
    baseline_sample transformer + text_encoder (0 when cached) + vae + adapter weights
                    + the larger of the sample's denoising pass and the VAE decode + overhead
    training        transformer + text_encoder (0 when cached or unloaded, unless trained) + vae
                    + trainable + optimizer + training activations + overhead
    sample          as baseline_sample, with the optimizer state that now exists
    On an arch whose low-VRAM sampling pipeline holds the text encoder only while it encodes
    (``low_vram_sample_unloads_te``, Wan 2.1), a sample counts the larger of the encoder and
    the activations, not their sum.

The weights' edges: weights × [1, 1 + WEIGHT_SLACK] (quantized models keep some layers
unquantized and carry scales: + QUANT_SLACK), counted at their middle; a training step adds each
batch item's own cost ITEM_GIB (``Terms.items``, :mod:`~oom_wizard.rules.memory.overheads`). The
band around the sum is :mod:`~oom_wizard.rules.memory.bands`'s (``CLASS_BAND``, by how the
activations were checked: on a GPU, on CPU only, a stand-in).

Left out, with a note where it matters: the text encoder's forward, cuDNN benchmark workspaces,
an accuracy recovery adapter's weights (its rank is in its file), a quantized layer's transient
dequantization beyond its slot (one layer at most).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from oom_wizard.formats.view import ProcessView, SampleView
from oom_wizard.rules.catalog import ArchFacts, Presets
from oom_wizard.rules.memory.activations import TrainingActivations
from oom_wizard.rules.memory.bands import Certainty
from oom_wizard.rules.memory.family import FamilyFigures, FamilyLike
from oom_wizard.rules.memory.phases import LoadMoment, PassPhase, Phase
from oom_wizard.rules.memory.sampling import SamplingActivations
from oom_wizard.rules.memory.split_model import SplitCard, split_cards
from oom_wizard.rules.memory.trained import TrainedState
from oom_wizard.rules.memory.vae_passes import VaePasses
from oom_wizard.rules.memory.weights import QUANT_SLACK, WEIGHT_SLACK, Weights


@dataclass(frozen=True)
class Terms:
    """One phase of one process, in bytes: (low, high) of each part."""

    transformer: tuple[float, float]
    text_encoder: tuple[float, float]
    vae: tuple[float, float]
    trainable: tuple[float, float]
    optimizer: tuple[float, float]
    activations: tuple[float, float]
    loading: bool = False
    """Loading: whole tensors moved in, no trainer workspaces."""
    in_flight: tuple[float, float] = (0.0, 0.0)
    vae_pass: tuple[float, float] = (0.0, 0.0)
    """The VAE's decode or encode where it is the larger of it and the denoiser's pass (then
    ``activations`` is 0): it is the phase's varying part in their place."""
    certainty: Certainty = "cpu"
    """How the process's activation figures were checked: the band's width
    (:data:`oom_wizard.rules.memory.bands.CLASS_BAND`)."""
    items: int = 0
    """A training step's batch items whose own cost (latents, noise, targets, the loss) the
    per-token figures leave out: :mod:`oom_wizard.rules.memory.parts` adds each at its fitted
    ``item_gib`` (0 for a UNet, whose fitted figures hold it, and outside a training step)."""
    moment: LoadMoment | None = None
    """Which of the load's moments these are (:data:`~oom_wizard.rules.memory.phases.LoadMoment`;
    None outside the load phase)."""

    def fixed(self) -> tuple[float, float]:
        parts = (
            self.transformer,
            self.in_flight,
            self.text_encoder,
            self.vae,
            self.trainable,
            self.optimizer,
        )
        return sum(p[0] for p in parts), sum(p[1] for p in parts)


class ProcessAccount:
    """The terms of one process, summed per phase (the module's formula).

    Its inputs' figures, weights, trained state, activations and VAE passes are each a term's
    object (``figures``, ``weights``, ``trained``, ``activations``, ``sampling``,
    ``vae_passes``); ``split`` the cards of a model split over the GPUs (None on one card).
    What they assume is said in ``notes``, in the order they were weighed."""

    def __init__(
        self,
        process: ProcessView,
        facts: ArchFacts | None,
        family: FamilyLike | None,
        presets: Presets,
        video: bool,
        gpus: int = 1,
    ) -> None:
        self.process = process
        self.facts = facts
        self.notes: list[str] = []
        self.figures = FamilyFigures(process, facts, family, presets, video, self.notes)
        self.vae_passes = VaePasses(self.figures)
        self.weights = Weights(self.figures)
        self.trained = TrainedState(self.figures, self.weights)
        self.activations = TrainingActivations(self.figures, self.weights)
        self.sampling = SamplingActivations(self.figures, self.vae_passes)
        self.in_flight_step = self.weights.in_flight_step + self.trained.in_flight
        """The weight copies of a training step: the weights' and the trained state's rings."""
        self.split = split_cards(self.figures, self.trained.ema, gpus)

    # --- what other layers read of the account (the host's budget: counts and shares)

    @property
    def known(self) -> bool:
        """Every figure is real (no nominal counts nor a nominal block)."""
        return self.figures.known

    @property
    def certainty(self) -> Certainty:
        """How the activation figures were checked."""
        return self.figures.certainty

    @property
    def quantized(self) -> bool:
        """The transformer is quantized (or loaded pre-quantized)."""
        return self.weights.quantized

    @property
    def full(self) -> float:
        """Bytes per weight of ``train.dtype``."""
        return self.weights.full

    @property
    def p_t(self) -> float:
        """The transformer's parameters, in billions."""
        return self.figures.p_t

    @property
    def p_te(self) -> float:
        """The text encoders' parameters, in billions."""
        return self.figures.p_te

    @property
    def caching_parks_models(self) -> bool:
        """Whether filling a cache moves the models it does not use to the CPU first (AI
        Toolkit's device presets); not on an arch that skips them under ``low_vram``
        (archs.yaml's ``low_vram_skips_device_presets``)."""
        return not (
            self.facts is not None
            and self.facts.low_vram_skips_device_presets
            and self.process.model.low_vram is True
        )

    @property
    def experts(self) -> int:
        """The transformer's experts (Wan 2.2's two)."""
        return self.figures.experts

    @property
    def moved_share(self) -> float:
        """The share of the transformer's parameters layer offloading moves to system RAM."""
        return self.weights.moved_share

    # --- the phases

    def _samples(self, first: bool) -> SampleView | None:
        process, train = self.process, self.process.train
        if train.disable_sampling is True:
            return None
        if first:
            if process.first_sample is not None:
                return process.first_sample
            if train.skip_first_sample is True and train.force_first_sample is not True:
                return None
            return process.sample
        sample = process.sample
        if sample is None or sample.periodic_sampling is False:
            return None
        return sample

    def _samples_at_all(self) -> bool:
        """Whether the run samples before or during training (a baseline or a periodic one)."""
        return self._samples(first=True) is not None or self._samples(first=False) is not None

    def cards(self, phase: Phase) -> list[Terms]:
        """The phase's terms: one, or one per card of a split model (the fullest sets the
        phase's band); none where the phase does not happen."""
        if phase == "load":  # each of its moments, the larger sets the band
            return [t for card in self.split or (None,) for t in self.load_moments(card)]
        found = (self._terms(phase, card) for card in self.split or (None,))
        return [terms for terms in found if terms is not None]

    def _held(self, card: SplitCard | None) -> _Held:
        """What the process holds on ``card`` (None: everything, on one card).

        Split: the card's share of the transformer; cuda:0 also the text encoder, the VAE, the
        adapter with its gradients and optimizer state, and EMA's copy; a full fine-tune's
        gradients and optimizer state live beside their weights, on each card by its share.
        """
        if card is None:
            return _Held(
                self.weights.transformer,
                self.weights.transformer_load,
                self.weights.text_encoder,
                self.weights.te_load,
                self.weights.vae,
                self.trained.adapter_weights,
                self.trained.gradients,
                self.trained.ema,
                self.trained.optimizer,
                self.weights.in_flight_pass,
                self.in_flight_step,
                self.weights.after_sample,
            )
        first = card.index == 0
        whole = 1.0 if first else 0.0
        full = self.process.network is None
        by_share = card.share if full else whole
        return _Held(
            self.weights.transformer * card.share,
            self.weights.transformer_load * card.share,
            self.weights.text_encoder * whole,
            self.weights.te_load * whole,
            self.weights.vae * whole,
            self.trained.adapter_weights * whole,
            self.trained.gradients * by_share,
            self.trained.ema * whole,
            self.trained.optimizer * by_share,
            self.weights.in_flight_pass * card.share,
            self.in_flight_step * card.share,
            self.weights.after_sample * whole,
        )

    def load_moments(self, card: SplitCard | None = None) -> tuple[Terms, ...]:
        """The load phase's moments on ``card`` (None: one card), each its own terms; the
        larger is the phase's peak.

        Loaded: the final residency plus the block being quantized on the card (block by
        block), the text encoder and the VAE beside it. Then the latents are cached with the
        VAE alone on the card: AI Toolkit parks the transformer and the text encoder on the
        CPU first (``set_device_state_preset('cache_latents')``, base_model.py:1554-1599,
        dataloader_mixins.py:1962-1965), so one item's encode stacks on the VAE only; on an
        arch that skips the presets under ``low_vram`` (archs.yaml's
        ``low_vram_skips_device_presets``) it stacks on everything loaded."""
        held = self._held(card)
        w = 1.0 + WEIGHT_SLACK + (QUANT_SLACK if self.quantized else 0.0)
        te_slack = 1.0 + WEIGHT_SLACK
        first = card is None or card.index == 0  # the VAE lives on cuda:0
        zero = (0.0, 0.0)
        encode = self.vae_passes.caching() if first else 0.0
        vae = (held.vae, held.vae * te_slack)

        def moment(
            at: LoadMoment, transformer: tuple[float, float], text_encoder: tuple[float, float]
        ) -> Terms:
            return Terms(
                transformer=transformer,
                text_encoder=text_encoder,
                vae=vae,
                trainable=zero,
                optimizer=zero,
                activations=zero,
                loading=True,
                vae_pass=(encode, encode),
                certainty=self.certainty,
                moment=at,
            )

        loaded = moment(
            "loaded",
            (held.transformer_load, held.transformer_load * w),
            (held.te_load, held.te_load * te_slack),
        )
        if not self.caching_parks_models or encode == 0.0:
            return (loaded,)
        return replace(loaded, vae_pass=zero), moment("caching", zero, zero)

    def _terms(self, phase: PassPhase, card: SplitCard | None = None) -> Terms | None:
        """A phase after the load on ``card`` (None: one card); None where it does not happen."""
        held = self._held(card)
        blocks = card.blocks if card is not None else None
        w = 1.0 + WEIGHT_SLACK + (QUANT_SLACK if self.quantized else 0.0)
        te_slack = 1.0 + WEIGHT_SLACK
        first = card is None or card.index == 0  # the VAE lives on cuda:0
        cached = self.process.train.cache_text_embeddings is True or any(
            d.cache_text_embeddings is True for d in self.process.datasets
        )
        trains_te = self.process.train.train_text_encoder is True
        zero = (0.0, 0.0)
        if phase == "training":
            unloaded = cached or self.process.train.unload_text_encoder is True
            te = held.text_encoder if trains_te or not unloaded else 0.0
            # With every dataset's latents cached the training state puts the VAE in system
            # RAM (BaseSDTrainProcess.py:2514; sd_device_states_presets.py:47-49).
            vae = 0.0 if self.vae_passes.latents_cached() else held.vae
            if held.after_sample and self._samples_at_all():
                vae += held.after_sample
                self.notes.append(
                    f"The vocoder ({held.after_sample / 2**30:.2f} GiB) stays on the card after "
                    "the first sample: AI Toolkit moves the whole pipeline there to sample and "
                    "moves back only the VAE, the transformer and the text encoder."
                )
            trainable = held.adapter_weights + held.gradients + held.ema
            act = self.activations.training(blocks)
            encode = self.vae_passes.encode() if first else 0.0
            if encode > act:  # the encode runs before the forward and is freed by then
                self.notes.append(
                    "Latents are not cached: the VAE encodes each batch in the step, and that "
                    "encode is the step's peak."
                )
            return Terms(
                transformer=(held.transformer, held.transformer * w),
                in_flight=(held.in_flight_step, held.in_flight_step),
                text_encoder=(te, te * te_slack),
                vae=(vae, vae * te_slack),
                trainable=(trainable, trainable),
                optimizer=(held.optimizer, held.optimizer),
                activations=zero if encode > act else (act, act),
                vae_pass=(encode, encode) if encode > act else zero,
                items=0 if encode > act else self.activations.items(),
                certainty=self.certainty,
            )
        sample = self._samples(first=phase == "baseline_sample")
        validation = self.sampling.validation(blocks) if phase == "sample" else None
        if sample is None and validation is None:
            return None
        decode = 0.0
        if sample is not None:
            te = 0.0 if cached else held.text_encoder
            low, high, decode = self.sampling.sample(sample, blocks)
            if te and self._sample_unloads_te():
                # The encoder is on the card while it encodes, the activations while the
                # transformer denoises: the larger of the two counts, not their sum.
                te = max(te - (low + high) / 2.0, 0.0)
        else:  # validation only: its prompts were encoded at start, the encoder is as in training
            unloaded = cached or self.process.train.unload_text_encoder is True
            te = held.text_encoder if trains_te or not unloaded else 0.0
            low = high = 0.0
        if validation is not None and validation[1] > high:
            low, high = validation
        weights = held.adapter_weights + held.ema
        optimizer = held.optimizer if phase == "sample" else 0.0
        if not first:
            decode = 0.0
        # The VAE decodes after the denoising passes: the larger of the two is the peak.
        decoded = decode > (low + high) / 2.0
        return Terms(
            transformer=(held.transformer, held.transformer * w),
            in_flight=(held.in_flight_pass, held.in_flight_pass),
            text_encoder=(te, te * te_slack),
            vae=(held.vae + held.after_sample, (held.vae + held.after_sample) * te_slack),
            trainable=(weights, weights),
            optimizer=(optimizer, optimizer),
            activations=zero if decoded else (low, high),
            vae_pass=(decode, decode) if decoded else zero,
            certainty=self.certainty,
        )

    def _sample_unloads_te(self) -> bool:
        """Whether sampling moves the text encoder back off the card before denoising."""
        if self.facts is None or not self.facts.low_vram_sample_unloads_te:
            return False
        if self.process.model.low_vram is not True:
            return False
        self.notes.append(
            "With low_vram the sampling pipeline holds the text encoder only while it encodes "
            "the prompts, then moves it to the CPU before the denoising passes."
        )
        return True


@dataclass(frozen=True)
class _Held:
    """Bytes one process holds on one card (before the band's slack)."""

    transformer: float
    transformer_load: float
    text_encoder: float
    te_load: float
    vae: float
    adapter_weights: float
    gradients: float
    ema: float
    optimizer: float
    in_flight_pass: float = 0.0
    """Weight copies made for a forward pass (offloading's staging rings)."""
    in_flight_step: float = 0.0
    """Weight copies made for a training step (both rings, and dequantized copies kept)."""
    after_sample: float = 0.0
    """Modules a sample moves to the card and nothing moves back (LTX-2's vocoder)."""
