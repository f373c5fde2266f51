"""The weights on the card: the transformer's resident part, the copies of its layers made for
a pass (layer offloading's staging rings, the dequantized copies of AI Toolkit's own
quantizers), and the text encoder and the VAE where they live (the account's ``transformer``,
``in_flight``, ``text_encoder`` and ``vae``; their formula and symbols are
:mod:`oom_wizard.rules.memory.account`'s).

The weights' edges: weights × [1, 1 + WEIGHT_SLACK] (quantized models keep some layers
unquantized and carry scales: + QUANT_SLACK), counted at their middle.
"""

from __future__ import annotations

from typing import Final

from oom_wizard.rules.catalog import LeversFile
from oom_wizard.rules.memory.family import BILLION, GIB_BYTES, FamilyFigures
from oom_wizard.rules.shape import offloaded_fractions

WEIGHT_SLACK: Final = 0.03
"""Buffers, norms and embeddings beyond the counted parameters (upper edge of the band)."""


QUANT_SLACK: Final = 0.06
"""A quantized model keeps some layers in full precision and carries scales (upper edge)."""


NON_BLOCK_SHARE: Final = 0.03
"""Without a family's offload figures (memory.yaml ``offload``): the share of the transformer
layer offloading is assumed to leave on the card (a stand-in; measured families leave 0-0.4 %,
HiDream-O1's token embedding 7 %)."""


BLOCKS_IN_FLIGHT: Final = 2
"""Without a family's offload figures: the blocks whose weights are assumed on the card at once
(a stand-in for the staging ring)."""


OFFLOAD_PIPELINE_DEPTH: Final = 4
"""The slots of each of AI Toolkit's staging rings (PIPELINE_DEPTH, ``AI_TOOLKIT_OFFLOAD_DEPTH``;
toolkit/memory_management/manager_modules.py:27 at 27a03a91). A slot keeps its weight until the
layer ``depth`` places later replaces it, and the new copy is made before the old one is let go
(:88, :111): depth + 1 copies through a forward pass. The forward ring is never emptied, so in a
training step the backward ring's depth + 1 come on top of its depth (:57-59); AI Toolkit's own
quantizers stage through the forward ring only (:743-763). Counted at the family's largest
layer."""


