"""Unit tests of the domain (`wizard/`'s formats, rules, log reading and storage), by room."""
