"""Written mathematics as data (the hand-form nodes); printed only by ``document/``."""