class Weights:
    """The weights one process holds on the card, in bytes: ``transformer`` (resident),
    ``transformer_load`` (while it is quantized on the card), ``in_flight_pass`` and
    ``in_flight_step`` (the layers' copies made for a forward pass and a training step),
    ``text_encoder``, ``te_load``, ``vae`` and ``after_sample`` (what a sample leaves on the
    card: memory.yaml's ``params.after_sample``); with the bytes per weight (``full``) and the
    share of the transformer layer offloading moves (``offloaded``, ``moved_share``)."""

    def __init__(self, figures: FamilyFigures) -> None:
        self.figures = figures
        self.notes = figures.notes
        levers = self.figures.presets.levers
        model, train = self.figures.process.model, self.figures.process.train
        self.full = levers.weight_bytes(train.dtype)
        quantize_te = model.quantize_te if "quantize_te" in model.present else model.quantize
        self.quantized = model.quantize is True
        b_t = min(self.full, levers.quantized_bytes(model.qtype)) if self.quantized else self.full
        b_te = dtype_bytes(levers, model.te_dtype, self.full)
        if quantize_te is True:
            b_te = min(b_te, levers.quantized_bytes(model.qtype_te))
        bits = model.text_encoder_bits or 16
        if bits < 16:
            b_te = min(b_te, bits / 8.0)
        b_vae = dtype_bytes(levers, model.vae_dtype, self.full)
        kwargs = model.model_kwargs
        comfy = kwargs is not None and kwargs.use_comfy_weights is True
        if comfy:  # ComfyUI's pre-quantized file: int8/fp8 (1 byte), or the qtype's when set
            self.quantized = True
            b_t = min(self.full, levers.quantized_bytes(model.qtype) if model.qtype else 1.0)
            self.notes.append(
                "model_kwargs.use_comfy_weights: the transformer is loaded pre-quantized, at "
                "its file's precision, and never held at full precision."
            )
        experts = 1 if model.low_vram is True else self.figures.experts
        o_t, o_te = offloaded_fractions(self.figures.process, self.figures.facts)
        self.offloaded = o_t
        whole = self.figures.p_t * BILLION * b_t * experts
        block = self.figures.largest_block_share()
        own_quantizer = self.quantized and not comfy and self._dequantized_per_forward(model.qtype)
        if self.quantized and "|" in (model.qtype or ""):
            # config_modules.py:741-743 reads the adapter from the qtype; quantize.py:391-394
            # puts it on the card, and the memory manager offloads its layers with the model's
            # (manager.py:126-133).
            self.notes.append(
                "The accuracy recovery adapter named in model.qtype is a LoRA beside every "
                "quantized layer, on the card at the model's dtype unless layer offloading moves "
                "it with its layers: its rank is in the adapter's file, so it is not counted."
            )
        resident, ring_pass, ring_step = self._offload_residency(o_t, whole, b_t, own_quantizer)
        self.transformer = resident
        kept = self._dequantized_kept(block, own_quantizer)
        self.in_flight_pass = ring_pass
        self.in_flight_step = ring_step + kept
        # A loader that quantizes in place on the card peaks at the final residency plus one
        # block at full precision (with low_vram it quantizes in system RAM, and pre-quantized
        # weights are never at full precision); quantize_model's loaders (levers.yaml's
        # quantized_off_card) send each block back to system RAM before the rest arrives.
        loader = self.figures.facts.python_class if self.figures.facts is not None else None
        off_card = loader in levers.quantized_off_card
        quantizing = (
            self.figures.p_t * BILLION * self.full * block
            if self.quantized and not comfy and model.low_vram is not True and not off_card
            else 0.0
        )
        self.transformer_load = resident + quantizing
        beside = self.figures.family.params.beside if self.figures.family is not None else 0.0
        if beside:
            # ltx2.py get_noise_prediction moves the connectors to the transformer's device
            # at the first pass; quantize_model and the memory manager see the transformer only
            self.transformer = resident + beside * BILLION * self.full
            self.notes.append(
                f"The text connectors and text projection ({beside:.2f} B parameters) stay on "
                "the card beside the transformer from the first pass on, at the train dtype: "
                "AI Toolkit neither quantizes nor offloads them."
            )
        # ltx2.py get_generation_pipeline moves the whole pipeline (its vocoder too) to the
        # card for a sample; BaseModel.restore_device_state moves back only the VAE, the
        # transformer, the encoders and the adapter, so the vocoder stays on cuda:0.
        after = self.figures.family.params.after_sample if self.figures.family is not None else 0.0
        self.after_sample = after * BILLION * self.full
        te_on_cpu = on_cpu(model.te_device)
        self.text_encoder = 0.0 if te_on_cpu else self._text_encoder_on_card(o_te, b_te)
        self.te_load = self.text_encoder
        self.vae = 0.0 if on_cpu(model.vae_device) else self.figures.p_vae * BILLION * b_vae
        if te_on_cpu:
            self.notes.append("The text encoder lives on the CPU (te_device): 0 GiB on the card.")
        if on_cpu(model.vae_device):
            self.notes.append("The VAE lives on the CPU (vae_device): 0 GiB on the card.")

    def _offload_residency(
        self, o_t: float, whole: float, b_t: float, own_quantizer: bool
    ) -> tuple[float, float, float]:
        """(what stays resident, the staging rings through a forward pass, through a training
        step) of the transformer, in bytes, under layer offloading of the share ``o_t`` (whole
        ``whole`` bytes without it).

        AI Toolkit's memory manager moves each Linear and Conv2d of the whole model with the
        probability ``o_t`` and keeps the rest (norms, embeddings, Conv3d, tables; memory.yaml's
        ``offload``; toolkit/memory_management/manager.py:102-168). The moved weights come to
        the card through rings of :data:`OFFLOAD_PIPELINE_DEPTH` slots: a weight at the compute
        dtype (a torchao or quanto weight is dequantized into its slot, its stored copy beside
        it meanwhile: manager_modules.py:290-303), or the codes of AI Toolkit's own quantizers,
        which run their forward on them (:727-763).
        """
        self.moved_share = 0.0
        self.largest_layer = 0.0
        if o_t <= 0:
            return whole, 0.0, 0.0
        figures = self.figures.family.offload if self.figures.family is not None else None
        if figures is None or self.figures.p_t <= 0:
            block = self.figures.largest_block_share()
            stays = NON_BLOCK_SHARE + BLOCKS_IN_FLIGHT * block
            self.moved_share = o_t * (1.0 - stays)
            self.notes.append(
                f"Layer offloading moves {o_t:.0%} of the transformer's weights to system RAM; "
                f"what stays on the card is a stand-in ({NON_BLOCK_SHARE:.0%} of it and "
                f"{BLOCKS_IN_FLIGHT} blocks in flight): this arch's layers are not counted."
            )
            return whole * (1.0 - o_t + o_t * stays), 0.0, 0.0
        kept = min(figures.resident_params / (self.figures.p_t * BILLION), 1.0)
        layer = figures.largest_layer_params
        self.moved_share = o_t * (1.0 - kept)
        self.largest_layer = float(layer)
        depth = OFFLOAD_PIPELINE_DEPTH
        if own_quantizer:  # codes through the forward ring only; autograd keeps the rest
            ring_pass = ring_step = (depth + 1) * layer * b_t
        else:
            stored = layer * b_t if b_t < self.full else 0.0  # the stored copy while it dequantizes
            ring_pass = (depth + 1) * layer * self.full + stored
            ring_step = (2 * depth + 1) * layer * self.full + stored
        self.notes.append(
            f"Layer offloading moves {o_t:.0%} of the transformer's Linear and Conv2d weights to "
            f"system RAM; its other parameters ({kept:.1%}) stay on the card, and the staging "
            f"rings hold copies of up to {2 * depth + 1} of its layers in a training step (at "
            f"most {ring_step / GIB_BYTES:.2f} GiB, {depth + 1} in a sample's pass); each "
            "offloaded layer keeps its input for the backward pass."
        )
        return whole * (1.0 - o_t * (1.0 - kept)), ring_pass, ring_step

    def _dequantized_per_forward(self, qtype: str | None) -> bool:
        """Whether ``qtype`` is one of AI Toolkit's own quantizers that dequantize a layer at
        every forward (levers.yaml's ``dequantized_per_forward``)."""
        levers = self.figures.presets.levers
        name = (qtype or levers.default_qtype).split("|", 1)[0].strip().lower()
        return name in levers.dequantized_per_forward

    def _dequantized_kept(self, block: float, own_quantizer: bool) -> float:
        """Bytes of dequantized weights autograd keeps for backward in a training step.

        AI Toolkit's own quantizers (OstrisLinear: uint2-8, orbit, nvfp4) build the layer's
        weight at the compute dtype under no_grad and call F.linear with it
        (toolkit/util/ostris_quant.py:66-72, uintx_quant.py:198-205): F.linear keeps that copy
        for the input's gradient, offloaded or not. With gradient checkpointing only the block
        being recomputed holds them; without, every Linear of the transformer does.
        """
        if not own_quantizer or self.figures.p_t <= 0:
            return 0.0
        figures = self.figures.family.offload if self.figures.family is not None else None
        kept = (
            figures.resident_params / (self.figures.p_t * BILLION) if figures is not None else 0.0
        )
        linear = self.figures.p_t * BILLION * max(1.0 - kept, 0.0)
        checkpointing = self.figures.process.train.gradient_checkpointing is not False
        share = block if checkpointing else 1.0
        found = linear * share * self.full
        qtype = self.figures.process.model.qtype
        self.notes.append(
            f"AI Toolkit's {qtype or 'own'} quantizer dequantizes each layer "
            "at every forward, and autograd keeps that copy until backward: "
            + (
                f"the recomputed block's layers ({found / GIB_BYTES:.2f} GiB) with checkpointing."
                if checkpointing
                else f"every layer of the transformer ({found / GIB_BYTES:.2f} GiB) without "
                "checkpointing."
            )
        )
        return found

    def _text_encoder_on_card(self, o_te: float, b_te: float) -> float:
        """Bytes of the text encoders on the card.

        Their Linear and Conv2d weights at ``b_te``, less the share ``o_te`` text-encoder
        offloading moves to system RAM; their other parameters (token embeddings above all,
        memory.yaml's ``offload.text_encoder_resident_params``) at ``te_dtype``: neither
        quantizer touches them (quanto and torchao quantize Linear and Conv2d weights), and the
        memory manager moves them to the card (toolkit/memory_management/manager.py:56-63).
        """
        whole = self.figures.p_te * BILLION
        figures = self.figures.family.offload if self.figures.family is not None else None
        resident = figures.text_encoder_resident_params if figures is not None else None
        if resident is None:
            if o_te > 0:
                self.notes.append(
                    "Text-encoder offloading: what stays of the text encoder on the card (its "
                    "token embedding) is not counted for this arch."
                )
            return whole * b_te * (1.0 - o_te)
        te_dtype = dtype_bytes(
            self.figures.presets.levers, self.figures.process.model.te_dtype, self.full
        )
        moved = max(whole - resident, 0.0)
        return moved * b_te * (1.0 - o_te) + min(resident, whole) * max(te_dtype, b_te)


def dtype_bytes(levers: LeversFile, dtype: str | None, default: float) -> float:
    """Bytes per weight of ``dtype``; ``default`` (the model's) when unset or unknown."""
    if not dtype:
        return default
    return levers.dtype_bytes.get(dtype.strip().lower(), default)


def on_cpu(device: str | None) -> bool:
    return device is not None and device.strip().lower().startswith("cpu")
