"""A dataset's folder on this machine, counted as AI Toolkit lists it.

AI Toolkit's dataset (``toolkit/data_loader.py`` at 27a03a91, ``AiToolkitDataset.__init__``)
walks ``folder_path`` and its subfolders, skips folders and files whose names start with a dot
and the files of a ``_controls`` folder, and takes the files whose lowercased names end in
one of its extensions: images always (:data:`IMAGE_EXTENSIONS`), videos as well in a video
dataset (:data:`VIDEO_EXTENSIONS`; each image there is a one-frame item). This module counts
both; what they cost is the rules' to say (:mod:`oom_wizard.rules.host`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

IMAGE_EXTENSIONS: Final = (".jpg", ".jpeg", ".png", ".webp")
"""``image_extensions`` of ``toolkit/data_loader.py:39``."""
VIDEO_EXTENSIONS: Final = (".mp4", ".avi", ".mov", ".webm", ".mkv", ".wmv", ".m4v", ".flv")
"""``video_extensions`` of ``toolkit/data_loader.py:40``."""
CONTROLS_FOLDER: Final = "_controls"


@dataclass(frozen=True)
class MediaCount:
    """The images and videos of a dataset folder, and where it is.

    Attributes:
        folder: The folder counted.
        images: Files with an image extension.
        videos: Files with a video extension (a video dataset trains on them; an image
            dataset does not list them).
    """

    folder: Path
    images: int
    videos: int = 0


def count_media(folder: Path) -> MediaCount | None:
    """The images and videos under ``folder`` as AI Toolkit lists them (module doc); None when
    it is not a folder on this machine (a config from another machine) or cannot be read."""
    if not folder.is_dir():
        return None
    images = videos = 0
    try:
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            if Path(root).name == CONTROLS_FOLDER:
                continue
            for name in files:
                if name.startswith("."):
                    continue
                lowered = name.lower()
                if lowered.endswith(IMAGE_EXTENSIONS):
                    images += 1
                elif lowered.endswith(VIDEO_EXTENSIONS):
                    videos += 1
    except OSError:
        return None
    return MediaCount(folder, images, videos)
