"""Storage: the change log, AI Toolkit's job database and folders, saves that fail or are killed."""
