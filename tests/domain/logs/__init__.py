"""Log reading: the streaming scanner, its reader, following a live log, real OOM reports."""
