"""The Textual app: one screen per wizard stage, rendering what ``wizard`` computes."""
