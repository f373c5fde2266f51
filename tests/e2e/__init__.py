"""End to end in a real terminal (tmux)."""
