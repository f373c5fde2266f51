"""Real SQLite files shaped like AI Toolkit's jobs database, ``aitk_db.db``, for tests.

``SCHEMA`` is the DDL that Prisma's SQLite connector creates for the toolkit's
``ui/prisma/schema.prisma`` (models ``Settings``, ``Queue`` and ``Job`` with their
unique keys and indexes), written out by hand because Prisma's CLI cannot fetch its
engines here. ``OLDEST_JOB_TABLE`` is the ``Job`` table of the first schema the UI
shipped (before the queue, pids and captioning). Rows are written the way Prisma
writes them: DateTime as integer milliseconds since the epoch, Boolean as 0/1, and
``job_config`` as ``JSON.stringify`` output (compact, non-ASCII kept as is).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any, Final

SCHEMA: Final = """
CREATE TABLE "Settings" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "key" TEXT NOT NULL,
    "value" TEXT NOT NULL
);
CREATE TABLE "Queue" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "gpu_ids" TEXT NOT NULL,
    "is_running" BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE "Job" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "name" TEXT NOT NULL,
    "gpu_ids" TEXT NOT NULL,
    "job_config" TEXT NOT NULL,
    "created_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" DATETIME NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'stopped',
    "stop" BOOLEAN NOT NULL DEFAULT false,
    "return_to_queue" BOOLEAN NOT NULL DEFAULT false,
    "step" INTEGER NOT NULL DEFAULT 0,
    "total_steps" INTEGER,
    "info" TEXT NOT NULL DEFAULT '',
    "speed_string" TEXT NOT NULL DEFAULT '',
    "queue_position" INTEGER NOT NULL DEFAULT 0,
    "pid" INTEGER,
    "job_type" TEXT NOT NULL DEFAULT 'train',
    "job_ref" TEXT,
    "save_now" BOOLEAN NOT NULL DEFAULT false,
    "sample_now" BOOLEAN NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX "Settings_key_key" ON "Settings"("key");
CREATE UNIQUE INDEX "Queue_gpu_ids_key" ON "Queue"("gpu_ids");
CREATE INDEX "Queue_gpu_ids_idx" ON "Queue"("gpu_ids");
CREATE UNIQUE INDEX "Job_name_key" ON "Job"("name");
CREATE INDEX "Job_status_idx" ON "Job"("status");
CREATE INDEX "Job_gpu_ids_idx" ON "Job"("gpu_ids");
CREATE INDEX "Job_job_type_idx" ON "Job"("job_type");
CREATE INDEX "Job_job_ref_idx" ON "Job"("job_ref");
"""

OLDEST_JOB_TABLE: Final = """
CREATE TABLE "Job" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "name" TEXT NOT NULL,
    "gpu_ids" TEXT NOT NULL,
    "job_config" TEXT NOT NULL,
    "created_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" DATETIME NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'stopped',
    "stop" BOOLEAN NOT NULL DEFAULT false,
    "step" INTEGER NOT NULL DEFAULT 0,
    "info" TEXT NOT NULL DEFAULT '',
    "speed_string" TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX "Job_name_key" ON "Job"("name");
"""

#: A moment in 2025, in Prisma's storage format (ms since the epoch).
CREATED_MS: Final = 1_745_000_000_000


def ui_job_config(name: str, **train: Any) -> dict[str, Any]:
    """A job config shaped like the one AI Toolkit's UI saves for an image LoRA."""
    return {
        "job": "extension",
        "config": {
            "name": name,
            "process": [
                {
                    "type": "diffusion_trainer",
                    "training_folder": "output",
                    "sqlite_db_path": "./aitk_db.db",
                    "device": "cuda",
                    "trigger_word": "zxq ✨ café",
                    "performance_log_every": 10,
                    "network": {"type": "lora", "linear": 32, "linear_alpha": 32},
                    "save": {"dtype": "bf16", "save_every": 250, "max_step_saves_to_keep": 4},
                    "datasets": [
                        {
                            "folder_path": "/data/datasets/café_photos",
                            "caption_ext": "txt",
                            "cache_latents_to_disk": True,
                            "resolution": [512, 768, 1024],
                        }
                    ],
                    "train": {
                        "batch_size": 4,
                        "steps": 3000,
                        "gradient_accumulation": 1,
                        "train_unet": True,
                        "train_text_encoder": False,
                        "gradient_checkpointing": False,
                        "noise_scheduler": "flowmatch",
                        "optimizer": "adamw8bit",
                        "lr": 0.0001,
                        "dtype": "bf16",
                        **train,
                    },
                    "model": {
                        "name_or_path": "black-forest-labs/FLUX.1-dev",
                        "arch": "flux",
                        "quantize": True,
                        "low_vram": False,
                    },
                    "sample": {
                        "sampler": "flowmatch",
                        "sample_every": 250,
                        "width": 1024,
                        "height": 1024,
                        "samples": [{"prompt": "a portrait of zxq, 東京の夜, neon 🌃"}],
                        "neg": "",
                        "seed": 42,
                        "walk_seed": True,
                        "guidance_scale": 4,
                        "sample_steps": 25,
                    },
                }
            ],
        },
        "meta": {"name": "[name]", "version": "1.0"},
    }


def stringify(config: dict[str, Any]) -> str:
    """``JSON.stringify(config)``: compact, key order kept, non-ASCII characters as is."""
    return json.dumps(config, separators=(",", ":"), ensure_ascii=False)


def make_db(path: Path, *, schema: str = SCHEMA) -> Path:
    """Create an empty jobs database at ``path`` with ``schema``."""
    conn = sqlite3.connect(path)
    try:
        conn.executescript(schema)
        conn.commit()
    finally:
        conn.close()
    return path


def add_job(
    db: Path,
    name: str,
    *,
    config: dict[str, Any] | None = None,
    text: str | None = None,
    status: str = "error",
    step: int = 0,
    info: str = "CUDA out of memory. Tried to allocate 2.00 GiB",
    created_ms: int = CREATED_MS,
    **columns: Any,
) -> str:
    """Insert a job the way the UI and the trainer leave it; return its id."""
    job_id = str(uuid.uuid4())
    values: dict[str, Any] = {
        "id": job_id,
        "name": name,
        "gpu_ids": "0",
        "job_config": text if text is not None else stringify(config or ui_job_config(name)),
        "created_at": created_ms,
        "updated_at": created_ms,
        "status": status,
        "step": step,
        "info": info,
        **columns,
    }
    names = ", ".join(f'"{key}"' for key in values)
    marks = ", ".join("?" for _ in values)
    conn = sqlite3.connect(db)
    try:
        conn.execute(f'INSERT INTO "Job" ({names}) VALUES ({marks})', tuple(values.values()))
        conn.commit()
    finally:
        conn.close()
    return job_id


def set_setting(db: Path, key: str, value: str) -> None:
    """Set one row of the UI's ``Settings`` table."""
    conn = sqlite3.connect(db)
    try:
        conn.execute('INSERT INTO "Settings" ("key", "value") VALUES (?, ?)', (key, value))
        conn.commit()
    finally:
        conn.close()


def job_row(db: Path, name: str) -> dict[str, Any] | None:
    """Every column of the job called ``name``, or None."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute('SELECT * FROM "Job" WHERE "name" = ?', (name,)).fetchone()
    finally:
        conn.close()
    return dict(row) if row is not None else None


def all_rows(db: Path) -> list[dict[str, Any]]:
    """Every job row, ordered by name (to compare a database before and after)."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute('SELECT * FROM "Job" ORDER BY "name"').fetchall()
    finally:
        conn.close()
    return [dict(row) for row in rows]
