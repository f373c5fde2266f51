"""When the card's other tenants hold a real share of it, the job is weighed against what is
free, not against the whole card.

The share is the diagnosis' own (``OTHER_PROCESS_SHARE`` of the card and ``OTHER_PROCESS_MIN_GIB``
at least): a desktop session's one or two GiB on a 24 GB card is a note, a second job or a
leftover process is the card the job does not have. A leftover trainer held a card at 73 s/it
going to 304 s/it in ai-toolkit PR #948's report: memory that is not free is not the job's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oom_wizard.rules.diagnosis import OTHER_PROCESS_MIN_GIB, OTHER_PROCESS_SHARE
from oom_wizard.spelling import gib

if TYPE_CHECKING:
    from oom_wizard.host.tenants import CardTenants


def real_share(card: CardTenants) -> bool:
    """Whether what others hold on the card is a real share of it (module doc)."""
    held = card.held_gib
    return held >= OTHER_PROCESS_MIN_GIB and held >= OTHER_PROCESS_SHARE * card.total_gib


def room_gib(card: CardTenants) -> float:
    """What the job is weighed against: the card's free memory when others hold a real share,
    else the whole card."""
    return card.free_gib if real_share(card) else card.total_gib


def tenants_words(card: CardTenants) -> str | None:
    """The card's other tenants in a sentence, and what the job is weighed against; None when
    nothing else holds memory on it worth a word."""
    if card.held_gib < 0.05 and not card.tenants:
        return None
    who = card.named()
    held = f"{gib(card.held_gib)} of the {gib(card.total_gib)} card is in use"
    by = f" ({who})" if who else (" (nvidia-smi lists no process for it)" if card.placed else "")
    if real_share(card):
        return (
            f"another process holds a real share of the card: {held}{by}; the job is weighed "
            f"against the {gib(card.free_gib)} free, not the whole card (stop it to have all of it)"
        )
    return f"{held}{by}: a small share, so the job is weighed against the whole card"
